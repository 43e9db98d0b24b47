import { expect, test } from 'bun:test';
import { LogLimiter } from './log-limiter.ts';

test('one line per key per window; the next line tells how many were not logged', () => {
  let now = 0;
  const limiter = new LogLimiter(60_000, () => now);
  expect(limiter.allow('replayed')).toEqual({ suppressed: 0 });
  expect(limiter.allow('unknown node')).toEqual({ suppressed: 0 });
  now = 30_000;
  expect(limiter.allow('replayed')).toBeUndefined();
  expect(limiter.allow('replayed')).toBeUndefined();
  now = 60_000;
  expect(limiter.allow('replayed')).toEqual({ suppressed: 2 });
  expect(limiter.allow('unknown node')).toEqual({ suppressed: 0 });
  expect(limiter.allow('replayed')).toBeUndefined();
});
