import { describe, expect, test } from 'bun:test';
import { TokenBucket } from '../../src/kube/token-bucket.ts';

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

  test('nonsense limits are refused', () => {
    expect(() => new TokenBucket(0, 1)).toThrow('qps > 0');
    expect(() => new TokenBucket(5, 0)).toThrow('burst >= 1');
  });
});
