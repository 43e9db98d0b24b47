import { expect, test } from 'bun:test';
import { aborted } from './abort.ts';

test('resolves when the signal aborts, and at once for a signal aborted already', async () => {
  const before = new AbortController();
  before.abort();
  await aborted(before.signal);
  const later = new AbortController();
  let done = false;
  const waiting = aborted(later.signal).then(() => (done = true));
  await Promise.resolve();
  expect(done).toBe(false);
  later.abort();
  await waiting;
  expect(done).toBe(true);
});
