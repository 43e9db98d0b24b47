/** Time source and one-shot timers for the work queue; injectable so tests control time. */
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
