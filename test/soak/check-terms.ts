/**
 * "No write from a replica that did not hold the lease at the time", from the audit log alone:
 * the API server's own receive timestamps of each successful Lease write (who wrote it, and the
 * holder it wrote, logged at level Request) against those of every other write a replica made.
 *
 * A replica holds the lease from a successful write naming it holder until the earliest of: the
 * next successful Lease write by anyone else (a takeover), its own release (holder cleared), or
 * the lease's duration after its last renewal. A write received more than `toleranceMs` after
 * that end is a violation; within the tolerance it is counted as a near miss and reported.
 */

export interface LeaseWrite {
  t: number;
  user: string;
  /** '' when the write released the lease. */
  holder: string;
  durationMs: number;
}

export interface ReplicaWrite {
  t: number;
  user: string;
  verb: string;
  what: string;
  code: number;
}

export interface TermVerdict {
  ok: boolean;
  nearMiss: boolean;
  reason?: string;
}

export function judgeWrite(leases: readonly LeaseWrite[], w: ReplicaWrite, toleranceMs: number): TermVerdict {
  // Sorted by time; the last holder-write by this user received at or before the write.
  let j = -1;
  for (let i = 0; i < leases.length && leases[i]!.t <= w.t; i++) {
    if (leases[i]!.user === w.user && leases[i]!.holder !== '') j = i;
  }
  if (j < 0) return { ok: false, nearMiss: false, reason: `${w.user} never held the lease before this write` };
  const held = leases[j]!;
  let end = held.t + held.durationMs;
  let why = `its lease (renewed ${iso(held.t)}) expired at ${iso(end)}`;
  for (let k = j + 1; k < leases.length; k++) {
    const next = leases[k]!;
    if (next.t >= end) break;
    if (next.user === w.user && next.holder !== '') break; // (cannot happen before w: j is the last)
    end = next.t;
    why = next.user === w.user ? `it released the lease at ${iso(end)}` : `${next.user} took the lease over at ${iso(end)}`;
    break;
  }
  if (w.t <= end) return { ok: true, nearMiss: false };
  const late = w.t - end;
  if (late <= toleranceMs) return { ok: true, nearMiss: true, reason: `${Math.round(late)} ms after ${why}` };
  return { ok: false, nearMiss: false, reason: `${w.verb} ${w.what} received ${iso(w.t)}, ${Math.round(late)} ms after ${why}` };
}

const iso = (t: number) => new Date(t).toISOString();

/** Keeps the Lease writes of one lease in time order (audit events come in completion order). */
export function insertSorted(leases: LeaseWrite[], w: LeaseWrite): void {
  let i = leases.length;
  while (i > 0 && leases[i - 1]!.t > w.t) i--;
  leases.splice(i, 0, w);
}
