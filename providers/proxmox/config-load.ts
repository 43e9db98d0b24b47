import { loadYamlConfig, processSecrets, type ConfigError, type ConfigWarning } from '../static/config-load.ts';
import type { SecretSource } from '../static/config-resolve.ts';
import type { ProxmoxConfig } from './config-model.ts';
import { resolveProxmoxConfig } from './config-resolve.ts';
import { ProxmoxConfigSchema, salvageConfig, type ResolvableProxmoxConfig } from './config-schema.ts';

/**
 * Reads the proxmox provider's YAML with the static provider's loader: every problem at once,
 * each as `PATH` + line + message, secrets read on the way.
 */

export type ProxmoxConfigLoadResult = { ok: true; config: ProxmoxConfig; warnings?: ConfigWarning[] } | { ok: false; errors: ConfigError[] };

export function loadProxmoxConfig(text: string, secrets: SecretSource = processSecrets): ProxmoxConfigLoadResult {
  return loadYamlConfig(text, {
    schema: ProxmoxConfigSchema,
    salvage: salvageConfig,
    resolve: (raw: ResolvableProxmoxConfig) => resolveProxmoxConfig(raw, secrets),
  });
}
