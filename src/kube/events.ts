import { hostname } from 'node:os';
import { Counter, type Registry } from '../util/prom.ts';
import { perRegistry } from '../util/per-registry.ts';
import type { LogFields, Logger } from '../log.ts';
import { isAlreadyExists, isNotFound, KubeApiError } from './errors.ts';
import type { EventRecorder, EventSubject, EventType } from './event-recorder.ts';
import { EVENTS, ResourceClient } from './resources.ts';
import type { KubeTransport } from './transport.ts';
import type { RequestFence } from './request-fence.ts';
import { sleep } from '../util/time.ts';
import { errorMessage } from '../util/errors.ts';

/**
 * Writes core/v1 Events the way client-go's record package does: every event goes through an
 * EventCorrelator (identical events become a count on one Event, similar ones are combined, a
 * per-object token bucket drops spam), then into a bounded queue that one writer drains. A
 * controller retrying a failing service thousands of times thus writes a handful of Events, and
 * never waits for, or fails because of, the API server.
 */

export interface ObjectReference {
  apiVersion?: string;
  kind?: string;
  name?: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
}

/** A core/v1 Event as plain JSON; timestamps are RFC 3339 strings. */
export interface CoreEvent {
  apiVersion: 'v1';
  kind: 'Event';
  metadata: { name: string; namespace: string };
  involvedObject: ObjectReference;
  type: EventType;
  reason: string;
  message: string;
  source: { component: string; host?: string };
  reportingComponent: string;
  reportingInstance: string;
  firstTimestamp: string;
  lastTimestamp: string;
  count: number;
}

export const AGGREGATE_PREFIX = '(combined from similar events): ';
/** events.k8s.io's note limit; core/v1 has none, but a provider's error page has no place in etcd. */
const MAX_EVENT_MESSAGE_LENGTH = 1024;

export interface CorrelatorOptions {
  /** Wall clock in ms. */
  now?: () => number;
  /** Events one source may write about one object at once (client-go's defaultSpamBurst). */
  spamBurst?: number;
  /** Refill of that allowance per second (client-go's 1 per 5 minutes). */
  spamQps?: number;
  /** Distinct messages for one object and reason after which they are combined. */
  aggregateMaxEvents?: number;
  /** The window in which those distinct messages are counted. */
  aggregateIntervalMs?: number;
  /** Entries kept in each cache. */
  cacheSize?: number;
}

export interface CorrelatedEvent {
  /** The event to write, with its (possibly reused) name, count and timestamps. */
  event: CoreEvent;
  /** True when an Event of that name was already written: patch its count, lastTimestamp and message. */
  update: boolean;
}

/** A Map used as an LRU cache, like client-go's golang/groupcache lru. */
class LruCache<V> {
  private readonly map = new Map<string, V>();
  constructor(private readonly max: number) {}

  get(key: string): V | undefined {
    const value = this.map.get(key);
    if (value !== undefined) {
      this.map.delete(key);
      this.map.set(key, value);
    }
    return value;
  }

  set(key: string, value: V): void {
    this.map.delete(key);
    this.map.set(key, value);
    if (this.map.size > this.max) this.map.delete(this.map.keys().next().value as string);
  }
}

interface SpamRecord { tokens: number; lastMs: number }
interface AggregateRecord { messages: Set<string>; lastMs: number }
interface EventLog { count: number; firstTimestamp: string; name: string }

/**
 * client-go's EventCorrelator, step for step: aggregate (similar -> combined), observe (identical
 * -> counted on the first one's name), then filter (spam). Dropped events still count, so the
 * next Event written about them carries the true count.
 */
