import { sleep } from './time.ts';

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
    this.refill();
    this.tokens -= 1;
    return this.tokens >= 0 ? 0 : (-this.tokens / this.qps) * 1000;
  }

  /**
   * Waits for one token. A caller that gives up (its signal aborts) gives the token back, as
   * client-go's limiter cancels the reservation of an abandoned wait: otherwise every timed-out
   * caller would leave the bucket in debt and delay everyone after it (2000 abandoned waits at
   * 20 qps: 100 s). x/time/rate gives back only what later callers have not yet been promised;
   * giving back the whole token is as safe (uses up to any time t stay within burst + qps * t)
   * and also clears the debt when the waits are abandoned oldest first, as timeouts are.
   */
  async take(signal?: AbortSignal): Promise<void> {
    signal?.throwIfAborted();
    const wait = this.reserve();
    if (wait <= 0) return;
    try {
      await sleep(wait, signal);
    } catch (e) {
      this.refill();
      this.tokens = Math.min(this.burst, this.tokens + 1);
      throw e;
    }
  }

  private refill(): void {
    const now = this.now();
    this.tokens = Math.min(this.burst, this.tokens + ((now - this.last) / 1000) * this.qps);
    this.last = now;
  }
}
