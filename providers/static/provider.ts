import type { Registry } from 'prom-client';
import type { CloudProvider, ProviderContext, Routes } from '../../src/cloud/types.ts';
import type { Logger } from '../../src/log.ts';
import { registerReloadMetrics } from '../../src/config-file/metrics.ts';
import { processSecrets, type SecretSource } from '../../src/config-file/secrets.ts';
import { providerFileOptions, watchProviderConfig, type ConfigReloadResult, type ProviderFileOptions, type WatchedConfig } from '../../src/config-file/watch.ts';
import { formatConfigErrors } from '../../src/config-file/yaml-load.ts';
import { FileBackedProvider } from '../../src/config-file/file-backed-provider.ts';
import { ProviderBgp } from '../../src/announce/bgp/source.ts';
import type { AddressAllocator } from '../../src/lb/allocator.ts';
import { DEFAULT_REBUILD_RETRY, PoolLoadBalancer, rebuildFromServices, type RebuildRetry } from '../../src/lb/load-balancer.ts';
import { registerPoolMetrics } from '../../src/lb/metrics.ts';
import { perRegistry } from '../../src/util/per-registry.ts';
import { loadStaticConfig } from './config-load.ts';
import { STATIC_PROVIDER_ID_PREFIX, type StaticConfig } from './config-model.ts';
import { StaticInstances } from './instances.ts';
import { Inventory } from './inventory.ts';
import { RedfishClientPool } from './redfish.ts';

/**
 * The `static` provider: a bare-metal inventory (InstancesV2) and load-balancer addresses from
 * pools, both from one YAML file. With a `bgp` section, pod CIDR routes (the Routes interface)
 * and the addresses of `announce: bgp` pools are announced by the app's BGP speaker
 * (src/announce/bgp); without one, no routes: the route controller stays off.
 *
 * The file is watched: a valid edit takes effect at once (no restart); an invalid one is logged,
 * counted (edge_ccm_static_config_reload_errors_total) and reported to onReload listeners, and
 * the last good configuration stays in force, so nothing ever looks gone because of a typo.
 * A good edit also tells onChange listeners (the node controller re-syncs addresses and labels).
 */

export const STATIC_PROVIDER_NAME = 'static';

export type ReloadResult = ConfigReloadResult<StaticConfig>;

export type ReloadListener = (result: ReloadResult) => void;

export interface StaticProviderOptions extends ProviderFileOptions {
  secrets?: SecretSource;
  /** Backoff bounds when listing services for the rebuild fails. */
  rebuildRetry?: RebuildRetry;
}

export class StaticProvider extends FileBackedProvider<StaticConfig> implements CloudProvider {
  readonly providerName = STATIC_PROVIDER_NAME;
  /** Its nodes' providerIDs are static://... */
  readonly platform = STATIC_PROVIDER_ID_PREFIX.slice(0, -3);
  readonly instances: StaticInstances;
  readonly loadBalancer: PoolLoadBalancer;
  readonly bgp: ProviderBgp;
  /** Pod CIDRs over BGP, when the file at start announces them. */
  readonly routes?: Routes;
  /** Inventory edits change labels while nodes live: the node controller re-syncs them. */
  readonly relabelNodes = true;

  private config: StaticConfig;
  private inventory: Inventory;
  private readonly allocator: AddressAllocator;
  private readonly redfish: RedfishClientPool;
  protected readonly file: WatchedConfig<StaticConfig>;
  private readonly logger: Logger;

  constructor(initial: StaticConfig, private readonly options: StaticProviderOptions) {
    super();
    this.logger = options.logger;
    this.config = initial;
    this.inventory = new Inventory(initial.inventory);
    this.redfish = new RedfishClientPool(options.logger.with({ component: 'redfish' }));
    this.instances = new StaticInstances(() => this.inventory, this.redfish, () => this.config.nodeRules);
    ({ allocator: this.allocator, loadBalancer: this.loadBalancer } = PoolLoadBalancer.forConfig(initial.loadBalancer, () => this.config.loadBalancer, options.logger.with({ component: 'static-lb' })));
    this.bgp = new ProviderBgp(initial);
    this.routes = this.bgp.routesAtStart();
    this.file = watchProviderConfig('static provider', options, (text) => loadStaticConfig(text, options.secrets ?? processSecrets), (config) => this.apply(config));
  }

  /** The configuration in force (the last good one). */
  currentConfig(): StaticConfig {
    return this.config;
  }

  /** initialize runs once per leadership term, on the process's one registry. */
  private readonly metricsOnce = perRegistry((registry) => (this.registerMetrics(registry), true));

  /**
   * Starts watching the file and rebuilds the address allocator from every service (GET
   * /api/v1/services, paged), retrying until it succeeds or the signal aborts: until then
   * ensureLoadBalancer answers "retry after" rather than risk handing out a held address.
   * Called at the start of each leadership term; the allocator is forgotten when it ends.
   */
  async initialize(ctx: ProviderContext): Promise<void> {
    if (ctx.registry) this.metricsOnce(ctx.registry);
    await this.file.start();
    this.loadBalancer.reportEventsTo(ctx.recorder);
    this.bgp.beginTerm(ctx.signal);
    await rebuildFromServices(this.loadBalancer, ctx, this.options.rebuildRetry ?? DEFAULT_REBUILD_RETRY, this.logger);
  }

  /** Registers the provider's metrics (pool usage, reloads) on the process registry. */
  registerMetrics(registry: Registry): void {
    registerPoolMetrics(registry, () => this.allocator.usage(), STATIC_PROVIDER_NAME);
    registerReloadMetrics(registry, () => this.file.reloads(), STATIC_PROVIDER_NAME);
  }

  async close(): Promise<void> {
    this.file.stop();
    await this.redfish.close();
  }

  private apply(config: StaticConfig): void {
    // Built before anything is replaced: if it throws, the old configuration stays whole.
    const inventory = new Inventory(config.inventory);
    this.config = config;
    this.inventory = inventory;
    this.allocator.setPools(config.loadBalancer.pools, config.loadBalancer);
    this.bgp.use(config);
    void this.redfish.retain(config.inventory.machines.flatMap((m) => (m.redfish ? [m.redfish] : [])));
    this.logger.info('static provider configuration loaded', {
      machines: config.inventory.machines.length,
      pools: config.loadBalancer.pools.length,
    });
  }
}

/** Builds the provider from the factory input; an invalid initial file is an error listing every problem. */
export function createStaticProvider(input: {
  config: string | undefined;
  configPath: string | undefined;
  logger: Logger;
  secrets?: SecretSource;
  watch?: StaticProviderOptions['watch'];
  rebuildRetry?: StaticProviderOptions['rebuildRetry'];
}): StaticProvider {
  if (input.config === undefined) input.logger.warn('static provider without --cloud-config: no machines, no address pools');
  const loaded = loadStaticConfig(input.config ?? '', input.secrets ?? processSecrets);
  if (!loaded.ok) {
    throw new Error(`invalid static provider configuration:\n${formatConfigErrors(input.configPath, loaded.errors)}`);
  }
  return new StaticProvider(loaded.config, { ...providerFileOptions(input, loaded.warnings), secrets: input.secrets, rebuildRetry: input.rebuildRetry });
}
