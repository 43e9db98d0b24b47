/**
 * How long the event loop was blocked: a timer due every `intervalMs` measures how late it fires.
 * The closest thing to Go's block/contention profile a single-threaded runtime has (Bun's
 * monitorEventLoopDelay under-reported a 50 ms block as about 1 ms when measured, so this is
 * done by hand). The timer is unref'd: it never keeps the process alive.
 */
export interface EventLoopLagReport {
  sinceMs: number;
  samples: number;
  maxMs: number;
  meanMs: number;
  /** Upper bound (ms) -> samples at most that late. */
  buckets: Record<string, number>;
}

const BOUNDS_MS = [1, 5, 10, 50, 100, 500, 1000, 5000];

export class EventLoopLag {
  private readonly started = performance.now();
  private readonly counts = BOUNDS_MS.map(() => 0);
  private over = 0;
  private samples = 0;
  private sum = 0;
  private max = 0;
  private readonly timer: ReturnType<typeof setInterval>;

  constructor(private readonly intervalMs = 10) {
    let expected = performance.now() + intervalMs;
    this.timer = setInterval(() => {
      const now = performance.now();
      this.record(Math.max(0, now - expected));
      expected = now + intervalMs;
    }, intervalMs);
    this.timer.unref?.();
  }

  private record(lagMs: number): void {
    this.samples++;
    this.sum += lagMs;
    this.max = Math.max(this.max, lagMs);
    const i = BOUNDS_MS.findIndex((b) => lagMs <= b);
    if (i < 0) this.over++;
    else (this.counts[i] as number)++;
  }

  report(): EventLoopLagReport {
    const buckets: Record<string, number> = {};
    BOUNDS_MS.forEach((b, i) => (buckets[`${b}`] = this.counts[i] as number));
    buckets['+Inf'] = this.over;
    return { sinceMs: Math.round(performance.now() - this.started), samples: this.samples, maxMs: round(this.max), meanMs: round(this.samples ? this.sum / this.samples : 0), buckets };
  }

  stop(): void {
    clearInterval(this.timer);
  }
}

const round = (ms: number): number => Math.round(ms * 1000) / 1000;
