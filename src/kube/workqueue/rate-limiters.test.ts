import { describe, expect, test } from 'bun:test';
import { TokenBucket } from '../../util/token-bucket.ts';
import { BucketRateLimiter, ItemExponentialFailureRateLimiter, MaxOfRateLimiter, defaultControllerRateLimiter, type RateLimiter } from './rate-limiters.ts';

const delays = <K>(limiter: RateLimiter<K>, item: K, count: number) => Array.from({ length: count }, () => limiter.when(item));

describe('ItemExponentialFailureRateLimiter', () => {
  test('doubles per failure up to the cap, per item', () => {
    const limiter = new ItemExponentialFailureRateLimiter<string>(1, 1000);
    expect(delays(limiter, 'one', 12)).toEqual([1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1000, 1000]);
    expect(limiter.numRequeues('one')).toBe(12);
    expect(limiter.when('two')).toBe(1);
    expect(limiter.numRequeues('two')).toBe(1);
  });

  test('forget resets the item and only that item', () => {
    const limiter = new ItemExponentialFailureRateLimiter<string>(5000, 300_000);
    delays(limiter, 'a', 3);
    limiter.when('b');
    limiter.forget('a');
    expect(limiter.numRequeues('a')).toBe(0);
    expect(limiter.when('a')).toBe(5000);
    expect(limiter.numRequeues('b')).toBe(1);
  });

  test('stays at the cap after enough failures to overflow 2^n', () => {
    const limiter = new ItemExponentialFailureRateLimiter<string>(5, 1_000_000);
    const all = delays(limiter, 'x', 1100);
    expect(all.at(-1)).toBe(1_000_000);
    expect(all.every((d) => Number.isFinite(d) && d <= 1_000_000)).toBe(true);
  });
});

describe('BucketRateLimiter', () => {
  test('is free within the burst, then waits for tokens; never counts requeues', () => {
    let now = 0;
    const limiter = new BucketRateLimiter<string>(new TokenBucket(10, 2, () => now));
    expect(delays(limiter, 'a', 4)).toEqual([0, 0, 100, 200]);
    expect(limiter.numRequeues('a')).toBe(0);
    now += 100;
    // One token came back, but two were already promised ahead of time: the next waits 200ms.
    expect(limiter.when('b')).toBe(200);
    now += 10_000;
    expect(limiter.when('c')).toBe(0);
  });
});

describe('MaxOfRateLimiter', () => {
  test('waits for the longest answer, reports the most requeues, forgets in all', () => {
    const fast = new ItemExponentialFailureRateLimiter<string>(1, 100);
    const slow = new ItemExponentialFailureRateLimiter<string>(10, 50);
    const limiter = new MaxOfRateLimiter(fast, slow);
    expect(delays(limiter, 'a', 5)).toEqual([10, 20, 40, 50, 50]);
    // Both limiters were asked each time.
    expect(fast.numRequeues('a')).toBe(5);
    expect(slow.numRequeues('a')).toBe(5);
    expect(limiter.numRequeues('a')).toBe(5);
    expect(delays(limiter, 'a', 2)).toEqual([50, 64]);

    limiter.forget('a');
    expect(fast.numRequeues('a')).toBe(0);
    expect(slow.numRequeues('a')).toBe(0);
    expect(limiter.when('a')).toBe(10);
  });

  test('with no limiters, never waits', () => {
    expect(new MaxOfRateLimiter<string>().when('a')).toBe(0);
  });
});

describe('defaultControllerRateLimiter', () => {
  test('per-item backoff from 5ms, doubling, capped at 1000s', () => {
    const limiter = defaultControllerRateLimiter<string>(() => 0);
    expect(delays(limiter, 'a', 4)).toEqual([5, 10, 20, 40]);
    expect(limiter.numRequeues('a')).toBe(4);
    limiter.forget('a');
    expect(limiter.numRequeues('a')).toBe(0);

    // 5ms * 2^18 > 1000s, so the 19th failure hits the cap (the bucket has burst left for 100 asks).
    const many = delays(limiter, 'b', 20);
    expect(many[17]).toBe(5 * 2 ** 17);
    expect(many[18]).toBe(1_000_000);
    expect(many[19]).toBe(1_000_000);
  });

  test('overall limit of 10 qps after a burst of 100', () => {
    const limiter = defaultControllerRateLimiter<number>(() => 0);
    const first = Array.from({ length: 100 }, (_, i) => limiter.when(i));
    expect(first.every((d) => d === 5)).toBe(true);
    expect(limiter.when(100)).toBe(100);
    expect(limiter.when(101)).toBe(200);
  });
});
