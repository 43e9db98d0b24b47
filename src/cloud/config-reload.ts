/**
 * Beyond upstream: a provider whose configuration is a file it watches can be asked to read it
 * again now (SIGHUP, which `systemctl reload` sends), rather than when its watcher next notices.
 * A capability of its own, found on the provider object, so providers without a file need nothing.
 */
export type ConfigCheck = 'unchanged' | 'reloaded' | 'rejected';

export interface ReloadableConfig {
  /** Reads the file again: 'unchanged' when its text is the one last read; a rejected text leaves the last good one in force. */
  reloadConfig(): Promise<ConfigCheck>;
}

/** The provider's reloadConfig, when it has one. */
export function configReloader(provider: object): ReloadableConfig | undefined {
  const candidate = provider as Partial<ReloadableConfig>;
  return typeof candidate.reloadConfig === 'function' ? (candidate as ReloadableConfig) : undefined;
}