export class EventCorrelator {
  private readonly now: () => number;
  private readonly spamBurst: number;
  private readonly spamQps: number;
  private readonly aggregateMaxEvents: number;
  private readonly aggregateIntervalMs: number;
  private readonly spam: LruCache<SpamRecord>;
  private readonly aggregates: LruCache<AggregateRecord>;
  private readonly observed: LruCache<EventLog>;
  /**
   * The sub-millisecond digits of the next name, counted from a random start so that writers in other
   * processes (a speaker per node) naming an Event about the same object in the same millisecond
   * pick other names. client-go's UnixNano rarely collides; a millisecond clock plus a counter
   * from 0 in every process did, and the second Event was lost to AlreadyExists. (Any random
   * start will do: the modulo's slight bias is of no matter.)
   */
  private sequence = crypto.getRandomValues(new Uint32Array(1))[0]! % 1_000_000;

  constructor(options: CorrelatorOptions = {}) {
    this.now = options.now ?? Date.now;
    this.spamBurst = options.spamBurst ?? 25;
    this.spamQps = options.spamQps ?? 1 / 300;
    this.aggregateMaxEvents = options.aggregateMaxEvents ?? 10;
    this.aggregateIntervalMs = options.aggregateIntervalMs ?? 600_000;
    const size = options.cacheSize ?? 4096;
    this.spam = new LruCache(size);
    this.aggregates = new LruCache(size);
    this.observed = new LruCache(size);
  }

  /** Builds a fresh Event (count 1, a new unique name) about a subject. */
  makeEvent(ref: ObjectReference, namespace: string, type: EventType, reason: string, message: string, component: string, instance: string): CoreEvent {
    const nowMs = this.now();
    const ts = formatTime(nowMs);
    return {
      apiVersion: 'v1',
      kind: 'Event',
      metadata: { name: this.uniqueName(ref.name ?? '', nowMs), namespace },
      involvedObject: ref,
      type,
      reason,
      message: message.length > MAX_EVENT_MESSAGE_LENGTH ? `${message.slice(0, MAX_EVENT_MESSAGE_LENGTH - 3)}...` : message,
      source: { component },
      reportingComponent: component,
      reportingInstance: instance,
      firstTimestamp: ts,
      lastTimestamp: ts,
      count: 1,
    };
  }

  /** What to write for this event, or undefined when the spam filter drops it. */
  correlate(event: CoreEvent): CorrelatedEvent | undefined {
    const { event: aggregated, key } = this.aggregate(event);
    const observed = this.observe(aggregated, key);
    if (!this.allow(observed.event)) return undefined;
    return observed;
  }

  /** Similar events (same object, type and reason) beyond the limit become one combined event. */
  private aggregate(event: CoreEvent): { event: CoreEvent; key: string } {
    const nowMs = this.now();
    const aggregateKey = [spamKey(event), event.reason, event.reportingComponent, event.reportingInstance].join('\u0000');
    let record = this.aggregates.get(aggregateKey);
    if (!record || nowMs - record.lastMs > this.aggregateIntervalMs) record = { messages: new Set(), lastMs: nowMs };
    record.messages.add(event.message);
    record.lastMs = nowMs;
    this.aggregates.set(aggregateKey, record);
    if (record.messages.size < this.aggregateMaxEvents) return { event, key: [aggregateKey, event.message].join('\u0000') };
    // Keep the set from growing past the limit (upstream's PopAny).
    record.messages.delete(record.messages.values().next().value as string);
    const ts = formatTime(nowMs);
    return {
      event: {
        ...event,
        metadata: { name: this.uniqueName(event.involvedObject.name ?? '', nowMs), namespace: event.metadata.namespace },
        message: AGGREGATE_PREFIX + event.message,
        firstTimestamp: ts,
        lastTimestamp: ts,
        count: 1,
      },
      key: aggregateKey,
    };
  }

  /** An event seen before under this key becomes an update of that Event: same name, count + 1. */
  private observe(event: CoreEvent, key: string): CorrelatedEvent {
    const last = this.observed.get(key);
    const result: CorrelatedEvent = last
      ? { event: { ...event, metadata: { ...event.metadata, name: last.name }, firstTimestamp: last.firstTimestamp, count: last.count + 1 }, update: true }
      : { event, update: false };
    this.observed.set(key, { count: result.event.count, firstTimestamp: result.event.firstTimestamp, name: result.event.metadata.name });
    return result;
  }

