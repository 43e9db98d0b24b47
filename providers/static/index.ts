import type { ProviderRegistry } from '../../src/cloud/registry.ts';
import { STATIC_PROVIDER_NAME, createStaticProvider } from './provider.ts';
import { validateStaticConfig } from './config-load.ts';

/** The static provider's public surface: what the app, the CLI and the tests import (pools and the config file are the core's: src/lb, src/config-file). */
export { STATIC_PROVIDER_NAME, StaticProvider, createStaticProvider, type ReloadListener, type ReloadResult, type StaticProviderOptions } from './provider.ts';
export { loadStaticConfig, validateStaticConfig, type StaticConfigLoadResult } from './config-load.ts';
export { STATIC_PROVIDER_ID_PREFIX, type StaticConfig, type Machine, type RedfishTarget } from './config-model.ts';
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
