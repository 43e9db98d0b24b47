import { expect, test } from 'bun:test';
import { DeferredOutput, type VipOutput } from './output.ts';

/** An output that records what it was asked. */
function recordingOutput(calls: string[]): VipOutput {
  return {
    start: async () => void calls.push('start'),
    hold: (on) => void calls.push(`hold ${on}`),
    bootstrapCheck: async () => (calls.push('bootstrap'), true),
    close: async () => void calls.push('close'),
  };
}

test('a deferred output loads its module once, at start, and then passes every call on', async () => {
  const calls: string[] = [];
  let loads = 0;
  const output = new DeferredOutput(async () => {
    loads += 1;
    return recordingOutput(calls);
  });
  expect(loads).toBe(0);
  await output.start();
  output.hold(true);
  expect(await output.bootstrapCheck(new AbortController().signal)).toBe(true);
  output.hold(false);
  await output.close();
  expect(loads).toBe(1);
  expect(calls).toEqual(['start', 'hold true', 'bootstrap', 'hold false', 'close']);
});

test('before it started, a deferred output releases nothing (it holds nothing) and refuses a take', async () => {
  const output = new DeferredOutput(async () => recordingOutput([]));
  output.hold(false);
  expect(() => output.hold(true)).toThrow('before it started');
  expect(() => output.bootstrapCheck(new AbortController().signal)).toThrow('before it started');
  await output.close();
});

test("a module that fails to load fails the output's start", async () => {
  const output = new DeferredOutput(async () => {
    throw new Error('no such module');
  });
  await expect(output.start()).rejects.toThrow('no such module');
});
