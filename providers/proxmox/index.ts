import type { ProviderRegistry } from '../../src/cloud/registry.ts';
import { loadProxmoxConfig } from './config-load.ts';
import { PROXMOX_PROVIDER_NAME, createProxmoxProvider } from './provider.ts';

/** The proxmox provider's public surface: what the app, the CLI and the tests import. */
export { PROXMOX_PROVIDER_NAME, ProxmoxProvider, createProxmoxProvider, type ProxmoxProviderOptions } from './provider.ts';
export { loadProxmoxConfig, type ProxmoxConfigLoadResult } from './config-load.ts';
export type { ProxmoxConfig, ProxmoxCluster, AddressPolicy, InstanceTypeNaming, ProxmoxMatchCriterion } from './config-model.ts';
export { PROXMOX_PROVIDER_ID_PREFIX } from './config-model.ts';
export { ProxmoxApi, ProxmoxApiError, REQUEST as PROXMOX_REQUEST } from './api.ts';
export { parseProviderID, providerIDOf } from './matching.ts';

export function registerProxmoxProvider(registry: ProviderRegistry): void {
  registry.register(
    PROXMOX_PROVIDER_NAME,
    (input) => createProxmoxProvider(input),
    (text) => {
      const result = loadProxmoxConfig(text);
      return result.ok ? (result.warnings ?? []).map((w) => ({ ...w, warning: true })) : result.errors;
    },
  );
}
