/**
 * The lifecycle controller's knobs and their safe defaults (beyond upstream: upstream deletes on
 * the first "not found"). Each option maps to one flag, named in its comment.
 */

export type DeletionPolicy = 'delete' | 'taint' | 'never';
export const DELETION_POLICIES: readonly DeletionPolicy[] = ['delete', 'taint', 'never'];

export interface BreakerOptions {
  /** --node-deletion-breaker-max-share: share of managed nodes that may be judged gone within the window (0..1; 1 turns the breaker off). */
  maxShare: number;
  /** --node-deletion-breaker-max-count: absolute cap on nodes judged gone within the window; unset (or 0, as the flag writes it) = no absolute cap. */
  maxCount?: number;
  /** --node-deletion-breaker-window: how long a deletion keeps counting against the breaker. */
  windowMs: number;
}

export interface LifecycleOptions {
  /** --node-monitor-period: time between two passes over all nodes. */
  monitorPeriodMs: number;
  /** --node-deletion-policy: what happens to a node whose machine is confirmed gone. */
  deletionPolicy: DeletionPolicy;
  /** --node-deletion-grace-period: minimum time since the first of a run of "not found" answers. */
  gracePeriodMs: number;
  /** --node-deletion-not-found-threshold: consecutive "not found" answers needed (at least 1). */
  notFoundThreshold: number;
  breaker: BreakerOptions;
  /** --node-deletion-breaker-acknowledged: lets every confirmed deletion through the breaker (meant to be set for one rollout, then removed). */
  breakerAcknowledged: boolean;
  /** --node-lifecycle-provider-timeout: a provider call not answered by then counts as "unknown". */
  providerTimeoutMs: number;
  /**
   * --node-deletion-shrink-max-share: share (0..1) of the machines a provider listed that may be
   * missing from its next answer and still be believed; more are "unknown" until the smaller list
   * is confirmed (snapshot.ts). 1 turns the shrink rule off; the empty-answer rule always holds.
   */
  shrinkMaxShare: number;
}

export const DEFAULT_LIFECYCLE_OPTIONS: Readonly<LifecycleOptions> = Object.freeze({
  monitorPeriodMs: 5_000,
  deletionPolicy: 'delete',
  gracePeriodMs: 5 * 60_000,
  notFoundThreshold: 3,
  breaker: Object.freeze({ maxShare: 0.2, windowMs: 10 * 60_000 }),
  breakerAcknowledged: false,
  providerTimeoutMs: 10_000,
  shrinkMaxShare: 0.5,
});

/**
 * Options that behave like upstream: first "not found" deletes, no breaker, no shrink rule. The
 * empty-answer rule (snapshot.ts) stays: an answer listing none of a provider's machines is
 * never taken as all of them gone.
 */
export const UPSTREAM_COMPATIBLE_OPTIONS: Readonly<Partial<LifecycleOptions>> = Object.freeze({
  gracePeriodMs: 0,
  notFoundThreshold: 1,
  breaker: Object.freeze({ maxShare: 1, windowMs: 0 }),
  shrinkMaxShare: 1,
});

export type LifecycleOptionsInput = Partial<Omit<LifecycleOptions, 'breaker'>> & { breaker?: Partial<BreakerOptions> };

/** Fills in the defaults and rejects values that would make the safety rules meaningless. */
export function resolveLifecycleOptions(input: LifecycleOptionsInput = {}): LifecycleOptions {
  const d = DEFAULT_LIFECYCLE_OPTIONS;
  const opts: LifecycleOptions = {
    ...d,
    ...definedOnly(input),
    breaker: { ...d.breaker, ...definedOnly(input.breaker ?? {}) },
  };
  if (opts.breaker.maxCount === 0) delete opts.breaker.maxCount; // the flag's "0: no absolute cap"
  const problems: string[] = [];
  if (!(opts.monitorPeriodMs > 0)) problems.push('monitor period must be positive');
  if (!DELETION_POLICIES.includes(opts.deletionPolicy)) problems.push(`deletion policy must be one of ${DELETION_POLICIES.join(', ')}, not ${JSON.stringify(opts.deletionPolicy)}`);
  if (!(opts.gracePeriodMs >= 0)) problems.push('deletion grace period must not be negative');
  if (!Number.isInteger(opts.notFoundThreshold) || opts.notFoundThreshold < 1) problems.push('not-found threshold must be an integer of at least 1');
  if (!(opts.breaker.maxShare >= 0 && opts.breaker.maxShare <= 1)) problems.push('breaker max share must be between 0 and 1');
  const maxCount = opts.breaker.maxCount;
  if (maxCount !== undefined && (!Number.isInteger(maxCount) || maxCount < 1)) problems.push('breaker max count must be a whole number (0: no absolute cap)');
  if (!(opts.breaker.windowMs >= 0)) problems.push('breaker window must not be negative');
  if (!(opts.providerTimeoutMs > 0)) problems.push('provider timeout must be positive');
  if (!(opts.shrinkMaxShare >= 0 && opts.shrinkMaxShare <= 1)) problems.push('shrink max share must be between 0 and 1');
  if (problems.length > 0) throw new Error(`invalid node lifecycle options: ${problems.join('; ')}`);
  return opts;
}

function definedOnly<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/** Reads of a shrunken provider answer needed before it is believed: the not-found threshold, and never a single read. */
export function shrinkConfirmReads(opts: Pick<LifecycleOptions, 'notFoundThreshold'>): number {
  return Math.max(2, opts.notFoundThreshold);
}
