import { describe, expect, test } from 'bun:test';
import { TokenBucket } from './token-bucket.ts';

describe('TokenBucket (client-go --kube-api-qps / --kube-api-burst)', () => {
  test('a full bucket serves `burst` requests at once, then one per 1/qps seconds, in order', () => {
    let now = 0;
    const bucket = new TokenBucket(20, 30, () => now);
    const waits = Array.from({ length: 32 }, () => bucket.reserve());
    expect(waits.slice(0, 30)).toEqual(Array(30).fill(0));
    expect(waits[30]).toBeCloseTo(50, 6);
    expect(waits[31]).toBeCloseTo(100, 6);
  });

  test('tokens refill with time, never beyond the burst', () => {
    let now = 0;
    const bucket = new TokenBucket(10, 2, () => now);
    bucket.reserve();
    bucket.reserve();
    now = 10_000; // long idle: still only 2 tokens
    expect([bucket.reserve(), bucket.reserve()]).toEqual([0, 0]);
    expect(bucket.reserve()).toBeCloseTo(100, 6);
  });

  test('a caller that gives up its wait returns its token: abandoned waits leave no debt', async () => {
    let now = 0;
    const bucket = new TokenBucket(10, 1, () => now);
    expect(bucket.reserve()).toBe(0); // the burst is spent
    // 50 callers queue (the last would wait 5 s), then all give up, as timed-out TokenReviews do.
    const gaveUp = new AbortController();
    const waits = Array.from({ length: 50 }, () => bucket.take(gaveUp.signal).catch((e: unknown) => e));
    gaveUp.abort(new Error('timed out'));
    expect((await Promise.all(waits)).every((e) => e instanceof Error && e.message === 'timed out')).toBe(true);
    // The next caller waits as if they had never come (client-go cancels their reservations):
    // one token's worth, not 5.1 s behind the abandoned queue.
    expect(bucket.reserve()).toBeCloseTo(100, 6);
  });

  test('a refund never fills the bucket beyond its burst', async () => {
    let now = 0;
    const bucket = new TokenBucket(10, 2, () => now);
    bucket.reserve();
    bucket.reserve();
    const gaveUp = new AbortController();
    const wait = bucket.take(gaveUp.signal).catch(() => undefined);
    now = 60_000; // long after: the bucket refilled to its burst while the caller waited
    gaveUp.abort();
    await wait;
    expect([bucket.reserve(), bucket.reserve()]).toEqual([0, 0]);
    expect(bucket.reserve()).toBeCloseTo(100, 6);
  });

  test('a caller whose signal is already aborted takes nothing', async () => {
    let now = 0;
    const bucket = new TokenBucket(10, 1, () => now);
    await expect(bucket.take(AbortSignal.abort(new Error('gone')))).rejects.toThrow('gone');
    expect(bucket.reserve()).toBe(0);
  });

  test('nonsense limits are refused', () => {
    expect(() => new TokenBucket(0, 1)).toThrow('qps > 0');
    expect(() => new TokenBucket(5, 0)).toThrow('burst >= 1');
  });
});
