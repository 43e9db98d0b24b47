import { expect, test } from 'bun:test';
import { eventually, eventuallyEqual } from './eventually.ts';

test('eventually returns the first value that is neither undefined nor false', async () => {
  let calls = 0;
  const answers = [undefined, false, 0, 7];
  expect(await eventually('a value', () => answers[calls++], { timeoutMs: 5_000, intervalMs: 1 })).toBe(0);
  expect(calls).toBe(3);
});

test('a timeout names what was waited for, with explain()\'s text, read only then', async () => {
  let explained = 0;
  const explain = () => `explained ${++explained}`;
  const error = await eventually('the impossible', () => false, { timeoutMs: 20, intervalMs: 1, explain }).catch((e: Error) => e);
  expect(error).toBeInstanceOf(Error);
  expect((error as Error).message).toBe('timed out after 20ms waiting for the impossible\nexplained 1');
  expect(explained).toBe(1);
  // The positional timeout still works.
  expect(((await eventually('the positional form', () => false, 20, 1).catch((e: Error) => e)) as Error).message).toBe('timed out after 20ms waiting for the positional form');
});

test('eventuallyEqual ignores key order, and its timeout shows the expected and the last value seen', async () => {
  let round = 0;
  await eventuallyEqual('the table', () => (++round < 3 ? { b: ['2'] } : { b: ['2'], a: ['1'] }), { a: ['1'], b: ['2'] }, { intervalMs: 1 });
  expect(round).toBe(3);
  const error = await eventuallyEqual('the table', () => ({ a: ['1', '3'] }), { a: ['1'] }, { timeoutMs: 20, intervalMs: 1, explain: () => 'the log' }).catch((e: Error) => e);
  expect((error as Error).message).toBe('timed out after 20ms waiting for the table\nexpected {"a":["1"]}\nlast saw {"a":["1","3"]}\nthe log');
});
