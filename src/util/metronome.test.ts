import { expect, test } from 'bun:test';
import { Metronome } from './metronome.ts';

/** What ran, in order. */
function recorder() {
  const seen: string[] = [];
  return { seen, mark: (name: string) => () => seen.push(name) };
}

/** Waits until `ready` holds (timers run late on a busy machine: no test counts on their timing). */
async function until(ready: () => boolean, what: string): Promise<void> {
  const deadline = performance.now() + 10_000;
  while (!ready()) {
    if (performance.now() > deadline) throw new Error(`not within 10 s: ${what}`);
    await Bun.sleep(5);
  }
}

const count = (seen: string[], name: string) => seen.filter((s) => s === name).length;

test('callbacks at one interval run in the same wake-up, in the order registered; another interval beats on its own', async () => {
  const m = new Metronome();
  const { seen, mark } = recorder();
  const stops = [
    m.every(30, () => {
      seen.push('a');
      // Runs between two callbacks only if they do not share this wake-up.
      setImmediate(() => seen.push('turn'));
    }),
    m.every(30, mark('b')),
    m.every(30, mark('c')),
    m.every(45, mark('x')),
  ];
  await until(() => count(seen, 'c') >= 3 && count(seen, 'x') >= 1, 'three beats of 30 ms and one of 45 ms');
  for (const stop of stops) stop();
  const beats = seen.flatMap((s, i) => (s === 'a' ? [seen.slice(i, i + 3)] : []));
  expect(beats.length).toBeGreaterThanOrEqual(3);
  for (const beat of beats.slice(0, -1)) expect(beat).toEqual(['a', 'b', 'c']);
});

test('a stopped callback is not called again; the interval\'s timer ends with its last callback', async () => {
  const m = new Metronome();
  const { seen, mark } = recorder();
  const stopA = m.every(20, mark('a'));
  const stopB = m.every(20, mark('b'));
  await until(() => count(seen, 'b') >= 1, 'a beat');
  stopA();
  stopA(); // twice is harmless
  const before = seen.length;
  await until(() => seen.length >= before + 2, 'two more beats');
  expect(seen.slice(before)).toEqual(seen.slice(before).map(() => 'b'));
  stopB();
  const after = seen.length;
  await Bun.sleep(60);
  expect(seen.length).toBe(after);
  // A new callback at that interval starts a new timer.
  const stopC = m.every(20, mark('c'));
  await until(() => seen.at(-1) === 'c', 'a beat of the new timer');
  stopC();
});

test('a callback that throws leaves the others of its beat running; its error goes to onError', async () => {
  const errors: unknown[] = [];
  const m = new Metronome((e) => errors.push(e));
  const { seen, mark } = recorder();
  const stops = [
    m.every(20, () => {
      throw new Error('boom');
    }),
    m.every(20, mark('after')),
  ];
  await until(() => seen.length >= 1, 'a beat');
  for (const stop of stops) stop();
  expect(seen).toEqual(['after']);
  expect(errors.map((e) => (e as Error).message)).toEqual(['boom']);
});

test('a callback stopping another during a beat: the stopped one is not called in that beat', async () => {
  const m = new Metronome();
  const { seen } = recorder();
  let stopB = () => {};
  const stopA = m.every(20, () => {
    seen.push('a');
    stopB();
  });
  stopB = m.every(20, () => seen.push('b'));
  await until(() => seen.length >= 1, 'a beat');
  await Bun.sleep(50);
  stopA();
  expect(new Set(seen)).toEqual(new Set(['a']));
});
