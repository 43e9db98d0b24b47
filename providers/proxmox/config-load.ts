import { yamlConfigLoader, type ConfigLoadResult } from '../../src/config-file/yaml-load.ts';
import type { ProxmoxConfig } from './config-model.ts';
import { resolveProxmoxConfig } from './config-resolve.ts';
import { ProxmoxConfigSchema, salvageProxmoxConfig } from './config-schema.ts';

export type ProxmoxConfigLoadResult = ConfigLoadResult<ProxmoxConfig>;

/** Reads the proxmox provider's YAML with the shared loader: every problem at once, each as PATH + line + message, secrets read on the way. */
export const loadProxmoxConfig = yamlConfigLoader({ schema: ProxmoxConfigSchema, salvage: salvageProxmoxConfig, resolve: resolveProxmoxConfig });
