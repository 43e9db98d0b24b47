import { watch, type FSWatcher } from 'node:fs';
import { stat } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { Logger } from '../log.ts';
import { FileRefusedError, readBoundedFile } from '../util/bounded-file.ts';
import { formatConfigErrors, type ConfigError, type ConfigWarning } from './yaml-load.ts';
import { MAX_CONFIG_FILE_BYTES } from './limits.ts';
import { errorMessage } from '../util/errors.ts';

/**
 * Watches one file and hands its text over when it changed. Watches the directory, not the
 * file: editors save by renaming a new file into place and a ConfigMap volume swaps a symlink,
 * both of which end a watch on the old file. fs.watch can miss events (network filesystems,
 * some containers), so a periodic stat backs it up. Events are debounced, and a text equal to
 * the last one handed over is not handed over again.
 */
export interface ConfigFileWatcherOptions {
  path: string;
  /** The text the caller already has (no call until it changes). */
  initialText?: string;
  onChange(text: string): void;
  /** The file is there but must not be read (not a regular file, over MAX_CONFIG_FILE_BYTES): once per such state. */
  onRefused?(message: string): void;
  logger: Logger;
  /** Period of the stat fallback. Default 5000 ms. */
  pollMs?: number;
  /** Quiet time after the last event before reading. Default 200 ms. */
  debounceMs?: number;
}

export class ConfigFileWatcher {
  private watcher?: FSWatcher;
  private poller?: ReturnType<typeof setInterval>;
  private debounce?: ReturnType<typeof setTimeout>;
  private lastText?: string;
  private lastRefusal?: string;
  private lastSignature = '';
  private reading = false;
  private readAgain = false;
  private stopped = false;

  constructor(private readonly opts: ConfigFileWatcherOptions) {
    this.lastText = opts.initialText;
  }

  async start(): Promise<void> {
    this.lastSignature = await this.signature();
    try {
      this.watcher = watch(dirname(this.opts.path), { persistent: false }, () => this.schedule());
      this.watcher.on('error', (e) => this.opts.logger.warn('config watch failed; polling only', { file: this.opts.path, error: e }));
    } catch (e) {
      this.opts.logger.warn('cannot watch the config directory; polling only', { file: this.opts.path, error: e as Error });
    }
    this.poller = setInterval(() => void this.poll(), this.opts.pollMs ?? 5000);
    this.poller.unref?.();
    // The text in force may be old: a standby read it when the process started and watches only
    // from its leadership on. An edit made meanwhile would otherwise wait for the next change.
    if (this.opts.initialText !== undefined) await this.check();
  }

  stop(): void {
    this.stopped = true;
    this.watcher?.close();
    clearInterval(this.poller);
    clearTimeout(this.debounce);
  }

  /** Reads now (tests, and a caller that knows the file changed). */
  async check(): Promise<void> {
    if (this.stopped) return;
    if (this.reading) {
      this.readAgain = true; // a change during the read: read once more after it
      return;
    }
    this.reading = true;
    try {
      const text = await readBoundedFile(this.opts.path, MAX_CONFIG_FILE_BYTES);
      this.lastRefusal = undefined;
      if (text === this.lastText || this.stopped) return;
      this.lastText = text;
      this.opts.onChange(text);
    } catch (e) {
      if (e instanceof FileRefusedError) {
        // Not a moment mid-rename: a file that must not be read is an edit to reject, once.
        if (e.message !== this.lastRefusal && !this.stopped) {
          this.lastRefusal = e.message;
          this.lastText = undefined; // the same good text written back is a change again
          this.opts.onRefused?.(e.message);
        }
        return;
      }
      // Mid-rename the file may be missing for a moment: the next event or poll tries again.
      this.opts.logger.debug(2, 'cannot read the config file yet', { file: this.opts.path, error: e as Error });
    } finally {
      this.reading = false;
    }
    if (this.readAgain) {
      this.readAgain = false;
      await this.check();
    }
  }

  private schedule(): void {
    if (this.stopped) return;
    clearTimeout(this.debounce);
    this.debounce = setTimeout(() => void this.check(), this.opts.debounceMs ?? 200);
  }