  /** A token bucket per source, object and type (client-go's EventSourceObjectSpamFilter). */
  private allow(event: CoreEvent): boolean {
    const nowMs = this.now();
    const key = spamKey(event);
    const record = this.spam.get(key) ?? { tokens: this.spamBurst, lastMs: nowMs };
    record.tokens = Math.min(this.spamBurst, record.tokens + ((nowMs - record.lastMs) / 1000) * this.spamQps);
    record.lastMs = nowMs;
    const allowed = record.tokens >= 1;
    if (allowed) record.tokens -= 1;
    this.spam.set(key, record);
    return allowed;
  }

  /** NAME.HEX(unix nanoseconds), as client-go; the low digits count on from a random start to stay unique. */
  private uniqueName(objectName: string, nowMs: number): string {
    const nanos = BigInt(Math.floor(nowMs)) * 1_000_000n + BigInt(this.sequence++ % 1_000_000);
    return `${objectName}.${nanos.toString(16)}`;
  }
}

/** Source, involved object and type: what client-go's getSpamKey joins. */
function spamKey(event: CoreEvent): string {
  const o = event.involvedObject;
  return [event.source.component, event.source.host ?? '', o.kind, o.namespace, o.name, o.uid, o.apiVersion, event.type]
    .map((part) => part ?? '')
    .join('\u0000');
}

/** metav1.Time: RFC 3339 with whole seconds. */
function formatTime(ms: number): string {
  return new Date(Math.floor(ms / 1000) * 1000).toISOString().replace('.000Z', 'Z');
}

/** The object an Event points at; cluster-scoped objects' events go to "default", as upstream. */
export function objectReference(subject: EventSubject): { ref: ObjectReference; namespace: string } {
  const m = subject.metadata ?? {};
  const ref: ObjectReference = {
    apiVersion: subject.apiVersion,
    kind: subject.kind,
    name: m.name,
    namespace: m.namespace,
    uid: m.uid,
    resourceVersion: m.resourceVersion,
  };
  return { ref, namespace: m.namespace || 'default' };
}

export interface EventBroadcasterOptions {
  transport: KubeTransport;
  logger: Logger;
  /** reportingInstance and source.host's stand-in: who in the fleet wrote the event. Defaults to the host name. */
  instance?: string;
  /**
   * Writes waiting at most (client-go's maxQueuedEvents). Beyond it, events are combined per
   * namespace, kind, type, reason and source into one Event each (written once the queue is half
   * empty again) rather than dropped as client-go does.
   */
  queueSize?: number;
  /** For edge_ccm_events_combined_total and edge_ccm_events_dropped_total. */
  registry?: Registry;
  /** Attempts for a write that failed without an answer from the API server (client-go: 12, 10s apart). */
  maxTries?: number;
  retryDelayMs?: number;
  correlator?: CorrelatorOptions;
}

/**
 * What events recorded during a leadership term pass, as the term's own writes do: none is
 * written once the term has ended (closed: dropped and counted), none while its write guard
 * refuses (tried again later), and one in flight is aborted when the term ends. Not tracked for
 * cut-off writes: an Event landing late says nothing about who owns what, and counting it would
 * keep the lease from being released.
 */
export type EventFence = Pick<RequestFence, 'closed' | 'signal' | 'refusal'>;

interface PendingWrite extends CorrelatedEvent {
  tries: number;
  /** The fence of the term that recorded it (the latest state's), if any. */
  fence?: EventFence;
}

/** Why an event was not written (edge_ccm_events_dropped_total's cause label). */
export type DropCause = 'spam-filter' | 'overflow-full' | 'write-failed' | 'rejected' | 'name-taken' | 'closed' | 'no-name' | 'term-ended';

/** Events recorded while the queue was full, waiting to be written as one. */
interface OverflowGroup {
  first: CoreEvent;
  count: number;
  /** Distinct object names, in arrival order, as many as the message shows. */
  names: string[];
  objects: Set<string>;
  lastMessage: string;
  firstMs: number;
  lastMs: number;
  /** The fence of the latest event's term. */
  fence?: EventFence;
}

