import { expect, test } from 'bun:test';
import { eventually } from '../../test/harness/eventually.ts';
import { type TimerArming, TimeoutSignals } from './timeout-signals.ts';

test('a signal not released is aborted with a TimeoutError once its time is up', async () => {
  const timeouts = new TimeoutSignals();
  const { signal } = timeouts.open(20, []);
  expect(signal.aborted).toBe(false);
  await eventually('the timeout', () => signal.aborted);
  expect((signal.reason as DOMException).name).toBe('TimeoutError');
  expect(timeouts.pending).toBe(0);
});

test('a parent that aborts aborts the signal with its reason; one already aborted at once', () => {
  const timeouts = new TimeoutSignals();
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
  const timeouts = new TimeoutSignals();
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

/** Real timers, with each arming written down: what the timer would wake the process for. */
function recordingTimers(): TimerArming & { armedMs: number[] } {
  const armedMs: number[] = [];
  return {
    armedMs,
    set: (fn, ms) => {
      armedMs.push(ms);
      return setTimeout(fn, ms).unref();
    },
    clear: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
  };
}

test('requests that end in milliseconds arm one timer, for the first deadline, not a tick per request', async () => {
  const timers = recordingTimers();
  const timeouts = new TimeoutSignals(timers);
  for (let i = 0; i < 50; i++) {
    const op = timeouts.open(60_000, []);
    await Bun.sleep(1);
    op.release();
  }
  expect(timers.armedMs.length).toBe(1);
  expect(timers.armedMs[0]).toBeGreaterThan(59_000);
});

test('a shorter timeout opened after a longer one fires on time, and the longer one is armed for again after it', async () => {
  const timers = recordingTimers();
  const timeouts = new TimeoutSignals(timers);
  const long = timeouts.open(60_000, []);
  const started = performance.now();
  const short = timeouts.open(30, []);
  await eventually('the short timeout', () => short.signal.aborted);
  expect(performance.now() - started).toBeLessThan(1000);
  expect(long.signal.aborted).toBe(false);
  expect(timeouts.pending).toBe(1);
  expect(timers.armedMs.length).toBe(3); // the long one, the short one, the long one again
  expect(timers.armedMs[2]).toBeGreaterThan(59_000);
  long.release();
});
