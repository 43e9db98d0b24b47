import { KubeApiError, isGone, isUnanswered, type KubeStatus } from '../errors.ts';
import { ResourceClient, type ResourceType } from '../resources.ts';
import type { KubeTransport, QueryValue, WatchEvent } from '../transport.ts';
import { silentLogger, type Logger } from '../../log.ts';
import { Backoff } from '../../util/backoff.ts';
import type { RetryWait } from '../api-server-return.ts';
import type { KubeObject, Store, StoreChange } from './store.ts';
import { sleep as defaultSleep } from '../../util/time.ts';
import { errorMessage } from '../../util/errors.ts';
import { watchEventCollections } from '../../util/collection-pacer.ts';

/**
 * Keeps a Store equal to the server's objects: list (paged), then watch from the list's
 * resourceVersion, and never give up until aborted. client-node's informer stops for good on its
 * first error other than 410; this one follows client-go's reflector instead:
 *   - watch closed by the server or dropped: watch again from the last resourceVersion seen
 *     (events and bookmarks move it), so nothing is missed and nothing is listed again;
 *   - 410 Gone (the request's status or an ERROR event): that resourceVersion is compacted, list
 *     again; the relist's difference reaches the handlers, deletes missed meanwhile included;
 *   - anything else: wait (exponential backoff with jitter) and try again; the wait is cut short
 *     and the backoff starts over when the API server answers again after an outage (retryWait).
 */

export interface ReflectorOptions<T extends KubeObject> {
  transport: KubeTransport;
  type: ResourceType;
  namespace?: string;
  labelSelector?: string;
  fieldSelector?: string;
  /** Applied to every object before it is stored (e.g. stripManagedFields). */
  transform?: (obj: T) => T;
  store: Store<T>;
  /** Told every change, in order, after the store holds it. */
  onChange: (change: StoreChange<T>) => void;
  /** Told once, when the first list's changes have all been handed on. */
  onSynced?: () => void;
  logger?: Logger;
  /** Objects per list page (the list's `limit`). */
  pageSize?: number;
  backoff?: Backoff;
  /** How the reflector waits between attempts; replaced in tests to record the schedule. */
  sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
  /**
   * Waits after a failure without an answer (refused, reset, 5xx) instead of `sleep`, cut short
   * when the API server answers again after an outage (ApiServerReturn): then the backoff starts
   * over, so a reconnect never waits out a delay that grew while the server was down.
   */
  retryWait?: RetryWait;
  /** The watch's timeoutSeconds; client-go picks 5 to 10 minutes at random so watches do not all end together. */
  watchTimeoutSeconds?: () => number;
}

const DEFAULT_PAGE_SIZE = 500;
/** A watch that ends this fast without a single event is a failure (a proxy closing it), not a normal end. */
const SHORT_WATCH_MS = 1000;

export class Reflector<T extends KubeObject> {
  private readonly client: ResourceClient<T>;
  private readonly log: Logger;
  private readonly backoff: Backoff;
  private readonly sleep: (ms: number, signal: AbortSignal) => Promise<void>;
  private readonly transform: (obj: T) => T;
  private resourceVersion?: string;
  private synced = false;
  private eventsInWatch = 0;

  constructor(private readonly opts: ReflectorOptions<T>) {
    this.client = new ResourceClient<T>(opts.transport, opts.type);
    this.log = (opts.logger ?? silentLogger).with({ resource: opts.type.plural, namespace: opts.namespace });
    this.backoff = opts.backoff ?? new Backoff();
    this.sleep = opts.sleep ?? defaultSleep;
    this.transform = opts.transform ?? ((obj) => obj);
  }

  /** True once the first complete list is in the store and its changes were handed on. */
  hasSynced(): boolean {
    return this.synced;
  }

  /** Where the next watch starts; undefined when the next step is a list. */
  get lastSyncResourceVersion(): string | undefined {
    return this.resourceVersion;
  }

