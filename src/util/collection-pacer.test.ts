import { describe, expect, test } from 'bun:test';
import { CollectionPacer } from './collection-pacer.ts';

describe('CollectionPacer', () => {
  const pacer = (minIntervalMs = 250) => {
    let now = 0;
    const made: number[] = [];
    const p = new CollectionPacer({ eventsPerCollection: 3, windowMs: 1_000, minIntervalMs, collect: () => made.push(now), now: () => now });
    return { p, made, advance: (ms: number) => (now += ms) };
  };

  test('collects once enough events came within the window and enough time went by, then counts again from zero', () => {
    const { p, made, advance } = pacer();
    advance(5_000);
    p.note(); p.note();
    expect(made).toEqual([]);
    p.note();
    expect(made).toEqual([5_000]);
    advance(300);
    p.note(); p.note();
    expect(made).toEqual([5_000]);
    p.note();
    expect(made).toEqual([5_000, 5_300]);
    expect(p.collections).toBe(2);
  });

  test('a burst inside the interval waits for it; the first window filled after it collects', () => {
    const { p, made, advance } = pacer(3_000);
    advance(3_000);
    for (let i = 0; i < 3; i++) p.note();
    for (let i = 0; i < 100; i++) { advance(10); p.note(); }
    expect(made).toEqual([3_000]);
    advance(2_000);
    p.note(); p.note();
    expect(made).toEqual([3_000]);
    p.note();
    expect(made).toEqual([3_000, 6_000]);
  });

  test('a trickle never collects: events further apart than the window allows for their number', () => {
    const { p, made, advance } = pacer();
    for (let i = 0; i < 1_000; i++) { advance(501); p.note(); }
    expect(made).toEqual([]);
    // The same number of events, quicker: collected.
    for (let i = 0; i < 3; i++) { advance(100); p.note(); }
    expect(made.length).toBe(1);
  });

  test('a slow collection spaces the next ones out: at most 10 % of the time collecting', () => {
    let now = 0;
    const made: number[] = [];
    const p = new CollectionPacer({ eventsPerCollection: 1, minIntervalMs: 250, collect: () => { made.push(now); now += 400; }, now: () => now });
    now = 3_000;
    p.note();
    now = 3_400 + 3_999;
    p.note();
    expect(made).toEqual([3_000]);
    now = 3_400 + 4_000;
    p.note();
    expect(made).toEqual([3_000, 7_400]);
  });

  test('time alone never collects: no events, no collection (nothing runs at idle)', () => {
    const { p, made, advance } = pacer();
    advance(600_000);
    p.note(); p.note();
    expect(made).toEqual([]);
  });

  test('the default collects for real, synchronously: garbage made before the note is gone after it', () => {
    const p = new CollectionPacer({ eventsPerCollection: 1, minIntervalMs: 0 });
    const refs = makeGarbage(200);
    p.note();
    expect(p.collections).toBe(1);
    // Most, not all: the collector scans the stack conservatively and may keep a stray few.
    expect(refs.filter((r) => r.deref() !== undefined).length).toBeLessThan(20);
  });
});

/** Objects nothing holds, each watched through a WeakRef (made in a function of its own, off the test's stack). */
function makeGarbage(n: number): WeakRef<object>[] {
  const refs: WeakRef<object>[] = [];
  for (let i = 0; i < n; i++) refs.push(new WeakRef({ i, payload: new Array(64).fill(i) }));
  return refs;
}
