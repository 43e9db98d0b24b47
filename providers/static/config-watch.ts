import { watch, type FSWatcher } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { Logger } from '../../src/log.ts';

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
      const text = await readFile(this.opts.path, 'utf8');
      if (text === this.lastText || this.stopped) return;
      this.lastText = text;
      this.opts.onChange(text);
    } catch (e) {
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

