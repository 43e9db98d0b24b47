import { expect, test } from 'bun:test';
import { eventually } from '../../test/harness/eventually.ts';
import { TimeoutSignals } from './timeout-signals.ts';

test('a signal not released is aborted with a TimeoutError once its time is up', async () => {
  const timeouts = new TimeoutSignals(5);
  const { signal } = timeouts.open(20, []);
  expect(signal.aborted).toBe(false);
  await eventually('the timeout', () => signal.aborted);
  expect((signal.reason as DOMException).name).toBe('TimeoutError');
  expect(timeouts.pending).toBe(0);
});

test('a parent that aborts aborts the signal with its reason; one already aborted at once', () => {
  const timeouts = new TimeoutSignals(5);
  const parent = new AbortController();
  const { signal } = timeouts.open(60_000, [new AbortController().signal, parent.signal]);
  parent.abort(new Error('term ended'));
  expect(signal.aborted).toBe(true);
  expect((signal.reason as Error).message).toBe('term ended');
  expect(timeouts.pending).toBe(0);
  const late = timeouts.open(60_000, [parent.signal]);
  expect((late.signal.reason as Error).message).toBe('term ended');
});

test('a released signal is never aborted, and lets go of its parents', async () => {
  const timeouts = new TimeoutSignals(5);
  const parent = new AbortController();
  const released = timeouts.open(10, [parent.signal]);
  const other = timeouts.open(10, []);
  released.release();
  released.release();
  expect(timeouts.pending).toBe(1);
  await eventually('the other timeout', () => other.signal.aborted);
  parent.abort(new Error('later'));
  expect(released.signal.aborted).toBe(false);
});
