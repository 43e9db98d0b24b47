import type { Registry } from 'prom-client';
import type { CloudProvider, Instances, ProviderContext } from '../../src/cloud/types.ts';
import { currentInstances } from '../../src/cloud/current-instances.ts';
import type { Logger } from '../../src/log.ts';
import type { BackoffBounds } from '../../src/util/backoff.ts';
import { processSecrets, type SecretSource } from '../../src/config-file/secrets.ts';
import { providerFileOptions, type ConfigReloadResult } from '../../src/config-file/watch.ts';
import { formatConfigErrors } from '../../src/config-file/yaml-load.ts';
import { SharedSectionsProvider, type SharedSectionsProviderOptions } from '../../src/shared-sections-provider.ts';
import { ProxmoxApi } from './api.ts';
import { PROXMOX_PROVIDER_ID_PREFIX, type ProxmoxCluster, type ProxmoxConfig } from './config-model.ts';
import { loadProxmoxConfig } from './config-load.ts';
import { ProxmoxInstances } from './instances.ts';
import type { ProxmoxClusterView } from './matching.ts';
import { registerProxmoxMetrics, type ApiMetrics } from './metrics.ts';
import { SnapshotCache } from './snapshot.ts';
import { VmDetails } from './vm-details.ts';
import { sleep } from '../../src/util/time.ts';
import { errorMessage } from '../../src/util/errors.ts';

/**
 * The `proxmox` provider: nodes are QEMU VMs of one or more Proxmox VE clusters (InstancesV2,
 * read-only API use), and load-balancer addresses come from the shared address pools
 * (src/lb), configured in the same file. Routes and announcements over BGP with
 * a `bgp` section (src/announce/bgp), as every provider; without one, no routes.
 *
 * With `topologyLabelResync: true` it asks the node controller to keep cloud labels in line
 * (relabelNodes) and tells it (onChange) when a VM's host changed between two VM lists (a live
 * migration), reading the list every resyncPeriodSeconds when nothing else does.
 *
 * The file is watched as the static provider's is: a good edit takes effect without a restart
 * (pools and classes at once; clusters, matching, addresses and instance types through a new
 * set of cluster views swapped in whole, so a call under way finishes on the views it started
 * with) and tells onChange listeners; a rejected edit is logged, counted and reported to
 * onConfigRejected listeners, and the last good configuration stays in force.
 * topologyLabelResync is read at start only (relabelNodes is).
 */

export const PROXMOX_PROVIDER_NAME = 'proxmox';

export interface ProxmoxProviderOptions extends SharedSectionsProviderOptions {
  /** Reads tokenSecretFile, passwordFile, caFile and the *Env variables, at start and on each reload. */
  secrets?: SecretSource;
  /** API back-off bounds (tests shorten them); default from each cluster's maxBackoffSeconds. */
  backoff?: BackoffBounds;
  now?: () => number;
}

/** One configuration in force and what answers from it; replaced whole by a reload. */
interface Generation {
  config: ProxmoxConfig;
  views: readonly ProxmoxClusterView[];
  instances: ProxmoxInstances;
}

export class ProxmoxProvider extends SharedSectionsProvider<ProxmoxConfig> implements CloudProvider {
  readonly providerName = PROXMOX_PROVIDER_NAME;
  /** Its nodes' providerIDs are proxmox://REGION/VMID. */
  readonly platform = PROXMOX_PROVIDER_ID_PREFIX.slice(0, -3);
  /** Stable for the app; each call is answered by the generation in force when it starts. */
  readonly instances: Required<Instances>;
  /** topologyLabelResync as read at start: the node controller reads it once. */
  readonly relabelNodes: boolean;

  private generation: Generation;
  /** onChange listeners, as told of live migrations (with topologyLabelResync); the file tells its own. */
  private readonly moveListeners = new Set<() => void>();
  private readonly stop = new AbortController();
  private metrics?: ApiMetrics;
  private poller?: Promise<void>;

  constructor(initial: ProxmoxConfig, private readonly options: ProxmoxProviderOptions) {
    super(PROXMOX_PROVIDER_NAME, initial, options, (text) => loadProxmoxConfig(text, options.secrets ?? processSecrets));
    this.relabelNodes = initial.topologyLabelResync;
    this.generation = this.build(initial);
    this.instances = currentInstances(() => this.generation.instances);
  }

  currentConfig(): ProxmoxConfig {
    return this.generation.config;
  }

  protected override registerOwnMetrics(registry: Registry): void {
    this.metrics = registerProxmoxMetrics(registry);
  }

