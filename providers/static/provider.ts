import type { CloudProvider } from '../../src/cloud/types.ts';
import type { Logger } from '../../src/log.ts';
import { processSecrets, type SecretSource } from '../../src/config-file/secrets.ts';
import { providerFileOptions, type ConfigReloadResult } from '../../src/config-file/watch.ts';
import { formatConfigErrors } from '../../src/config-file/yaml-load.ts';
import { SharedSectionsProvider, type SharedSectionsProviderOptions } from '../../src/shared-sections-provider.ts';
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

export interface StaticProviderOptions extends SharedSectionsProviderOptions {
  secrets?: SecretSource;
}

export class StaticProvider extends SharedSectionsProvider<StaticConfig> implements CloudProvider {
  readonly providerName = STATIC_PROVIDER_NAME;
  /** Its nodes' providerIDs are static://... */
  readonly platform = STATIC_PROVIDER_ID_PREFIX.slice(0, -3);
  readonly instances: StaticInstances;
  /** Inventory edits change labels while nodes live: the node controller re-syncs them. */
  readonly relabelNodes = true;

  private config: StaticConfig;
  private inventory: Inventory;
  private readonly redfish: RedfishClientPool;

  constructor(initial: StaticConfig, options: StaticProviderOptions) {
    super(STATIC_PROVIDER_NAME, initial, options, (text) => loadStaticConfig(text, options.secrets ?? processSecrets));
    this.config = initial;
    this.inventory = new Inventory(initial.inventory);
    this.redfish = new RedfishClientPool(options.logger.with({ component: 'redfish' }));
    this.instances = new StaticInstances(() => this.inventory, this.redfish, () => this.config.nodeRules);
  }

  currentConfig(): StaticConfig {
    return this.config;
  }

  override async close(): Promise<void> {
    await super.close();
    await this.redfish.close();
  }

  protected apply(config: StaticConfig): void {
    // Built before anything is replaced: if it throws, the old configuration stays whole.
    const inventory = new Inventory(config.inventory);
    this.config = config;
    this.inventory = inventory;
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
