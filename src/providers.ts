import type { ProviderRegistry } from './cloud/registry.ts';
import { registerStaticProvider } from '../providers/static/index.ts';
import { registerProxmoxProvider } from '../providers/proxmox/index.ts';
import { registerLxdProvider } from '../providers/lxd/index.ts';

/**
 * The providers linked into the binary. Each registers itself by name; --cloud-provider picks
 * one. Adding a provider is one import and one line here.
 */
export function registerProviders(registry: ProviderRegistry): void {
  registerStaticProvider(registry);
  registerProxmoxProvider(registry);
  registerLxdProvider(registry);
}
