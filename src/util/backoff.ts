/**
 * Exponential backoff, the one every retry loop uses. The defaults are client-go's reflector's
 * between failed list/watch attempts: 800ms doubling to 30s with jitter, back to the start after
 * a healthy period (2 minutes without a failure). Jitter only shortens a delay, so the maximum
 * stays a maximum while clients that failed together still spread out. Backoff.doubling(bounds)
 * is the plain kind: initialMs doubling to maxMs, no jitter, until reset().
 */

/** The first delay and the cap of a doubling backoff (what flags, config and tests set). */
export interface BackoffBounds {
  initialMs: number;
  maxMs: number;
}

export interface BackoffOptions {
  initialMs?: number;
  maxMs?: number;
  factor?: number;
  /** Fraction of the delay that is random: 0.5 gives a delay between half and all of it. */
  jitter?: number;
  /** A failure this long after the previous wait ended starts again from initialMs. */
  resetAfterMs?: number;
  random?: () => number;
  now?: () => number;
}

export class Backoff {
  readonly initialMs: number;
  readonly maxMs: number;
  private readonly factor: number;
  private readonly jitter: number;
  private readonly resetAfterMs: number;
  private readonly random: () => number;
  private readonly now: () => number;
  private base: number;
  private waitEndsAt?: number;

  constructor(opts: BackoffOptions = {}) {
    this.initialMs = opts.initialMs ?? 800;
    this.maxMs = opts.maxMs ?? 30_000;
    this.factor = opts.factor ?? 2;
    this.jitter = opts.jitter ?? 0.5;
    this.resetAfterMs = opts.resetAfterMs ?? 120_000;
    this.random = opts.random ?? Math.random;
    this.now = opts.now ?? (() => performance.now());
    if (!(this.initialMs > 0) || this.maxMs < this.initialMs || this.factor < 1 || this.jitter < 0 || this.jitter > 1) {
      throw new RangeError('backoff needs 0 < initialMs <= maxMs, factor >= 1 and 0 <= jitter <= 1');
    }
    this.base = this.initialMs;
  }

  /** initialMs, doubling to maxMs: no jitter, no reset but reset(). */
  static doubling(bounds: BackoffBounds): Backoff {
    return new Backoff({ initialMs: bounds.initialMs, maxMs: bounds.maxMs, jitter: 0, resetAfterMs: Infinity });
  }

  /** The delay before the next attempt, after a failure. */
  next(): number {
    const now = this.now();
    if (this.waitEndsAt !== undefined && now - this.waitEndsAt >= this.resetAfterMs) this.base = this.initialMs;
    const delay = this.base * (1 - this.jitter * this.random());
    this.base = Math.min(this.maxMs, this.base * this.factor);
    this.waitEndsAt = now + delay;
    return delay;
  }

  reset(): void {
    this.base = this.initialMs;
    this.waitEndsAt = undefined;
  }
}
