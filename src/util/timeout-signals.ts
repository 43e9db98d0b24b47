/**
 * Timeouts for many short operations (every API request) on one timer, armed for the earliest
 * deadline. Each operation gets its own signal, aborted with a TimeoutError (as
 * AbortSignal.timeout) once its time is up, or with the parent's reason when a parent signal
 * aborts (as AbortSignal.any); `release()` when the operation has ended lets go of it at once.
 *
 * Why not AbortSignal.any([AbortSignal.timeout(ms), ...]) per request: in Bun 1.4.5 that cost
 * 2.4-3.6 us of CPU per request against 0.8-1.6 us for this (100,000 operations, GC included),
 * and each timeout's timer and signals stay alive for the whole timeout (60 s) after a request
 * that took milliseconds: at 5000 nodes, every request of the burst at once.
 */
export interface TimeoutSignal {
  readonly signal: AbortSignal;
  /** The operation ended: no timeout, no parent listeners from now on. Idempotent. */
  release(): void;
}

interface Pending {
  controller: AbortController;
  dueAt: number;
  parents: readonly AbortSignal[];
  onParentAbort: (this: AbortSignal) => void;
}

/** How the timer is armed (a test records it); the real one is unref'd: it never keeps the process alive. */
export interface TimerArming {
  set(fn: () => void, ms: number): unknown;
  clear(handle: unknown): void;
}

const REAL_TIMERS: TimerArming = {
  set: (fn, ms) => setTimeout(fn, ms).unref(),
  clear: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
};

/** A deadline this close (ms) counts as reached: a timer may fire a fraction of a millisecond early. */
const SLACK_MS = 1;

export class TimeoutSignals {
  private readonly live = new Set<Pending>();
  private timer: unknown;
  private timerDueAt = Infinity;

  /**
   * One timer, armed for the earliest deadline of the operations it holds, not a periodic tick: a
   * request that ends in milliseconds wakes nothing (a 100 ms tick woke the process once after
   * each of an idle controller's requests, BENCHMARKS.md run 10). A released operation is not
   * looked for: the timer, when it fires, finds it gone and arms for the next deadline left.
   */
  constructor(private readonly timers: TimerArming = REAL_TIMERS) {}

  open(ms: number, parents: readonly AbortSignal[]): TimeoutSignal {
    const controller = new AbortController();
    const pending: Pending = {
      controller,
      dueAt: performance.now() + ms,
      parents,
      onParentAbort() {
        settle(pending);
        controller.abort(this.reason);
      },
    };
    const settle = (p: Pending) => {
      if (!this.live.delete(p)) return;
      for (const parent of p.parents) parent.removeEventListener('abort', p.onParentAbort);
    };
    const aborted = parents.find((p) => p.aborted);
    if (aborted) {
      controller.abort(aborted.reason);
      return { signal: controller.signal, release: () => {} };
    }
    for (const parent of parents) parent.addEventListener('abort', pending.onParentAbort, { once: true });
    this.live.add(pending);
    if (pending.dueAt < this.timerDueAt) this.arm(pending.dueAt);
    return { signal: controller.signal, release: () => settle(pending) };
  }

  /** Operations not yet released nor timed out (for tests). */
  get pending(): number {
    return this.live.size;
  }

  private arm(dueAt: number): void {
    if (this.timer !== undefined) this.timers.clear(this.timer);
    this.timerDueAt = dueAt;
    this.timer = this.timers.set(() => this.fire(), Math.max(0, dueAt - performance.now()));
  }

  private fire(): void {
    this.timer = undefined;
    this.timerDueAt = Infinity;
    const now = performance.now();
    let next = Infinity;
    for (const p of this.live) {
      if (p.dueAt > now + SLACK_MS) {
        next = Math.min(next, p.dueAt);
        continue;
      }
      this.live.delete(p);
      for (const parent of p.parents) parent.removeEventListener('abort', p.onParentAbort);
      p.controller.abort(new DOMException('The operation timed out.', 'TimeoutError'));
    }
    if (next < Infinity) this.arm(next);
  }
}
