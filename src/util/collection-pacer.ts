/**
 * A full garbage collection while watch events pour in, at most every few seconds, never at idle.
 *
 * Why: in a burst (5000 nodes registering) each node's cached copy is replaced several times and
 * the replaced copies, the decoded events and the request bodies outlive the young generation.
 * JavaScriptCore's own schedule collects them only after the burst, so the peak RSS carried
 * 12-15 MiB of garbage (BENCHMARKS.md run 8: forced full collections every 1-3 s took the peak
 * from 120-125 to 108-114 MiB). Bun has no setting that does this (`--smol`, heap growth
 * factors and a heap cap were measured in run 7: no change).
 *
 * The rule costs nothing when nothing happens: there is no timer. Each watch event is noted; a
 * note that finds at least `eventsPerCollection` events since the last collection and at least
 * `minIntervalMs` gone by collects, synchronously (a 30-40 MiB heap takes about 40-50 ms). The
 * wait after a collection is also at least `maxDutyFraction`'s inverse times what it took, so a
 * big heap (10,000 nodes and services) is not collected more than that share of the time. A
 * cluster's steady trickle (kubelets' status updates) collects at most once per
 * `eventsPerCollection` events.
 */
export interface CollectionPacerOptions {
  eventsPerCollection?: number;
  minIntervalMs?: number;
  /** At most this share of the time spent collecting. */
  maxDutyFraction?: number;
  /** A full, synchronous collection. */
  collect?: () => void;
  now?: () => number;
}

const DEFAULT_EVENTS_PER_COLLECTION = 1_000;
const DEFAULT_MIN_COLLECTION_INTERVAL_MS = 3_000;
const DEFAULT_MAX_COLLECTION_DUTY = 0.05;

export class CollectionPacer {
  private readonly eventsPerCollection: number;
  private readonly minIntervalMs: number;
  private readonly maxDutyFraction: number;
  private readonly collect: () => void;
  private readonly now: () => number;
  private events = 0;
  private nextAt: number;
  /** Collections made so far (tests read it). */
  collections = 0;

  constructor(opts: CollectionPacerOptions = {}) {
    this.eventsPerCollection = opts.eventsPerCollection ?? DEFAULT_EVENTS_PER_COLLECTION;
    this.minIntervalMs = opts.minIntervalMs ?? DEFAULT_MIN_COLLECTION_INTERVAL_MS;
    this.maxDutyFraction = opts.maxDutyFraction ?? DEFAULT_MAX_COLLECTION_DUTY;
    this.collect = opts.collect ?? (() => Bun.gc(true));
    this.now = opts.now ?? (() => performance.now());
    this.nextAt = this.now() + this.minIntervalMs;
  }

  /** One watch event applied. */
  note(): void {
    if (++this.events < this.eventsPerCollection) return;
    const started = this.now();
    if (started < this.nextAt) return;
    this.collect();
    const ended = this.now();
    this.collections++;
    this.events = 0;
    this.nextAt = ended + Math.max(this.minIntervalMs, (ended - started) / this.maxDutyFraction);
  }
}

/** The process's one pacer: every informer's events count towards the same heap. */
export const watchEventCollections = new CollectionPacer();