/** Object names a combined Event's message lists; the rest are counted. */
const OVERFLOW_NAMES_SHOWN = 20;

/** Events are the last thing to slow a controller down: their metrics, once per registry. */
class EventMetrics {
  readonly combined: Counter<'reason'>;
  readonly dropped: Counter<'cause'>;

  private constructor(registers: Registry[]) {
    this.combined = new Counter({
      name: 'edge_ccm_events_combined_total',
      help: 'Events recorded while the event writer was behind (its queue full) and written combined with similar ones into one Event, by reason.',
      labelNames: ['reason'],
      registers,
    });
    this.dropped = new Counter({
      name: 'edge_ccm_events_dropped_total',
      help: 'Events not written, by cause: spam-filter (client-go\'s per-object filter), overflow-full (too many kinds of combined events waiting), write-failed (retries exhausted), rejected (by the API server), name-taken (another writer\'s Event has its name), closed, no-name, term-ended (recorded by a leadership term that ended before it was written).',
      labelNames: ['cause'],
      registers,
    });
  }

  private static readonly ofRegistry = perRegistry((registry) => new EventMetrics([registry]));

  /** A registry's, created on first use; without one, counters registered nowhere. */
  static for(registry?: Registry): EventMetrics {
    return registry ? EventMetrics.ofRegistry(registry) : new EventMetrics([]);
  }
}

/**
 * The events pipeline shared by every controller: hand each one a recorder(component). Writes
 * happen on one asynchronous writer, in order; while a write waits, later states of the same
 * Event replace it in the queue (one PATCH with the final count instead of many).
 */
export class EventBroadcaster {
  private readonly events: ResourceClient<CoreEvent>;
  private readonly correlator: EventCorrelator;
  private readonly log: Logger;
  private readonly instance: string;
  private readonly queueSize: number;
  private readonly maxTries: number;
  private readonly retryDelayMs: number;
  /** Keyed by namespace/name, in arrival order. */
  private readonly pending = new Map<string, PendingWrite>();
  /** Events that found the queue full, by what makes them similar; see queueSize. */
  private readonly overflow = new Map<string, OverflowGroup>();
  private readonly metrics: EventMetrics;
  private readonly stopping = new AbortController();
  private draining?: Promise<void>;
  private closed = false;

  constructor(options: EventBroadcasterOptions) {
    this.events = new ResourceClient<CoreEvent>(options.transport, EVENTS);
    this.correlator = new EventCorrelator(options.correlator);
    this.log = options.logger.with({ component: 'events' });
    this.instance = options.instance ?? hostname();
    this.queueSize = options.queueSize ?? 1000;
    this.maxTries = options.maxTries ?? 12;
    this.retryDelayMs = options.retryDelayMs ?? 10_000;
    this.metrics = EventMetrics.for(options.registry);
  }

  /**
   * A recorder whose events name this component as their source (e.g. "cloud-node-controller");
   * with a term's fence, its events pass that fence (see EventFence).
   */
  recorder(component: string, fence?: EventFence): EventRecorder {
    return { event: (subject, type, reason, message) => this.record(component, subject, type, reason, message, fence) };
  }

  /** Resolves once every event recorded so far has been written (or given up on). */
  async flush(): Promise<void> {
    while (this.draining) await this.draining;
  }

  /** Stops taking events, writes what is queued for up to timeoutMs, then drops the rest. */
  async close(timeoutMs = 5_000): Promise<void> {
    this.closed = true;
    const timer = setTimeout(() => this.stopping.abort(new Error('event broadcaster closed')), timeoutMs);
    try {
      await this.flush();
    } finally {
      clearTimeout(timer);
      this.stopping.abort(new Error('event broadcaster closed'));
      const unwritten = this.pending.size + [...this.overflow.values()].reduce((n, g) => n + g.count, 0);
      if (unwritten > 0) this.metrics.dropped.inc({ cause: 'closed' }, unwritten);
      this.pending.clear();
      this.overflow.clear();
    }
  }

