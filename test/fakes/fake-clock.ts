import type { Clock } from '../../src/util/time.ts';

interface FakeTimer {
  due: number;
  seq: number;
  fn: () => void;
}

/** A clock for tests: time moves only through advance(), which fires the timers that come due, in order. */
export class FakeClock implements Clock {
  private current: number;
  private timers: FakeTimer[] = [];
  private seq = 0;

  constructor(start = 0) {
    this.current = start;
  }

  now(): number {
    return this.current;
  }

  setTimer(fn: () => void, ms: number): () => void {
    const timer: FakeTimer = { due: this.current + Math.max(ms, 0), seq: this.seq++, fn };
    this.timers.push(timer);
    return () => {
      this.timers = this.timers.filter((t) => t !== timer);
    };
  }

  /** Moves time forward by ms, firing each due timer at its own due time (timers set while firing included). */
  advance(ms: number): void {
    const target = this.current + ms;
    for (;;) {
      const next = this.earliestDue(target);
      if (!next) break;
      this.timers = this.timers.filter((t) => t !== next);
      this.current = Math.max(this.current, next.due);
      next.fn();
    }
    this.current = target;
  }

  /** How many timers are armed (lets tests check that nothing is left running). */
  get pendingTimers(): number {
    return this.timers.length;
  }

  private earliestDue(limit: number): FakeTimer | undefined {
    let best: FakeTimer | undefined;
    for (const t of this.timers) {
      if (t.due > limit) continue;
      if (!best || t.due < best.due || (t.due === best.due && t.seq < best.seq)) best = t;
    }
    return best;
  }
}