  private async poll(): Promise<void> {
    const sig = await this.signature();
    if (sig !== this.lastSignature) {
      this.lastSignature = sig;
      this.schedule();
    }
  }

  /** What changes when the file is rewritten or replaced (stat follows symlinks). */
  private async signature(): Promise<string> {
    try {
      const s = await stat(this.opts.path);
      return `${s.ino}:${s.size}:${s.mtimeMs}`;
    } catch {
      return 'missing';
    }
  }
}

/** A reload's outcome: the configuration now in force, or every problem of the rejected text. */
export type ConfigReloadResult<C> = { ok: true; config: C; warnings?: ConfigWarning[] } | { ok: false; errors: ConfigError[] };

export interface WatchedConfigOptions<C> {
  /** Who owns the file, for log lines, e.g. "proxmox provider". */
  owner: string;
  /** The file to watch; no watching without one (reload() still works). */
  path?: string;
  /** The text in force at start, so the first watch event does not reload it again. */
  initialText?: string;
  /** Parses and checks a text, secrets included: all or nothing. */
  load(text: string): ConfigReloadResult<C>;
  /** The warnings of the configuration in force at start (logged now, told to onConfigWarning listeners). */
  initialWarnings?: readonly ConfigWarning[];
  /** Puts a good configuration in force; called before any listener hears of it. */
  apply(config: C): void;
  logger: Logger;
  /** Watcher timings (tests shorten them). */
  pollMs?: number;
  debounceMs?: number;
}

/** How a provider is told about its file: the same options for every provider that watches one. */
export interface ProviderFileOptions {
  logger: Logger;
  /** The file to watch; no watching without one. */
  configPath?: string;
  /** The file's text as read at start, so the first watch event does not reload it again. */
  configText?: string;
  /** The warnings of the configuration loaded at start. */
  configWarnings?: readonly ConfigWarning[];
  /** Watcher timings (tests shorten them). */
  watch?: { pollMs?: number; debounceMs?: number };
}

/** A provider factory's input about its file (what the registry hands over) as the options its WatchedConfig takes. */
export function providerFileOptions(
  input: { config: string | undefined; configPath: string | undefined; logger: Logger; watch?: ProviderFileOptions['watch'] },
  warnings: readonly ConfigWarning[] | undefined,
): ProviderFileOptions {
  return { logger: input.logger, configPath: input.configPath, configText: input.config, configWarnings: warnings, watch: input.watch };
}

/** A provider's WatchedConfig from its options: `load` checks a text, `apply` puts it in force. */
export function watchProviderConfig<C>(owner: string, options: ProviderFileOptions, load: (text: string) => ConfigReloadResult<C>, apply: (config: C) => void): WatchedConfig<C> {
  return new WatchedConfig<C>({
    owner,
    path: options.configPath,
    initialText: options.configText,
    initialWarnings: options.configWarnings,
    load,
    apply,
    logger: options.logger,
    pollMs: options.watch?.pollMs,
    debounceMs: options.watch?.debounceMs,
  });
}

/**
 * A provider's reloadable configuration file, around ConfigFileWatcher: a good text is applied
 * and counted; a rejected one is logged with every problem as FILE:LINE: PATH: MESSAGE and
 * counted, and changes nothing. Every attempt then reaches the onReload listeners; onChange
 * and onConfigRejected are the provider interface's views of them. So a provider's reload is
 * one `apply` function (every provider with a config file uses it).
 */
export class WatchedConfig<C> {
  private readonly listeners = new Set<(result: ConfigReloadResult<C>) => void>();
  private readonly counts = { success: 0, error: 0 };
  private watcher?: ConfigFileWatcher;
  /** The warnings of the configuration in force. */
  private warnings: readonly ConfigWarning[];

  constructor(private readonly opts: WatchedConfigOptions<C>) {
    this.warnings = opts.initialWarnings ?? [];
    this.logWarnings();
  }

  /** Reload attempts so far, by outcome (for the reload metrics). */
  reloads(): { success: number; error: number } {
    return { ...this.counts };
  }