  private record(component: string, subject: EventSubject, type: EventType, reason: string, message: string, fence?: EventFence): void {
    const what = { kind: subject.kind, name: subject.metadata?.name, reason };
    if (this.closed) {
      this.log.debug(4, 'event dropped: recorder closed', what);
      this.metrics.dropped.inc({ cause: 'closed' });
      return;
    }
    if (fence?.closed) {
      this.log.debug(4, 'event dropped: its leadership term has ended', what);
      this.metrics.dropped.inc({ cause: 'term-ended' });
      return;
    }
    const { ref, namespace } = objectReference(subject);
    if (!ref.name) {
      this.log.warn('event dropped: its object has no name', what);
      this.metrics.dropped.inc({ cause: 'no-name' });
      return;
    }
    const correlated = this.correlator.correlate(this.correlator.makeEvent(ref, namespace, type, reason, message, component, this.instance));
    if (!correlated) {
      this.log.debug(4, 'event dropped by the spam filter', what);
      this.metrics.dropped.inc({ cause: 'spam-filter' });
      return;
    }
    const key = `${namespace}/${correlated.event.metadata.name}`;
    const queued = this.pending.get(key);
    if (queued) {
      // Not written yet: write the newer state instead (a create stays a create), under its term.
      queued.event = correlated.event;
      queued.fence = fence;
    } else if (this.pending.size >= this.queueSize) {
      this.combine(correlated.event, what, fence);
    } else {
      this.pending.set(key, { ...correlated, tries: 0, fence });
    }
    this.draining ??= this.drain().finally(() => {
      this.draining = undefined;
    });
  }

  /**
   * The queue is full: the event joins the waiting combined Event of its namespace, kind, type,
   * reason and source (one per such key, however many objects), so that it is written as part of
   * a count rather than lost. Only when there are as many keys waiting as the queue is long is an
   * event dropped (and counted).
   */
  private combine(event: CoreEvent, what: LogFields, fence: EventFence | undefined): void {
    const o = event.involvedObject;
    const key = [event.metadata.namespace, o.apiVersion, o.kind, event.type, event.reason, event.source.component].join('\u0000');
    const nowMs = Date.now();
    let group = this.overflow.get(key);
    if (!group) {
      if (this.overflow.size >= this.queueSize) {
        this.log.debug(2, 'event dropped: queue and combined events full', what);
        this.metrics.dropped.inc({ cause: 'overflow-full' });
        return;
      }
      group = { first: event, count: 0, names: [], objects: new Set(), lastMessage: event.message, firstMs: nowMs, lastMs: nowMs };
      this.overflow.set(key, group);
    }
    group.count++;
    group.fence = fence;
    group.lastMessage = event.message;
    group.lastMs = nowMs;
    const name = o.name ?? '';
    if (!group.objects.has(name)) {
      group.objects.add(name);
      if (group.names.length < OVERFLOW_NAMES_SHOWN) group.names.push(name);
    }
    this.metrics.combined.inc({ reason: event.reason });
  }

  /** Moves the combined Events into the queue once it is at most half full (or empty, at the end). */
  private releaseOverflow(): void {
    if (this.overflow.size === 0 || this.pending.size > this.queueSize / 2) return;
    for (const group of this.overflow.values()) {
      const event = combinedEvent(group);
      this.pending.set(`${event.metadata.namespace}/${event.metadata.name}`, { event, update: false, tries: 0, fence: group.fence });
    }
    this.overflow.clear();
  }

  private async drain(): Promise<void> {
    await Promise.resolve(); // never write from inside the controller's event() call
    while (!this.stopping.signal.aborted) {
      this.releaseOverflow();
      const next = this.pending.entries().next();
      if (next.done) return;
      const [key, write] = next.value;
      this.pending.delete(key);
      if (await this.write(write)) continue;
      if (write.tries >= this.maxTries) {
        this.log.error('event dropped after repeated failures to write it', { reason: write.event.reason, event: key, tries: write.tries });
        this.metrics.dropped.inc({ cause: 'write-failed' }, write.event.count);
        continue;
      }
      // Put it back unless a newer state of the same Event is already waiting.
      if (!this.pending.has(key)) this.pending.set(key, write);
      try {
        await sleep(this.retryDelayMs, this.stopping.signal);
      } catch {
        return;
      }
    }
  }

