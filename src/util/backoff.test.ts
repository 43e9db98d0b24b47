import { expect, test } from 'bun:test';
import { Backoff } from './backoff.ts';

test('delays double from 800ms up to the 30s cap', () => {
  const backoff = new Backoff({ random: () => 0, now: () => 0 });
  const delays = Array.from({ length: 9 }, () => backoff.next());
  expect(delays).toEqual([800, 1600, 3200, 6400, 12_800, 25_600, 30_000, 30_000, 30_000]);
});

test('jitter only shortens a delay, by at most the jitter fraction', () => {
  const low = new Backoff({ random: () => 0.999_999, now: () => 0 });
  expect(low.next()).toBeCloseTo(400, 2);
  expect(low.next()).toBeCloseTo(800, 2);
  const mid = new Backoff({ jitter: 0.2, random: () => 0.5, now: () => 0 });
  expect(mid.next()).toBeCloseTo(720, 6);
});

test('a failure after a healthy period starts again from the initial delay', () => {
  let now = 0;
  const backoff = new Backoff({ random: () => 0, now: () => now, resetAfterMs: 120_000 });
  expect(backoff.next()).toBe(800);
  now += 800;
  expect(backoff.next()).toBe(1600);
  now += 1600 + 119_000; // healthy, but not for long enough
  expect(backoff.next()).toBe(3200);
  now += 3200 + 120_000;
  expect(backoff.next()).toBe(800);
  backoff.next();
  backoff.reset();
  expect(backoff.next()).toBe(800);
});

test('nonsensical settings are refused', () => {
  expect(() => new Backoff({ initialMs: 0 })).toThrow(RangeError);
  expect(() => new Backoff({ initialMs: 10, maxMs: 5 })).toThrow(RangeError);
  expect(() => new Backoff({ jitter: 2 })).toThrow(RangeError);
});
