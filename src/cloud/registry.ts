import type { CloudProvider } from './types.ts';
import type { Logger } from '../log.ts';

/**
 * Providers register a factory by name; `--cloud-provider NAME` picks one. Providers are linked
 * statically (imported by src/providers.ts), never loaded from disk.
 */
export interface ProviderFactoryInput {
  /** Contents of --cloud-config, or undefined when none was given. */
  config: string | undefined;
  /** Path of --cloud-config, for messages and for providers that watch the file. */
  configPath: string | undefined;
  logger: Logger;
}

export type ProviderFactory = (input: ProviderFactoryInput) => CloudProvider | Promise<CloudProvider>;

/** One problem in a provider's config file, located for the operator. */
export interface ConfigProblem {
  /** Path inside the document, e.g. machines[3].addresses[0]. */
  path: string;
  line?: number;
  message: string;
  /** A warning (e.g. a secret file others can read) is printed, but the file is valid. */
  warning?: boolean;
}

/** Checks a config file's text without starting anything (the `validate` command). */
export type ConfigValidator = (text: string, path: string) => ConfigProblem[];

export class ProviderRegistry {
  private readonly factories = new Map<string, ProviderFactory>();
  private readonly validators = new Map<string, ConfigValidator>();

  register(name: string, factory: ProviderFactory, validator?: ConfigValidator): void {
    if (this.factories.has(name)) throw new Error(`cloud provider ${JSON.stringify(name)} registered twice`);
    this.factories.set(name, factory);
    if (validator) this.validators.set(name, validator);
  }

  validator(name: string): ConfigValidator | undefined {
    return this.validators.get(name);
  }

  names(): string[] {
    return [...this.factories.keys()].sort();
  }

  has(name: string): boolean {
    return this.factories.has(name);
  }

  async create(name: string, input: ProviderFactoryInput): Promise<CloudProvider> {
    const factory = this.factories.get(name);
    if (!factory) throw new Error(`unknown cloud provider ${JSON.stringify(name)} (known: ${this.names().join(', ') || 'none'})`);
    return factory(input);
  }
}
