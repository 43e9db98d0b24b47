/**
 * Periodic callbacks that share one timer per interval: every callback registered at the same
 * interval runs in the same wake-up of the event loop, in the order registered.
 *
 * Why (issue 38): a timer's wake-up costs an idle Bun process 0.09-0.13 ms of CPU whatever its
 * callback does (two 250 ms timers at different phases cost twice what one timer running both
 * callbacks does, BENCHMARKS.md, session 20). The control-plane VIP sends its heartbeats and
 * checks its API server at the same interval (250 ms by default): on their own timers they woke
 * the process twice where once does.
 *
 * A callback joining an interval already beating is first called at its next beat (less than one
 * interval away). One that throws does not keep the others of its beat from running: its error goes
 * to `onError`, by default rethrown on its own, as an uncaught error of a timer would be.
 */
export class Metronome {
  private readonly beats = new Map<number, { timer: ReturnType<typeof setInterval>; callbacks: Set<() => void> }>();

  constructor(private readonly onError: (error: unknown) => void = rethrowApart) {}

  /** Calls `callback` every `intervalMs` until the returned function is called. */
  every(intervalMs: number, callback: () => void): () => void {
    let beat = this.beats.get(intervalMs);
    if (!beat) {
      const callbacks = new Set<() => void>();
      beat = { timer: setInterval(() => runAll(callbacks, this.onError), intervalMs), callbacks };
      this.beats.set(intervalMs, beat);
    }
    // A function of its own: the same callback registered twice is two registrations.
    const entry = () => callback();
    beat.callbacks.add(entry);
    const joined = beat;
    return () => {
      joined.callbacks.delete(entry);
      if (joined.callbacks.size > 0 || this.beats.get(intervalMs) !== joined) return;
      clearInterval(joined.timer);
      this.beats.delete(intervalMs);
    };
  }
}

function runAll(callbacks: ReadonlySet<() => void>, onError: (error: unknown) => void): void {
  // A copy, each still registered when its turn comes: a callback may stop or start others meanwhile.
  for (const callback of [...callbacks]) {
    if (!callbacks.has(callback)) continue;
    try {
      callback();
    } catch (e) {
      onError(e);
    }
  }
}

function rethrowApart(error: unknown): void {
  queueMicrotask(() => {
    throw error;
  });
}
