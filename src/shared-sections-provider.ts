import type { Registry } from 'prom-client';
import type { ProviderContext, Routes } from './cloud/types.ts';
import type { Logger } from './log.ts';
import { ProviderBgp, type ProviderSections } from './announce/bgp/source.ts';
import { FileBackedProvider } from './config-file/file-backed-provider.ts';
import { registerReloadMetrics } from './config-file/metrics.ts';
import { watchProviderConfig, type ConfigReloadResult, type ProviderFileOptions, type WatchedConfig } from './config-file/watch.ts';
import type { AddressAllocator } from './lb/allocator.ts';
import { DEFAULT_REBUILD_RETRY, PoolLoadBalancer, rebuildFromServices, type RebuildRetry } from './lb/load-balancer.ts';
import { registerPoolMetrics } from './lb/metrics.ts';
import { perRegistry } from './util/per-registry.ts';

export interface SharedSectionsProviderOptions extends ProviderFileOptions {
  /** Backoff bounds when listing services for the load-balancer rebuild fails. */
  rebuildRetry?: RebuildRetry;
}

/**
 * What every provider does at run time with the sections its file shares with the others
 * (src/config-sections.ts), written once: the load balancer over the address pools, the BGP side,
 * the watched file, their metrics, and the start of a leadership term. A provider (static,
 * proxmox, lxd) extends it with what answers for its machines: `apply` builds and swaps that in
 * on a good reload, before the pools and BGP take the new configuration, so a provider whose
 * build throws leaves all of it as it was; its own metrics and its own start of a term are hooks.
 */
export abstract class SharedSectionsProvider<C extends ProviderSections> extends FileBackedProvider<C> {
  readonly loadBalancer: PoolLoadBalancer;
  readonly bgp: ProviderBgp;
  /** Pod CIDRs over BGP, when the file at start announces them. */
  readonly routes?: Routes;
  protected readonly file: WatchedConfig<C>;
  protected readonly logger: Logger;
  private readonly allocator: AddressAllocator;

  /** `name`: the provider's name (its metrics' label, its log components); `load` checks a text of its file. */
  constructor(private readonly name: string, initial: C, private readonly sharedOptions: SharedSectionsProviderOptions, load: (text: string) => ConfigReloadResult<C>) {
    super();
    this.logger = sharedOptions.logger;
    ({ allocator: this.allocator, loadBalancer: this.loadBalancer } = PoolLoadBalancer.forConfig(initial.loadBalancer, () => this.currentConfig().loadBalancer, this.logger.with({ component: `${name}-lb` })));
    this.bgp = new ProviderBgp(initial);
    this.routes = this.bgp.routesAtStart();
    this.file = watchProviderConfig(`${name} provider`, sharedOptions, load, (config) => this.putInForce(config));
  }

  /** The configuration in force (the last good one). */
  abstract currentConfig(): C;

  /** The provider's own part of a good reload: what answers for its machines, built from `config` and swapped in. */
  protected abstract apply(config: C): void;

  /** The provider's own metrics (its API's), registered beside the pools' and the reloads'. */
  protected registerOwnMetrics?(registry: Registry): void;

  /** The provider's own start of a term (a poller, a first call to its API), before the addresses are rebuilt. */
  protected beginOwnTerm?(ctx: ProviderContext): void;

  /** Registers the provider's metrics on `registry`, once however often it is called (initialize calls it each term). */
  registerMetrics(registry: Registry): void {
    this.metricsOnce(registry);
  }

  private readonly metricsOnce = perRegistry((registry): true => {
    registerPoolMetrics(registry, () => this.allocator.usage(), this.name);
    registerReloadMetrics(registry, () => this.file.reloads(), this.name);
    this.registerOwnMetrics?.(registry);
    return true;
  });

  /**
   * Registers the metrics, starts watching the file, and rebuilds the address allocator from every
   * service (GET /api/v1/services, paged), retrying until it succeeds or the signal aborts: until
   * then ensureLoadBalancer answers "retry after" rather than risk handing out a held address.
   * Called at the start of each leadership term; the allocator is forgotten when it ends.
   */
  async initialize(ctx: ProviderContext): Promise<void> {
    if (ctx.registry) this.registerMetrics(ctx.registry);
    await this.file.start();
    this.loadBalancer.reportEventsTo(ctx.recorder);
    this.bgp.beginTerm(ctx.signal);
    this.beginOwnTerm?.(ctx);
    await rebuildFromServices(this.loadBalancer, ctx, this.sharedOptions.rebuildRetry ?? DEFAULT_REBUILD_RETRY, this.logger);
  }

  /** Stops watching the file; a provider with more to stop extends it. */
  close(): void | Promise<void> {
    this.file.stop();
  }

  private putInForce(config: C): void {
    this.apply(config);
    this.allocator.setPools(config.loadBalancer.pools, config.loadBalancer);
    this.bgp.use(config);
  }
}
