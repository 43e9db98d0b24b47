import type { Registry } from 'prom-client';
import type { CloudProvider, Instances, ProviderContext } from '../../src/cloud/types.ts';
import { currentInstances } from '../../src/cloud/current-instances.ts';
import type { Logger } from '../../src/log.ts';
import type { BackoffBounds } from '../../src/util/backoff.ts';
import { processSecrets, type SecretSource } from '../../src/config-file/secrets.ts';
import { providerFileOptions } from '../../src/config-file/watch.ts';
import { formatConfigErrors } from '../../src/config-file/yaml-load.ts';
import { SharedSectionsProvider, type SharedSectionsProviderOptions } from '../../src/shared-sections-provider.ts';
import { errorMessage } from '../../src/util/errors.ts';
import { LxdApi } from './api.ts';
import { LXD_PROVIDER_ID_PREFIX, type LxdConfig } from './config-model.ts';
import { loadLxdConfig } from './config-load.ts';
import { InstanceCache } from './instance-list.ts';
import { LxdInstances } from './instances.ts';
import { registerLxdMetrics, type ApiMetrics } from './metrics.ts';
import { readServerInfo } from './server.ts';

/**
 * The `lxd` provider: nodes are LXD (or Incus) instances (InstancesV2, read-only API use), over
 * the daemon's unix socket or its HTTPS endpoint with a client certificate; load-balancer
 * addresses from the shared pools (src/lb), routes and BGP from a `bgp` section, as every
 * provider. The file is watched: a good edit swaps in a new API client and cache whole (a call
 * under way finishes on the old ones), a rejected one keeps the last good configuration.
 */

export const LXD_PROVIDER_NAME = 'lxd';

export interface LxdProviderOptions extends SharedSectionsProviderOptions {
  secrets?: SecretSource;
  backoff?: BackoffBounds;
}

interface Generation {
  config: LxdConfig;
  api: LxdApi;
  instances: LxdInstances;
}

export class LxdProvider extends SharedSectionsProvider<LxdConfig> implements CloudProvider {
  readonly providerName = LXD_PROVIDER_NAME;
  /** Its nodes' providerIDs are lxd://PROJECT/NAME. */
  readonly platform = LXD_PROVIDER_ID_PREFIX.slice(0, -3);
  readonly instances: Required<Instances>;

  private generation: Generation;
  private metrics?: ApiMetrics;

  constructor(initial: LxdConfig, private readonly options: LxdProviderOptions) {
    super(LXD_PROVIDER_NAME, initial, options, (text) => loadLxdConfig(text, options.secrets ?? processSecrets));
    this.generation = this.build(initial);
    this.instances = currentInstances(() => this.generation.instances);
  }

  currentConfig(): LxdConfig {
    return this.generation.config;
  }

  protected override registerOwnMetrics(registry: Registry): void {
    this.metrics = registerLxdMetrics(registry);
  }

  protected override beginOwnTerm(ctx: ProviderContext): void {
    void this.logDaemon(ctx.signal);
  }

  /** Says once which daemon answers (LXD or Incus) and whether it trusts us: the first thing to look at when nothing initialises. */
  private async logDaemon(signal: AbortSignal): Promise<void> {
    const { api } = this.generation;
    try {
      const info = await readServerInfo(api, signal);
      const fields = { endpoint: api.where, daemon: info.daemon, version: info.version, auth: info.auth, clustered: info.clustered };
      if (info.auth === 'trusted') this.logger.info('LXD daemon answers', fields);
      else this.logger.warn('LXD daemon does not trust this client: add its certificate with `lxc config trust add`', fields);
    } catch (e) {
      this.logger.warn('LXD daemon does not answer', { endpoint: api.where, error: errorMessage(e) });
    }
  }

  private build(config: LxdConfig): Generation {
    const api = new LxdApi(config, { logger: this.options.logger.with({ component: 'lxd-api' }), metrics: () => this.metrics, backoff: this.options.backoff });
    const cache = new InstanceCache(api, config);
    return { config, api, instances: new LxdInstances(api, cache, config, this.logger.with({ component: 'lxd' })) };
  }

  protected apply(config: LxdConfig): void {
    this.generation = this.build(config);
    this.logger.info('lxd provider configuration loaded', { endpoint: this.generation.api.where, projects: config.projects === 'all' ? 'all' : config.projects.join(','), pools: config.loadBalancer.pools.length });
  }
}

export function createLxdProvider(input: {
  config: string | undefined;
  configPath: string | undefined;
  logger: Logger;
  secrets?: SecretSource;
  watch?: LxdProviderOptions['watch'];
  backoff?: BackoffBounds;
  rebuildRetry?: LxdProviderOptions['rebuildRetry'];
}): LxdProvider {
  if (input.config === undefined) throw new Error('the lxd provider needs --cloud-config (its region, and the socket or URL of the daemon)');
  const loaded = loadLxdConfig(input.config, input.secrets ?? processSecrets);
  if (!loaded.ok) throw new Error(`invalid lxd provider configuration:\n${formatConfigErrors(input.configPath, loaded.errors)}`);
  return new LxdProvider(loaded.config, { ...providerFileOptions(input, loaded.warnings), secrets: input.secrets, backoff: input.backoff, rebuildRetry: input.rebuildRetry });
}
