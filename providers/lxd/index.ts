import type { ProviderRegistry } from '../../src/cloud/registry.ts';
import { loadLxdConfig } from './config-load.ts';
import { LXD_PROVIDER_NAME, createLxdProvider } from './provider.ts';

/** The lxd provider's public surface: what the app, the CLI and the tests import. */
export { LXD_PROVIDER_NAME, LxdProvider, createLxdProvider, type LxdProviderOptions } from './provider.ts';
export { loadLxdConfig, type LxdConfigLoadResult } from './config-load.ts';
export type { LxdConfig, LxdEndpoint } from './config-model.ts';
export { LXD_PROVIDER_ID_PREFIX, DEFAULT_LXD_SOCKET } from './config-model.ts';
export { LxdApi, LxdApiError } from './api.ts';
export { parseProviderID, providerIDOf } from './matching.ts';

export function registerLxdProvider(registry: ProviderRegistry): void {
  registry.register(
    LXD_PROVIDER_NAME,
    (input) => createLxdProvider(input),
    (text) => {
      const result = loadLxdConfig(text);
      return result.ok ? (result.warnings ?? []).map((w) => ({ ...w, warning: true })) : result.errors;
    },
  );
}
