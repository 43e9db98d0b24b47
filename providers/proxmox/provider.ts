import type { CloudProvider, ProviderContext } from '../../src/cloud/types.ts';
import { errorMessage } from '../../src/kube/errors.ts';
import { sleep } from '../../src/kube/token-bucket.ts';
import type { Logger } from '../../src/log.ts';
import { AddressAllocator } from '../static/allocator.ts';
import { formatConfigErrors, processSecrets } from '../static/config-load.ts';
import type { SecretSource } from '../static/config-resolve.ts';
import { DEFAULT_REBUILD_RETRY, StaticLoadBalancer, rebuildFromServices } from '../static/loadbalancer.ts';
import { registerPoolMetrics } from '../static/metrics.ts';
import { ProxmoxApi, type BackoffOptions } from './api.ts';
import type { ProxmoxConfig } from './config-model.ts';
import { loadProxmoxConfig } from './config-load.ts';
import { ProxmoxInstances } from './instances.ts';
import type { ClusterView } from './matching.ts';
import { registerProxmoxMetrics, type ApiMetrics } from './metrics.ts';
import { SnapshotCache } from './snapshot.ts';
import { VmDetails } from './vm-details.ts';

/**
 * The `proxmox` provider: nodes are QEMU VMs of one or more Proxmox VE clusters (InstancesV2,
 * read-only API use), and load-balancer addresses come from the static provider's pools,
 * configured in the same file. No routes.
 *
 * With `topologyLabelResync: true` it asks the node controller to keep cloud labels in line
 * (relabelNodes) and tells it (onChange) when a VM's host changed between two VM lists (a live
 * migration), reading the list every resyncPeriodSeconds when nothing else does.
 */

export const PROXMOX_PROVIDER_NAME = 'proxmox';

export interface ProxmoxProviderOptions {
  logger: Logger;
  /** API back-off bounds (tests shorten them); default from each cluster's maxBackoffSeconds. */
  backoff?: BackoffOptions;
  /** Backoff bounds when listing services for the load-balancer rebuild fails. */
  rebuildRetry?: { initialMs: number; maxMs: number };
  now?: () => number;
}

export class ProxmoxProvider implements CloudProvider {
  readonly providerName = PROXMOX_PROVIDER_NAME;
  readonly instances: ProxmoxInstances;
  readonly loadBalancer: StaticLoadBalancer;
  readonly relabelNodes: boolean;
  readonly views: readonly ClusterView[];

  private readonly allocator: AddressAllocator;
  private readonly listeners = new Set<() => void>();
  private readonly stop = new AbortController();
  private metrics?: ApiMetrics;
  private poller?: Promise<void>;
  private readonly logger: Logger;

  constructor(readonly config: ProxmoxConfig, private readonly options: ProxmoxProviderOptions) {
    this.logger = options.logger;
    this.relabelNodes = config.topologyLabelResync;
    this.views = config.clusters.map((cluster) => {
      const api = new ProxmoxApi(cluster, {
        logger: options.logger.with({ component: 'proxmox-api', cluster: cluster.region }),
        metrics: () => this.metrics,
        backoff: options.backoff,
        now: options.now,
      });
      const snapshots = new SnapshotCache(api, { cacheMs: cluster.cacheMs, haGroups: cluster.zoneFrom === 'haGroup', now: options.now });
      snapshots.onPlacementChange((moved) => this.placementChanged(cluster.region, moved));
      return { cluster, api, snapshots, details: new VmDetails(api, cluster.configCacheMs, options.now) };
    });
    this.instances = new ProxmoxInstances(this.views, config, options.logger.with({ component: 'proxmox' }));
    this.allocator = new AddressAllocator(config.loadBalancer.pools);
    this.loadBalancer = new StaticLoadBalancer(this.allocator, () => config.loadBalancer.classes, options.logger.with({ component: 'proxmox-lb' }));
  }

  /** Registers the metrics, starts the re-sync poller (when on) and rebuilds the load-balancer addresses. */
  async initialize(ctx: ProviderContext): Promise<void> {
    if (ctx.registry) {
      this.metrics = registerProxmoxMetrics(ctx.registry);
      registerPoolMetrics(ctx.registry, () => this.allocator.usage(), PROXMOX_PROVIDER_NAME);
    }
    if (this.config.topologyLabelResync) this.poller ??= this.pollPlacements(AbortSignal.any([ctx.signal, this.stop.signal]));
    await rebuildFromServices(this.loadBalancer, ctx, this.options.rebuildRetry ?? DEFAULT_REBUILD_RETRY, this.logger);
  }

  /** Called when a VM moved to another host (only with topologyLabelResync). */
  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  async close(): Promise<void> {
    this.stop.abort();
    await this.poller;
  }

  private placementChanged(region: string, moved: { vmid: number; from: string; to: string }[]): void {
    if (!this.config.topologyLabelResync) return;
    for (const m of moved) this.logger.info('VM moved; node topology labels will be re-synced', { cluster: region, vmid: m.vmid, from: m.from, to: m.to });
    for (const listener of this.listeners) {
      try {
        listener();
      } catch (e) {
        this.logger.error('onChange listener failed', { error: errorMessage(e) });
      }
    }
  }

  /** Reads every cluster's VM list each period, so migrations are seen even when no node is NotReady. */
  private async pollPlacements(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      await Promise.all(this.views.map((v) => v.snapshots.get().catch((e: unknown) => this.logger.debug(2, 'VM list not read', { cluster: v.cluster.region, error: errorMessage(e) }))));
      await sleep(this.config.resyncPeriodMs, signal).catch(() => undefined);
    }
  }
}

/** Builds the provider from the factory input; an invalid file is an error listing every problem. */
export function createProxmoxProvider(input: {
  config: string | undefined;
  configPath: string | undefined;
  logger: Logger;
  secrets?: SecretSource;
  backoff?: BackoffOptions;
  rebuildRetry?: ProxmoxProviderOptions['rebuildRetry'];
}): ProxmoxProvider {
  if (input.config === undefined) throw new Error('the proxmox provider needs --cloud-config (its clusters)');
  const loaded = loadProxmoxConfig(input.config, input.secrets ?? processSecrets);
  if (!loaded.ok) throw new Error(`invalid proxmox provider configuration:\n${formatConfigErrors(input.configPath, loaded.errors)}`);
  return new ProxmoxProvider(loaded.config, { logger: input.logger, backoff: input.backoff, rebuildRetry: input.rebuildRetry });
}
