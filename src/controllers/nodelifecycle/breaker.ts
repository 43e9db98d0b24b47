import type { BreakerOptions } from './options.ts';

/**
 * The deletion circuit breaker (beyond upstream). A mass "not found" is far more likely an
 * outage, a permission change or a wrong region than reality, so the controller refuses to
 * delete more than a share (or number) of its nodes within a window.
 *
 * Counted as "gone": nodes deleted within the window plus every node confirmed gone right now.
 * Current candidates never age out of the window, so a long outage cannot outwait the breaker.
 * At least one node may always go, so 1- and 2-node clusters can still replace a dead machine.
 * While open, only nodes an operator acknowledged are deleted; they still count as gone, so
 * acknowledging one node never lets another through.
 */

export interface BreakerInput<N> {
  /** Nodes confirmed gone this period under policy `delete`. */
  candidates: readonly N[];
  /** Candidates an operator acknowledged: deletable even while the breaker is open. */
  acknowledged: (node: N) => boolean;
  /** Managed nodes in the cluster now. */
  managedCount: number;
  /** Deletions still inside the window. */
  recentDeletions: number;
  /** Operator lets everything through (flag). */
  overridden: boolean;
}

export interface BreakerVerdict<N> {
  open: boolean;
  /** How many nodes may be gone within the window. */
  allowed: number;
  /** How many are: recent deletions + candidates. */
  gone: number;
  /** Managed nodes the share applies to: those present plus those recently deleted. */
  population: number;
  deletable: N[];
  held: N[];
}

/** How many managed nodes may be judged gone within the window; never below 1. */
export function allowedGone(opts: BreakerOptions, population: number): number {
  // The epsilon keeps 0.7 * 100 (= 70.00000000000001) and 0.57 * 100 (= 56.99999999999999) at their intended floor.
  const byShare = Math.floor(opts.maxShare * population + 1e-9);
  return Math.max(1, Math.min(byShare, opts.maxCount ?? Number.POSITIVE_INFINITY));
}

export function evaluateBreaker<N>(input: BreakerInput<N>, opts: BreakerOptions): BreakerVerdict<N> {
  const population = input.managedCount + input.recentDeletions;
  const allowed = allowedGone(opts, population);
  const gone = input.recentDeletions + input.candidates.length;
  const open = !input.overridden && gone > allowed;
  return {
    open,
    allowed,
    gone,
    population,
    deletable: open ? input.candidates.filter(input.acknowledged) : [...input.candidates],
    held: open ? input.candidates.filter((n) => !input.acknowledged(n)) : [],
  };
}

/** Times of deletions, forgotten once they leave the window. */
export class DeletionWindow {
  private times: number[] = [];

  constructor(private readonly windowMs: number) {}

  record(now: number): void {
    this.times.push(now);
  }

  count(now: number): number {
    this.times = this.times.filter((t) => now - t < this.windowMs);
    return this.times.length;
  }
}
