import { Counter, Gauge, Histogram, type Registry } from '../../util/prom.ts';
import { perRegistry } from '../../util/per-registry.ts';

/** What a queue reports about its items; the no-op version is used when no metrics are wanted. */
export interface QueueMetrics<K> {
  add(item: K): void;
  get(item: K): void;
  done(item: K): void;
  retry(): void;
  /** The queue is finished: stop reporting its in-flight work. */
  close(): void;
}

export const noQueueMetrics: QueueMetrics<unknown> = {
  add() {},
  get() {},
  done() {},
  retry() {},
  close() {},
};

// Upstream: prometheus.ExponentialBuckets(10e-9, 10, 10), i.e. 10ns .. 10s.
const DURATION_BUCKETS = Array.from({ length: 10 }, (_, i) => Number((1e-8 * 10 ** i).toPrecision(1)));

/**
 * The work queue metrics of k8s.io/component-base/metrics/prometheus/workqueue, registered once on
 * a registry; each queue takes a handle from forQueue(), labelled with its name.
 */
export class WorkQueueMetrics {
  readonly depth: Gauge<'name'>;
  readonly adds: Counter<'name'>;
  readonly queueDuration: Histogram<'name'>;
  readonly workDuration: Histogram<'name'>;
  readonly retries: Counter<'name'>;
  readonly unfinishedWork: Gauge<'name'>;
  readonly longestRunningProcessor: Gauge<'name'>;
  private readonly open = new Set<QueueMetricsHandle<unknown>>();

  constructor(registry: Registry) {
    const registers = [registry];
    const labelNames = ['name'] as const;
    this.depth = new Gauge({ name: 'workqueue_depth', help: 'Current depth of workqueue', labelNames, registers });
    this.adds = new Counter({ name: 'workqueue_adds_total', help: 'Total number of adds handled by workqueue', labelNames, registers });
    this.queueDuration = new Histogram({
      name: 'workqueue_queue_duration_seconds',
      help: 'How long in seconds an item stays in workqueue before being requested.',
      buckets: DURATION_BUCKETS,
      labelNames,
      registers,
    });
    this.workDuration = new Histogram({
      name: 'workqueue_work_duration_seconds',
      help: 'How long in seconds processing an item from workqueue takes.',
      buckets: DURATION_BUCKETS,
      labelNames,
      registers,
    });
    this.retries = new Counter({ name: 'workqueue_retries_total', help: 'Total number of retries handled by workqueue', labelNames, registers });
    // In-flight work is measured when scraped rather than on a timer, so no timer keeps the process alive.
    this.unfinishedWork = new Gauge({
      name: 'workqueue_unfinished_work_seconds',
      help:
        "How many seconds of work has done that is in progress and hasn't been observed by work_duration. " +
        'Large values indicate stuck threads. One can deduce the number of stuck threads by observing the rate at which this increases.',
      labelNames,
      registers,
      collect: () => this.collectInFlight(this.unfinishedWork, (h) => h.unfinishedSeconds(), (a, b) => a + b),
    });
    this.longestRunningProcessor = new Gauge({
      name: 'workqueue_longest_running_processor_seconds',
      help: 'How many seconds has the longest running processor for workqueue been running.',
      labelNames,
      registers,
      collect: () => this.collectInFlight(this.longestRunningProcessor, (h) => h.longestRunningSeconds(), Math.max),
    });
  }

  /** A handle for one queue; now() is the queue's clock in milliseconds. */
  forQueue<K>(name: string, now: () => number): QueueMetrics<K> {
    const handle = new QueueMetricsHandle<K>(this, name, now, (h) => this.open.delete(h as QueueMetricsHandle<unknown>));
    this.open.add(handle as QueueMetricsHandle<unknown>);
    return handle;
  }

  /** Sets the gauge per queue name from the open queues (queues sharing a name are combined). */
  private collectInFlight(gauge: Gauge<'name'>, measure: (h: QueueMetricsHandle<unknown>) => number, combine: (a: number, b: number) => number): void {
    const byName = new Map<string, number>();
    for (const handle of this.open) {
      const previous = byName.get(handle.name);
      const value = measure(handle);
      byName.set(handle.name, previous === undefined ? value : combine(previous, value));
    }
    gauge.reset();
    for (const [name, value] of byName) gauge.set({ name }, value);
  }
}

/** Per-queue bookkeeping, as upstream's defaultQueueMetrics: when items were added and started. */
class QueueMetricsHandle<K> implements QueueMetrics<K> {
  private readonly addTimes = new Map<K, number>();
  private readonly processingStartTimes = new Map<K, number>();
  private readonly labels: { name: string };

  constructor(
    private readonly metrics: WorkQueueMetrics,
    readonly name: string,
    private readonly now: () => number,
    private readonly onClose: (handle: QueueMetricsHandle<K>) => void,
  ) {
    this.labels = { name };
    // Make the series visible from the start, as upstream does by touching them at creation.
    metrics.depth.inc(this.labels, 0);
    metrics.adds.inc(this.labels, 0);
    metrics.retries.inc(this.labels, 0);
    metrics.queueDuration.zero(this.labels);
    metrics.workDuration.zero(this.labels);
  }

  add(item: K): void {
    this.metrics.adds.inc(this.labels);
    this.metrics.depth.inc(this.labels);
    if (!this.addTimes.has(item)) this.addTimes.set(item, this.now());
  }

  get(item: K): void {
    this.metrics.depth.dec(this.labels);
    const now = this.now();
    this.processingStartTimes.set(item, now);
    const added = this.addTimes.get(item);
    if (added !== undefined) {
      this.metrics.queueDuration.observe(this.labels, (now - added) / 1000);
      this.addTimes.delete(item);
    }
  }

  done(item: K): void {
    const started = this.processingStartTimes.get(item);
    if (started === undefined) return;
    this.metrics.workDuration.observe(this.labels, (this.now() - started) / 1000);
    this.processingStartTimes.delete(item);
  }

  retry(): void {
    this.metrics.retries.inc(this.labels);
  }

  close(): void {
    // Items still queued leave with the queue: the next queue of that name (the next leadership
    // term's) starts at the depth it has, not this one's.
    if (this.addTimes.size > 0) this.metrics.depth.dec(this.labels, this.addTimes.size);
    this.addTimes.clear();
    this.onClose(this);
  }

  unfinishedSeconds(): number {
    const now = this.now();
    let total = 0;
    for (const started of this.processingStartTimes.values()) total += now - started;
    return total / 1000;
  }

  longestRunningSeconds(): number {
    const now = this.now();
    let longest = 0;
    for (const started of this.processingStartTimes.values()) longest = Math.max(longest, now - started);
    return longest / 1000;
  }
}

/** The registry's one WorkQueueMetrics: each leadership term builds its controllers' queues anew on it. */
export const workQueueMetricsFor = perRegistry((registry: Registry) => new WorkQueueMetrics(registry));
