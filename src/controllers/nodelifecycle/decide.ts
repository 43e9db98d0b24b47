import type { V1Node } from '@kubernetes/client-node';
import type { Existence } from '../../cloud/types.ts';
import { hasTaint, isNodeReady } from '../../kube/node-helpers.ts';
import { QUARANTINE_TAINT, SHUTDOWN_TAINT, isProtected } from './keys.ts';
import type { LifecycleOptions } from './options.ts';

/**
 * The pure core of the lifecycle controller: given one node, the provider's answer about its
 * machine and what we remember about earlier answers, say what to do. No I/O, no clock.
 *
 * Memory rules (documented in docs/operations.md):
 * - the grace timer starts at the first "not found" and is cleared only by "exists", by the node
 *   turning Ready, or by the Node object being replaced (new UID);
 * - the count of consecutive "not found" answers is reset by any other answer, "unknown" included;
 * - deletion needs both: timer >= grace period AND count >= threshold.
 */

/** What we remember about one node's run of "not found" answers. */
export interface NotFoundStreak {
  /** The Node object the streak belongs to: a re-registered node (new UID) starts afresh. */
  uid: string;
  /** When the first "not found" of the run was answered (clock ms). */
  since: number;
  /** Consecutive "not found" answers, reset by "unknown" and "exists". */
  count: number;
}

export type HoldReason = 'grace' | 'protected' | 'policy';

export type LifecycleAction =
  /** Ready: remove our taints (shutdown, quarantine) that are on the node, if any. */
  | { kind: 'ready'; removeTaints: readonly string[] }
  /** The machine exists: remove the quarantine taint if present, then ask whether it is shut down. */
  | { kind: 'exists'; removeTaints: readonly string[] }
  /** The provider could not tell: do nothing. */
  | { kind: 'unknown' }
  /** Gone, but not acted on (yet). */
  | { kind: 'hold'; reason: HoldReason }
  /** Gone, policy `taint`: add the quarantine taint, keep the object. */
  | { kind: 'quarantine'; alreadyTainted: boolean }
  /** Gone, policy `delete`: a deletion candidate, still subject to the breaker. */
  | { kind: 'delete' };

export interface Decision {
  action: LifecycleAction;
  /** What to remember for the next period; undefined = forget the node. */
  streak: NotFoundStreak | undefined;
}

// The decisions of most nodes in most periods, shared rather than made for every node every period
// (read only). Other taints (the API server's not-ready on every NotReady node) do not matter here.
const READY_WITHOUT_OUR_TAINTS: Decision = Object.freeze({ action: Object.freeze({ kind: 'ready', removeTaints: Object.freeze([]) }), streak: undefined });
const EXISTS_WITHOUT_OUR_TAINTS: Decision = Object.freeze({ action: Object.freeze({ kind: 'exists', removeTaints: Object.freeze([]) }), streak: undefined });

/** A Ready node's answer is ignored (it only served the snapshot view); a NotReady node without one counts as unknown. */
export function decide(
  node: V1Node,
  answer: Existence | undefined,
  previous: NotFoundStreak | undefined,
  now: number,
  opts: Pick<LifecycleOptions, 'deletionPolicy' | 'gracePeriodMs' | 'notFoundThreshold'>,
): Decision {
  const uid = node.metadata?.uid ?? '';
  const streak = previous?.uid === uid ? previous : undefined;

  if (isNodeReady(node)) {
    const shutdown = hasTaint(node, SHUTDOWN_TAINT.key);
    const quarantine = hasTaint(node, QUARANTINE_TAINT.key);
    if (!shutdown && !quarantine) return READY_WITHOUT_OUR_TAINTS;
    return { action: { kind: 'ready', removeTaints: shutdown && quarantine ? [SHUTDOWN_TAINT.key, QUARANTINE_TAINT.key] : [shutdown ? SHUTDOWN_TAINT.key : QUARANTINE_TAINT.key] }, streak: undefined };
  }
  switch (answer) {
    case 'exists':
      // A NotReady node usually carries the API server's not-ready taint: only ours makes a decision of its own.
      if (!hasTaint(node, QUARANTINE_TAINT.key)) return EXISTS_WITHOUT_OUR_TAINTS;
      return { action: { kind: 'exists', removeTaints: [QUARANTINE_TAINT.key] }, streak: undefined };
    case 'unknown':
    case undefined:
      return { action: { kind: 'unknown' }, streak: streak && { ...streak, count: 0 } };
    case 'not-found': {
      const next: NotFoundStreak = streak ? { ...streak, count: streak.count + 1 } : { uid, since: now, count: 1 };
      return { action: goneAction(node, next, now, opts), streak: next };
    }
  }
}

function goneAction(node: V1Node, streak: NotFoundStreak, now: number, opts: Pick<LifecycleOptions, 'deletionPolicy' | 'gracePeriodMs' | 'notFoundThreshold'>): LifecycleAction {
  const confirmed = now - streak.since >= opts.gracePeriodMs && streak.count >= opts.notFoundThreshold;
  if (!confirmed) return { kind: 'hold', reason: 'grace' };
  if (isProtected(node)) return { kind: 'hold', reason: 'protected' };
  switch (opts.deletionPolicy) {
    case 'never':
      return { kind: 'hold', reason: 'policy' };
    case 'taint':
      return { kind: 'quarantine', alreadyTainted: hasTaint(node, QUARANTINE_TAINT.key) };
    case 'delete':
      return { kind: 'delete' };
  }
}
