/**
 * A token bucket as in golang.org/x/time/rate, used the way client-go uses it: for the client's
 * --kube-api-qps/--kube-api-burst limit and the work queue's overall limit. `reserve` hands out
 * tokens in order (a token taken in the future is a wait), so callers are served fairly.
 */
export class TokenBucket {
  private tokens: number;
  private last: number;

  constructor(
    readonly qps: number,
    readonly burst: number,
    private readonly now: () => number = () => performance.now(),
  ) {
    if (!(qps > 0) || !(burst >= 1)) throw new RangeError(`token bucket needs qps > 0 and burst >= 1 (got qps=${qps}, burst=${burst})`);
    this.tokens = burst;
    this.last = this.now();
  }

  /** Takes one token and returns how many milliseconds the caller must wait before using it. */
  reserve(): number {
    const now = this.now();
    this.tokens = Math.min(this.burst, this.tokens + ((now - this.last) / 1000) * this.qps);
    this.last = now;
    this.tokens -= 1;
    return this.tokens >= 0 ? 0 : (-this.tokens / this.qps) * 1000;
  }

  /** Waits for one token. */
  async take(signal?: AbortSignal): Promise<void> {
    const wait = this.reserve();
    if (wait > 0) await sleep(wait, signal);
  }
}

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