  /** One attempt; true when done with this write (written, rejected for good, or its term ended). */
  private async write(write: PendingWrite): Promise<boolean> {
    const { event, fence } = write;
    if (fence?.closed) return this.dropTermEnded(write);
    write.tries++;
    // The term's write guard refuses (its lease not renewed in time): not now, maybe after the retry delay.
    if (fence?.refusal() !== undefined) return false;
    const signal = fence ? AbortSignal.any([this.stopping.signal, fence.signal]) : this.stopping.signal;
    const opts = { namespace: event.metadata.namespace, signal };
    try {
      if (write.update) {
        try {
          // A strategic merge patch of only what changes, as client-go: no read, no resourceVersion.
          await this.events.patch(event.metadata.name, 'strategic', { count: event.count, lastTimestamp: event.lastTimestamp, message: event.message }, opts);
          return true;
        } catch (e) {
          // Expired (event TTL) or deleted: write it again, whole.
          if (!isNotFound(e)) throw e;
        }
      }
      await this.events.create(event, opts);
      return true;
    } catch (e) {
      if (this.stopping.signal.aborted) return true;
      if (fence?.closed) return this.dropTermEnded(write);
      if (!(e instanceof KubeApiError)) {
        this.log.debug(2, 'failed to write event, will retry', { reason: event.reason, error: errorMessage(e) });
        return false;
      }
      // An answer from the API server: retrying the same request would get the same answer.
      if (isAlreadyExists(e) && write.tries > 1) this.log.debug(5, 'event already exists (an earlier try was written)', { event: event.metadata.name });
      else if (isAlreadyExists(e)) {
        // Never sent before, so not ours: another writer's Event has the name, and this one is lost.
        this.log.warn('event not written: another Event has its name', { reason: event.reason, object: event.involvedObject.name, event: event.metadata.name });
        this.metrics.dropped.inc({ cause: 'name-taken' });
      } else {
        this.log.error('server rejected event (will not retry)', { reason: event.reason, object: event.involvedObject.name, error: errorMessage(e) });
        this.metrics.dropped.inc({ cause: 'rejected' });
      }
      return true;
    }
  }

  /** A write whose term ended before it was written: dropped and counted, never sent. */
  private dropTermEnded(write: PendingWrite): true {
    this.log.debug(2, 'event dropped: its leadership term ended before it was written', { reason: write.event.reason, object: write.event.involvedObject.name });
    this.metrics.dropped.inc({ cause: 'term-ended' });
    return true;
  }
}

/**
 * One Event for every event of a combined group: about the group's first object, with the count
 * of them all and the objects named (the first few, then how many more).
 */
function combinedEvent(group: OverflowGroup): CoreEvent {
  const first = group.first;
  const kind = first.involvedObject.kind ?? 'object';
  const more = group.objects.size - group.names.length;
  const objects = `${group.names.join(', ')}${more > 0 ? ` and ${more} more` : ''}`;
  const what = group.count === 1 ? `1 ${first.reason} event` : `${group.count} ${first.reason} events`;
  const message = `${AGGREGATE_PREFIX}${what} on ${group.objects.size} ${kind} object(s) while the event writer was behind: ${objects}. Last message: ${group.lastMessage}`;
  return {
    ...first,
    metadata: { namespace: first.metadata.namespace, name: `${first.involvedObject.name ?? ''}.combined.${Math.floor(group.firstMs * 1000).toString(16)}${(++combinedSequence).toString(16)}` },
    message: message.length > MAX_EVENT_MESSAGE_LENGTH ? `${message.slice(0, MAX_EVENT_MESSAGE_LENGTH - 3)}...` : message,
    firstTimestamp: formatTime(group.firstMs),
    lastTimestamp: formatTime(group.lastMs),
    count: group.count,
  };
}

let combinedSequence = 0;