  /** Starts watching the file (once; nothing without a path). */
  async start(): Promise<void> {
    if (!this.opts.path || this.watcher) return;
    this.watcher = new ConfigFileWatcher({
      path: this.opts.path,
      initialText: this.opts.initialText,
      onChange: (text) => void this.reload(text),
      onRefused: (message) => void this.settle({ ok: false, errors: [{ path: '', line: 1, message: `cannot be read: ${message}` }] }),
      logger: this.opts.logger,
      pollMs: this.opts.pollMs,
      debounceMs: this.opts.debounceMs,
    });
    await this.watcher.start();
  }

  stop(): void {
    this.watcher?.stop();
    this.watcher = undefined;
  }

  /** Reads the file now, as the watcher does on a change (SIGHUP); 'unchanged' when its text is the one last read. */
  async checkNow(): Promise<'unchanged' | 'reloaded' | 'rejected'> {
    let outcome: 'unchanged' | 'reloaded' | 'rejected' = 'unchanged';
    const off = this.onReload((r) => (outcome = r.ok ? 'reloaded' : 'rejected'));
    try {
      await this.watcher?.check();
    } finally {
      off();
    }
    return outcome;
  }

  /** Applies a text (what the watcher calls; a caller may call it with a text from elsewhere). */
  reload(text: string): ConfigReloadResult<C> {
    let result: ConfigReloadResult<C>;
    try {
      result = this.opts.load(text);
    } catch (e) {
      // A loader bug or a resource limit hit while parsing: a rejected edit, never a silent one.
      result = { ok: false, errors: [{ path: '', line: 1, message: `could not be read: ${errorMessage(e)}` }] };
    }
    if (result.ok) {
      try {
        this.opts.apply(result.config);
      } catch (e) {
        // Never lose an edit silently: a configuration that cannot be put in force is rejected
        // like an invalid one (apply must leave the old one in force when it throws).
        result = { ok: false, errors: [{ path: '', line: 1, message: `could not be applied: ${errorMessage(e)}` }] };
      }
    }
    return this.settle(result);
  }

  /** Logs and counts an attempt's outcome and tells every listener. */
  private settle(result: ConfigReloadResult<C>): ConfigReloadResult<C> {
    if (result.ok) {
      this.warnings = result.warnings ?? [];
      this.logWarnings();
    } else {
      this.opts.logger.error(`${this.opts.owner} configuration rejected; the last good configuration stays in force`, {
        file: this.opts.path,
        errors: this.problems(result.errors),
      });
    }
    this.counts[result.ok ? 'success' : 'error']++;
    for (const listener of [...this.listeners]) {
      try {
        listener(result);
      } catch (e) {
        this.opts.logger.error('config reload listener failed', { error: errorMessage(e) });
      }
    }
    return result;
  }

  /** Called after every attempt, good or bad. Returns an unsubscribe function. */
  onReload(listener: (result: ConfigReloadResult<C>) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Called after each good reload only (a rejected edit changes no answer). */
  onChange(listener: () => void): () => void {
    return this.onReload((r) => r.ok && listener());
  }

  /**
   * Called with the warnings of the configuration in force, per reason (e.g. InsecureSecretFile),
   * one FILE:LINE: PATH: MESSAGE line each: at once for the one in force, then after each good
   * reload that has some.
   */
  onConfigWarning(listener: (reason: string, problems: string) => void): () => void {
    const tell = (warnings: readonly ConfigWarning[]) => {
      for (const reason of new Set(warnings.map((w) => w.reason))) listener(reason, this.problems(warnings.filter((w) => w.reason === reason)));
    };
    try {
      tell(this.warnings);
    } catch (e) {
      this.opts.logger.error('config warning listener failed', { error: errorMessage(e) });
    }
    return this.onReload((r) => r.ok && tell(r.warnings ?? []));
  }

  private logWarnings(): void {
    for (const w of this.warnings) {
      this.opts.logger.warn(`${this.opts.owner} configuration: ${w.message}`, { reason: w.reason, file: this.opts.path, line: w.line, path: w.path });
    }
  }

  /** Called with the problems of each rejected edit, one FILE:LINE: PATH: MESSAGE line each. */
  onConfigRejected(listener: (problems: string) => void): () => void {
    return this.onReload((r) => r.ok || listener(this.problems(r.errors)));
  }

  private problems(errors: readonly ConfigError[]): string {
    return formatConfigErrors(this.opts.path, errors);
  }
}
