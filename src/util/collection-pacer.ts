/**
 * A full garbage collection while watch events pour in, a few times a second at most, never at
 * idle and never for a cluster's steady trickle.
 *
 * Why: in a burst (5000 nodes registering) each node's cached copy is replaced several times and
 * the replaced copies, the decoded events and the request bodies outlive the young generation.
 * JavaScriptCore's own schedule collects them only after the burst, so the peak RSS carried
 * 15-20 MiB of garbage (BENCHMARKS.md, run 8 and session 18: collecting every 3 s took 5-10 MiB
 * off, every 250-500 ms 10-17). Bun has no setting that does this (`--smol`, heap growth factors
 * and a heap cap were measured in run 7: no change), and collecting when the heap has grown by a
 * share, or when RSS has, did less than collecting on time (session 18): much of the garbage is the
 * decoded strings' memory beside the heap.
 *
 * The rule costs nothing when nothing happens: there is no timer. Each watch event is noted; when
 * `eventsPerCollection` events came within `windowMs` (a burst, not kubelets' status updates
 * trickling in) and at least `minIntervalMs` went by since the last collection, the note collects,
 * synchronously (a 30-40 MiB heap takes 15-25 ms). The wait after a collection is also at least
 * `maxDutyFraction`'s inverse times what it took, so a big heap (10,000 nodes and services) is not
 * collected more than that share of the time.
 */
export interface CollectionPacerOptions {
  eventsPerCollection?: number;
  windowMs?: number;
  minIntervalMs?: number;
  /** At most this share of the time spent collecting. */
  maxDutyFraction?: number;
  /** A full, synchronous collection. */
  collect?: () => void;
  now?: () => number;
}

const DEFAULT_EVENTS_PER_COLLECTION = 200;
const DEFAULT_WINDOW_MS = 1_000;
const DEFAULT_MIN_COLLECTION_INTERVAL_MS = 250;
const DEFAULT_MAX_COLLECTION_DUTY = 0.1;

export class CollectionPacer {
  private readonly eventsPerCollection: number;
  private readonly windowMs: number;
  private readonly minIntervalMs: number;
  private readonly maxDutyFraction: number;
  private readonly collect: () => void;
  private readonly now: () => number;
  /** Events since `windowStart`. */
  private events = 0;
  private windowStart: number;
  private nextAt: number;
  /** Collections made so far (tests read it). */
  collections = 0;

  constructor(opts: CollectionPacerOptions = {}) {
    this.eventsPerCollection = opts.eventsPerCollection ?? DEFAULT_EVENTS_PER_COLLECTION;
    this.windowMs = opts.windowMs ?? DEFAULT_WINDOW_MS;
    this.minIntervalMs = opts.minIntervalMs ?? DEFAULT_MIN_COLLECTION_INTERVAL_MS;
    this.maxDutyFraction = opts.maxDutyFraction ?? DEFAULT_MAX_COLLECTION_DUTY;
    this.collect = opts.collect ?? (() => Bun.gc(true));
    this.now = opts.now ?? (() => performance.now());
    this.windowStart = this.now();
    this.nextAt = this.windowStart + this.minIntervalMs;
  }

  /** One watch event applied. */
  note(): void {
    const now = this.now();
    if (now - this.windowStart > this.windowMs) {
      this.windowStart = now;
      this.events = 0;
    }
    if (++this.events < this.eventsPerCollection) return;
    this.windowStart = now;
    this.events = 0;
    if (now < this.nextAt) return;
    this.collect();
    const ended = this.now();
    this.collections++;
    this.nextAt = ended + Math.max(this.minIntervalMs, (ended - now) / this.maxDutyFraction);
  }
}

/** The process's one pacer: every informer's events count towards the same heap. */
export const watchEventCollections = new CollectionPacer();