  /** Lists and watches until the signal aborts; resolves once the watch is closed. */
  async run(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      let listedNow = false;
      let step: 'list' | 'watch' = 'list';
      try {
        if (this.resourceVersion === undefined) {
          await this.list(signal);
          listedNow = true;
        }
        step = 'watch';
        await this.watch(signal);
      } catch (e) {
        if (signal.aborted) break;
        if (isGone(e)) {
          this.log.info('resource version too old, listing again', { step, resourceVersion: this.resourceVersion, error: errorMessage(e) });
          this.resourceVersion = undefined;
          // A watch opened from a fresh list that is refused at once means a misbehaving server:
          // back off rather than list in a tight loop.
          if (!(listedNow && this.eventsInWatch === 0)) continue;
        }
        const delay = this.backoff.next();
        this.log.warn('list/watch failed, retrying', { step, error: errorMessage(e), retryInMs: Math.round(delay), resourceVersion: this.resourceVersion });
        try {
          const outcome = await this.waitToRetry(delay, signal, isUnanswered(e));
          if (outcome === 'back') this.backoff.reset();
          this.log.debug(4, 'retrying now', { after: outcome === 'back' ? 'the API server answered again' : 'the backoff' });
        } catch {
          break; // aborted while waiting
        }
      }
    }
  }

  /** After a failure without an answer, through retryWait (the API server's return cuts it short). */
  private async waitToRetry(ms: number, signal: AbortSignal, unanswered: boolean): Promise<'elapsed' | 'back'> {
    if (this.opts.retryWait && unanswered) return this.opts.retryWait.wait(ms, signal);
    await this.sleep(ms, signal);
    return 'elapsed';
  }

  private async list(signal: AbortSignal): Promise<void> {
    const objects: T[] = [];
    let continueToken: string | undefined;
    let resourceVersion: string | undefined;
    do {
      const page = await this.client.list({
        namespace: this.opts.namespace,
        query: { ...this.selectors(), limit: this.opts.pageSize ?? DEFAULT_PAGE_SIZE, continue: continueToken },
        signal,
      });
      // List items come without kind/apiVersion; watch events have them: make both look alike.
      const kind = page.kind?.replace(/List$/, '');
      for (const item of page.items) {
        const typed = item as T & { kind?: string; apiVersion?: string };
        typed.kind ??= kind;
        typed.apiVersion ??= page.apiVersion;
        objects.push(this.transform(typed));
      }
      continueToken = page.metadata.continue || undefined;
      resourceVersion = page.metadata.resourceVersion;
    } while (continueToken);
    if (!resourceVersion) throw new Error(`list of ${this.opts.type.plural} returned no resourceVersion`);

    const changes = this.opts.store.replace(objects);
    this.resourceVersion = resourceVersion;
    this.log.debug(2, 'listed', { objects: objects.length, resourceVersion });
    for (const change of changes) this.opts.onChange(change);
    if (!this.synced) {
      this.synced = true;
      this.opts.onSynced?.();
    }
  }

  /** One watch from the last resourceVersion; returns when the server ends it normally. */
  private async watch(signal: AbortSignal): Promise<void> {
    const path = this.client.collectionPath(this.opts.namespace);
    const query: Record<string, QueryValue> = {
      ...this.selectors(),
      resourceVersion: this.resourceVersion,
      allowWatchBookmarks: true,
      timeoutSeconds: this.opts.watchTimeoutSeconds?.() ?? Math.floor(300 * (1 + Math.random())),
    };
    // Our own signal too, so leaving the loop on an ERROR event closes the connection.
    const closer = new AbortController();
    const started = performance.now();
    this.eventsInWatch = 0;
    try {
      for await (const event of this.opts.transport.watch<T | KubeStatus>(path, query, AbortSignal.any([signal, closer.signal]))) {
        this.apply(event, path);
        this.eventsInWatch++; // counted once applied: an ERROR event is no sign of a working watch
      }
    } finally {
      closer.abort();
    }
    if (!signal.aborted && this.eventsInWatch === 0 && performance.now() - started < SHORT_WATCH_MS) {
      throw new Error('watch closed at once without any event');
    }
  }

  private apply(event: WatchEvent<T | KubeStatus>, path: string): void {
    if (event.type === 'ERROR') {
      const status = event.object as KubeStatus;
      throw new KubeApiError(status.code ?? 500, status.reason || 'Unknown', status.message ?? 'watch error', 'GET', path, status.details);
    }
    const raw = event.object as T;
    const resourceVersion = raw.metadata?.resourceVersion;
    let change: StoreChange<T> | undefined;
    switch (event.type) {
      case 'BOOKMARK':
        break;
      case 'ADDED':
      case 'MODIFIED':
        change = this.opts.store.upsert(this.transform(raw));
        break;
      case 'DELETED':
        change = this.opts.store.delete(this.transform(raw));
        break;
      default:
        this.log.warn('unknown watch event type ignored', { type: (event as { type: unknown }).type });
        return;
    }
    if (resourceVersion) this.resourceVersion = resourceVersion;
    if (change) this.opts.onChange(change);
    watchEventCollections.note();
  }

  private selectors(): Record<string, QueryValue> {
    return { labelSelector: this.opts.labelSelector, fieldSelector: this.opts.fieldSelector };
  }
}
