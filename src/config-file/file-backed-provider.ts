import type { ConfigCheck } from '../cloud/config-reload.ts';
import type { ConfigReloadResult, WatchedConfig } from './watch.ts';

/**
 * What a provider configured by one watched file answers about it, written once: the provider
 * interface's reload notices (onChange, onConfigRejected, onConfigWarning), reloadConfig
 * (SIGHUP, src/cloud/config-reload.ts), and reload/onReload for callers that hold the text.
 * Each forwards to the provider's WatchedConfig; a provider extends this class and overrides what
 * it adds to (proxmox's onChange also tells of moved VMs).
 */
export abstract class FileBackedProvider<C> {
  /** The provider's file, set in its constructor. */
  protected abstract readonly file: WatchedConfig<C>;

  /**
   * Applies a new text of the configuration: all or nothing. Also what the watcher calls; a
   * caller can use it directly (e.g. after fetching the file from elsewhere).
   */
  reload(text: string): ConfigReloadResult<C> {
    return this.file.reload(text);
  }

  /** Reads the configuration file again now (SIGHUP, `systemctl reload`): see src/cloud/config-reload.ts. */
  reloadConfig(): Promise<ConfigCheck> {
    return this.file.checkNow();
  }

  /**
   * Called after every reload attempt, good or bad (e.g. for the app to resync nodes and
   * services, or to record an event). Returns a function that removes the listener.
   */
  onReload(listener: (result: ConfigReloadResult<C>) => void): () => void {
    return this.file.onReload(listener);
  }

  /** The provider interface's change notice: after each good reload (a rejected edit changes no answer). */
  onChange(listener: () => void): () => void {
    return this.file.onChange(listener);
  }

  /** The provider interface's notice of a rejected edit, with every problem as FILE:LINE: PATH: MESSAGE. */
  onConfigRejected(listener: (problems: string) => void): () => void {
    return this.file.onConfigRejected(listener);
  }

  /** The provider interface's warnings about the configuration in force (a secret file others can read), per reason. */
  onConfigWarning(listener: (reason: string, problems: string) => void): () => void {
    return this.file.onConfigWarning(listener);
  }
}
