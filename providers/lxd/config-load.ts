import { yamlConfigLoader, type ConfigLoadResult } from '../../src/config-file/yaml-load.ts';
import type { LxdConfig } from './config-model.ts';
import { resolveLxdConfig } from './config-resolve.ts';
import { LxdConfigSchema, salvageLxdConfig } from './config-schema.ts';

export type LxdConfigLoadResult = ConfigLoadResult<LxdConfig>;

/** Reads the lxd provider's YAML with the shared loader: every problem at once, each as PATH + line + message, certificate files read on the way. */
export const loadLxdConfig = yamlConfigLoader({ schema: LxdConfigSchema, salvage: salvageLxdConfig, resolve: resolveLxdConfig });
