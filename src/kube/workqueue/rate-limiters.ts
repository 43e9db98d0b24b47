import { TokenBucket } from '../../util/token-bucket.ts';

/** Decides how long an item waits before it is retried (as client-go's TypedRateLimiter). */
export interface RateLimiter<K> {
  /** Milliseconds to wait before the item is retried; records a failure for per-item limiters. */
  when(item: K): number;
  /** Stops tracking the item (call after it succeeded). */
  forget(item: K): void;
  /** How many times the item has been requeued by this limiter. */
  numRequeues(item: K): number;
}

/** Per-item backoff: baseMs * 2^failures, capped at maxMs. */
export class ItemExponentialFailureRateLimiter<K> implements RateLimiter<K> {
  private readonly failures = new Map<K, number>();

  constructor(
    readonly baseMs: number,
    readonly maxMs: number,
  ) {}

  when(item: K): number {
    const exp = this.failures.get(item) ?? 0;
    this.failures.set(item, exp + 1);
    const backoff = this.baseMs * 2 ** exp;
    // 2^exp overflows to Infinity after ~1024 failures; the cap still applies.
    return backoff > this.maxMs || !Number.isFinite(backoff) ? this.maxMs : backoff;
  }

  forget(item: K): void {
    this.failures.delete(item);
  }

  numRequeues(item: K): number {
    return this.failures.get(item) ?? 0;
  }
}

/** Overall limit shared by all items: the wait for the next token of a token bucket. */
export class BucketRateLimiter<K> implements RateLimiter<K> {
  constructor(readonly bucket: TokenBucket) {}

  when(_item: K): number {
    return this.bucket.reserve();
  }

  forget(_item: K): void {}

  numRequeues(_item: K): number {
    return 0;
  }
}

/** Asks every limiter (so each records the failure) and waits for the longest of their answers. */
export class MaxOfRateLimiter<K> implements RateLimiter<K> {
  private readonly limiters: readonly RateLimiter<K>[];

  constructor(...limiters: RateLimiter<K>[]) {
    this.limiters = limiters;
  }

  when(item: K): number {
    let longest = 0;
    for (const limiter of this.limiters) longest = Math.max(longest, limiter.when(item));
    return longest;
  }

  forget(item: K): void {
    for (const limiter of this.limiters) limiter.forget(item);
  }

  numRequeues(item: K): number {
    let most = 0;
    for (const limiter of this.limiters) most = Math.max(most, limiter.numRequeues(item));
    return most;
  }
}

/**
 * client-go's DefaultTypedControllerRateLimiter: per-item backoff 5ms doubling to 1000s, and overall
 * 10 qps with a burst of 100 (only limits retries, since the bucket is only asked on failure).
 */
export function defaultControllerRateLimiter<K>(now?: () => number): RateLimiter<K> {
  return new MaxOfRateLimiter<K>(
    new ItemExponentialFailureRateLimiter<K>(5, 1000 * 1000),
    new BucketRateLimiter<K>(new TokenBucket(10, 100, now)),
  );
}
