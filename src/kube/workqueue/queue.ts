import { systemClock, type Clock } from '../../util/time.ts';
import { noQueueMetrics, type QueueMetrics, type WorkQueueMetrics } from './metrics.ts';
import { defaultControllerRateLimiter, type RateLimiter } from './rate-limiters.ts';
import { WaitingItems } from './waiting-items.ts';

export type GetResult<K> = { item: K; shutdown: false } | { shutdown: true };

export interface WorkQueueOptions<K> {
  /** Decides addRateLimited's delay; defaults to defaultControllerRateLimiter(). */
  rateLimiter?: RateLimiter<K>;
  /** Where to report; omitted means no metrics. */
  metrics?: WorkQueueMetrics;
  /** Time and timers; defaults to the system clock. */
  clock?: Clock;
}

/**
 * A rate-limited, delaying work queue with client-go's guarantees: an item is queued at most once,
 * and an item is never handed to two workers at once (adding it while it is processed marks it
 * dirty, and done() queues it again). Items are compared as Map keys, so use strings or numbers.
 */
export class WorkQueue<K = string> {
  readonly rateLimiter: RateLimiter<K>;
  private readonly clock: Clock;
  private readonly metrics: QueueMetrics<K>;
  private readonly queue: K[] = [];
  /** Items that need processing: queued ones, and processing ones added again. */
  private readonly dirty = new Set<K>();
  private readonly processing = new Set<K>();
  /** get() calls waiting for an item; only non-empty while the queue is empty. */
  private readonly getters: ((result: GetResult<K>) => void)[] = [];
  private readonly waiting = new WaitingItems<K>();
  private timer?: { readyAt: number; cancel: () => void };
  private drainWaiters: (() => void)[] = [];
  private shutdownRequested = false;

  constructor(
    readonly name: string,
    opts: WorkQueueOptions<K> = {},
  ) {
    this.clock = opts.clock ?? systemClock;
    this.rateLimiter = opts.rateLimiter ?? defaultControllerRateLimiter<K>(() => this.clock.now());
    this.metrics = opts.metrics ? opts.metrics.forQueue<K>(name, () => this.clock.now()) : (noQueueMetrics as QueueMetrics<K>);
  }

  /** Queues the item unless it is already queued; ignored after shutdown. */
  add(item: K): void {
    if (this.shutdownRequested || this.dirty.has(item)) return;
    this.metrics.add(item);
    this.dirty.add(item);
    if (this.processing.has(item)) return;
    this.push(item);
  }

  /** Queues the item after ms milliseconds; if it is already waiting, the earlier time wins. */
  addAfter(item: K, ms: number): void {
    if (this.shutdownRequested) return;
    this.metrics.retry();
    if (!(ms > 0)) return this.add(item);
    this.waiting.add(item, this.clock.now() + ms);
    this.armTimer();
  }

  /** Queues the item after the delay the rate limiter gives it. */
  addRateLimited(item: K): void {
    if (this.shutdownRequested) return;
    this.addAfter(item, this.rateLimiter.when(item));
  }

  /** Resets the item's backoff (call after it was processed successfully). */
  forget(item: K): void {
    this.rateLimiter.forget(item);
  }

  numRequeues(item: K): number {
    return this.rateLimiter.numRequeues(item);
  }

  /** Waits for the next item; after shutdown, returns {shutdown: true} once the queue is empty. */
  get(): Promise<GetResult<K>> {
    if (this.queue.length > 0) return Promise.resolve(this.take());
    if (this.shutdownRequested) return Promise.resolve({ shutdown: true });
    return new Promise((resolve) => this.getters.push(resolve));
  }

  /** Marks the item's processing finished; if it was added meanwhile, it is queued again. */
  done(item: K): void {
    if (!this.processing.delete(item)) return;
    this.metrics.done(item);
    if (this.dirty.has(item)) this.push(item);
    if (this.processing.size === 0) this.finishDrain();
  }

  /** Number of queued items (not counting those processing or waiting for their time). */
  len(): number {
    return this.queue.length;
  }

  /** Stops accepting items and wakes idle workers; queued items are still handed out. */
  shutDown(): void {
    this.beginShutdown();
    // A plain shutdown cuts a drain short, as upstream.
    for (const resolve of this.drainWaiters.splice(0)) resolve();
    this.closeMetricsIfIdle();
  }

  /** Shuts down and resolves once every item being processed is done(). */
  shutDownWithDrain(): Promise<void> {
    this.beginShutdown();
    if (this.processing.size === 0) {
      this.closeMetricsIfIdle();
      return Promise.resolve();
    }
    return new Promise((resolve) => this.drainWaiters.push(resolve));
  }

  shuttingDown(): boolean {
    return this.shutdownRequested;
  }

  private push(item: K): void {
    this.queue.push(item);
    const getter = this.getters.shift();
    if (getter) getter(this.take());
  }

  /** Hands the head of the queue to a worker (bookkeeping happens now, not when the promise settles). */
  private take(): GetResult<K> {
    const item = this.queue.shift() as K;
    this.metrics.get(item);
    this.processing.add(item);
    this.dirty.delete(item);
    return { item, shutdown: false };
  }

  private beginShutdown(): void {
    this.shutdownRequested = true;
    this.timer?.cancel();
    this.timer = undefined;
    this.waiting.clear();
    for (const getter of this.getters.splice(0)) getter({ shutdown: true });
  }

  private finishDrain(): void {
    if (!this.shutdownRequested) return;
    for (const resolve of this.drainWaiters.splice(0)) resolve();
    this.closeMetricsIfIdle();
  }

  private closeMetricsIfIdle(): void {
    if (this.processing.size === 0) this.metrics.close();
  }

  /** Keeps one timer armed for the earliest waiting item. */
  private armTimer(): void {
    const readyAt = this.waiting.nextReadyAt();
    if (this.timer?.readyAt === readyAt) return;
    this.timer?.cancel();
    this.timer = undefined;
    if (readyAt === undefined) return;
    const cancel = this.clock.setTimer(() => {
      this.timer = undefined;
      for (const item of this.waiting.takeReady(this.clock.now())) this.add(item);
      this.armTimer();
    }, readyAt - this.clock.now());
    this.timer = { readyAt, cancel };
  }
}
