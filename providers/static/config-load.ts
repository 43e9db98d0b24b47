import { processSecrets, type SecretSource } from '../../src/config-file/secrets.ts';
import { yamlConfigLoader, type ConfigError, type ConfigLoadResult, type ConfigWarning } from '../../src/config-file/yaml-load.ts';
import type { StaticConfig } from './config-model.ts';
import { resolveStaticConfig } from './config-resolve.ts';
import { StaticConfigSchema, salvageStaticConfig } from './config-schema.ts';

export type StaticConfigLoadResult = ConfigLoadResult<StaticConfig>;

/** Parses and validates the static provider's YAML (every problem at once, with its path and line); `secrets` reads passwordFile/caFile/passwordEnv. */
export const loadStaticConfig = yamlConfigLoader({ schema: StaticConfigSchema, salvage: salvageStaticConfig, resolve: resolveStaticConfig });

/** The `edge-ccm validate` entry point: no cluster, no side effects beyond reading secret files. */
export function validateStaticConfig(text: string, _path?: string, secrets: SecretSource = processSecrets): { ok: true; warnings?: ConfigWarning[] } | { ok: false; errors: ConfigError[] } {
  const result = loadStaticConfig(text, secrets);
  if (!result.ok) return result;
  return result.warnings?.length ? { ok: true, warnings: result.warnings } : { ok: true };
}
