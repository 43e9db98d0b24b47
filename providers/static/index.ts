import type { ProviderRegistry } from '../../src/cloud/registry.ts';
import { STATIC_PROVIDER_NAME, createStaticProvider } from './provider.ts';
import { validateStaticConfig } from './config-load.ts';

/** The static provider's public surface: what the app, the CLI and the tests import. */
export { STATIC_PROVIDER_NAME, StaticProvider, createStaticProvider, type ReloadListener, type ReloadResult, type StaticProviderOptions } from './provider.ts';
export { formatConfigErrors, loadStaticConfig, validateStaticConfig, type ConfigError, type ConfigLoadResult } from './config-load.ts';
export type { StaticConfig, Machine, PoolConfig, RedfishTarget } from './config-model.ts';
export type { SecretSource } from './config-resolve.ts';
export { ADDRESS_POOL_ANNOTATION, ALLOW_SHARED_IP_ANNOTATION, LOAD_BALANCER_IPS_ANNOTATION, AllocationError } from './service-request.ts';
export { SITE_LABEL, RACK_LABEL } from './instances.ts';

export function registerStaticProvider(registry: ProviderRegistry): void {
  registry.register(
    STATIC_PROVIDER_NAME,
    (input) => createStaticProvider(input),
    (text, path) => {
      const result = validateStaticConfig(text, path);
      return result.ok ? (result.warnings ?? []).map((w) => ({ ...w, warning: true })) : result.errors;
    },
  );
}
