/**
 * Wakes a periodic loop early when its source changed: `request()` (e.g. from the provider's
 * onChange) is debounced, so a burst of changes (an editor writing a file in several steps)
 * gives one early pass, `debounceMs` after the last of them. A request that falls due while a
 * pass runs is kept, and the next wait returns at once.
 */
export class ResyncTrigger {
  private timer?: ReturnType<typeof setTimeout>;
  private due = false;
  private wake?: () => void;

  constructor(private readonly debounceMs: number) {}

  request(): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.due = true;
      this.wake?.();
    }, this.debounceMs);
  }

  /**
   * Waits `periodMs`, or less when a requested resync falls due (or the signal aborts).
   * Resolves true when woken by a request, which it consumes.
   */
  async wait(periodMs: number, signal?: AbortSignal): Promise<boolean> {
    if (!this.due && !signal?.aborted) {
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(period);
          signal?.removeEventListener('abort', done);
          this.wake = undefined;
          resolve();
        };
        const period = setTimeout(done, periodMs);
        signal?.addEventListener('abort', done, { once: true });
        this.wake = done;
      });
    }
    const woken = this.due;
    this.due = false;
    return woken;
  }

  /** Forgets the requests made so far (a pass about to start covers them); later ones count. */
  clear(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.due = false;
  }

  /** Drops a pending request (on shutdown). */
  stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }
}
