/** Time source and one-shot timers (the work queue's, the lifecycle controller's); injectable so tests control time (test/fakes/fake-clock.ts). */
export interface Clock {
  /** Monotonic milliseconds. */
  now(): number;
  /** Runs fn once after ms milliseconds; returns a function that cancels it. */
  setTimer(fn: () => void, ms: number): () => void;
}

// setTimeout fires at once for delays beyond a signed 32-bit int, so longer waits are capped and re-armed.
const MAX_TIMER_MS = 2 ** 31 - 1;

export const systemClock: Clock = {
  now: () => performance.now(),
  setTimer(fn, ms) {
    const timer = setTimeout(fn, Math.min(Math.max(ms, 0), MAX_TIMER_MS));
    return () => clearTimeout(timer);
  },
};

/** Sleeps for ms milliseconds; rejects with the signal's reason when aborted. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