  /** The re-sync poller (when on), one per leadership term: the last one ended with its term's signal. */
  protected override beginOwnTerm(ctx: ProviderContext): void {
    if (this.relabelNodes) this.poller = this.pollPlacements(AbortSignal.any([ctx.signal, this.stop.signal]));
  }

  /** Called after each good reload, and when a VM moved to another host (with topologyLabelResync). */
  override onChange(listener: () => void): () => void {
    const offReload = super.onChange(listener);
    this.moveListeners.add(listener);
    return () => {
      offReload();
      this.moveListeners.delete(listener);
    };
  }

  override async close(): Promise<void> {
    await super.close();
    this.stop.abort();
    await this.poller;
  }

  /** A generation for `config`: a cluster whose settings did not change keeps its views (ticket, caches, back-off). */
  private build(config: ProxmoxConfig, previous?: Generation): Generation {
    const views = config.clusters.map((cluster) => previous?.views.find((v) => Bun.deepEquals(v.cluster, cluster, true)) ?? this.view(cluster));
    return { config, views, instances: new ProxmoxInstances(views, config, this.logger.with({ component: 'proxmox' })) };
  }

  private view(cluster: ProxmoxCluster): ProxmoxClusterView {
    const { logger, backoff, now } = this.options;
    const api = new ProxmoxApi(cluster, {
      logger: logger.with({ component: 'proxmox-api', cluster: cluster.region }),
      metrics: () => this.metrics,
      backoff,
      now,
    });
    const snapshots = new SnapshotCache(api, { cacheMs: cluster.cacheMs, haGroups: cluster.zoneFrom === 'haGroup', now });
    snapshots.onPlacementChange((moved) => this.placementChanged(cluster.region, moved));
    const details = new VmDetails(api, cluster.configCacheMs, now);
    // VM configs are cached by VMID: forget destroyed VMs, or clusters with short-lived VMs grow it forever.
    snapshots.onSnapshot((snapshot) => details.retain(new Set(snapshot.byId.keys())));
    return { cluster, api, snapshots, details };
  }

  /**
   * Puts a good configuration's clusters in force: a new generation swapped in one assignment
   * (the pools and BGP follow it, SharedSectionsProvider). The views it drops hold no timers or connections:
   * calls under way finish on them and they are collected.
   */
  protected apply(config: ProxmoxConfig): void {
    const previous = this.generation;
    this.generation = this.build(config, previous);
    if (config.topologyLabelResync !== this.relabelNodes) {
      this.logger.warn('topologyLabelResync changed in the configuration file; it takes effect after a restart', { inForce: this.relabelNodes, inFile: config.topologyLabelResync });
    }
    const kept = this.generation.views.filter((v) => previous.views.includes(v)).length;
    this.logger.info('proxmox provider configuration loaded', {
      clusters: config.clusters.length,
      clustersReconnected: config.clusters.length - kept,
      pools: config.loadBalancer.pools.length,
    });
  }

  private placementChanged(region: string, moved: { vmid: number; from: string; to: string }[]): void {
    if (!this.relabelNodes) return;
    for (const m of moved) this.logger.info('VM moved; node topology labels will be re-synced', { cluster: region, vmid: m.vmid, from: m.from, to: m.to });
    for (const listener of this.moveListeners) {
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
      const { views, config } = this.generation;
      await Promise.all(views.map((v) => v.snapshots.get().catch((e: unknown) => this.logger.debug(2, 'VM list not read', { cluster: v.cluster.region, error: errorMessage(e) }))));
      await sleep(config.resyncPeriodMs, signal).catch(() => undefined);
    }
  }
}

/** Builds the provider from the factory input; an invalid file is an error listing every problem. */
export function createProxmoxProvider(input: {
  config: string | undefined;
  configPath: string | undefined;
  logger: Logger;
  secrets?: SecretSource;
  watch?: ProxmoxProviderOptions['watch'];
  backoff?: BackoffBounds;
  rebuildRetry?: ProxmoxProviderOptions['rebuildRetry'];
}): ProxmoxProvider {
  if (input.config === undefined) throw new Error('the proxmox provider needs --cloud-config (its clusters)');
  const loaded = loadProxmoxConfig(input.config, input.secrets ?? processSecrets);
  if (!loaded.ok) throw new Error(`invalid proxmox provider configuration:\n${formatConfigErrors(input.configPath, loaded.errors)}`);
  return new ProxmoxProvider(loaded.config, { ...providerFileOptions(input, loaded.warnings), secrets: input.secrets, backoff: input.backoff, rebuildRetry: input.rebuildRetry });
}
