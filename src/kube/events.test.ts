import { describe, expect, test } from 'bun:test';
import { KubeApiError } from './errors.ts';
import { AGGREGATE_PREFIX, type CoreEvent, EventBroadcaster, EventCorrelator, objectReference } from './events.ts';
import type { EventType } from './event-recorder.ts';
import type { KubeRequest, KubeTransport, WatchEvent } from './transport.ts';
import { createLogger, silentLogger } from '../log.ts';
import { Registry } from 'prom-client';
import { eventually } from '../../test/harness/eventually.ts';

async function metricValue(registry: Registry, name: string, labels: Record<string, string> = {}): Promise<number | undefined> {
  const values = (await registry.getSingleMetric(name)?.get())?.values ?? [];
  return values.find((v) => Object.entries(labels).every(([k, val]) => v.labels[k] === val))?.value;
}

const node = { apiVersion: 'v1', kind: 'Node', metadata: { name: 'node-1', uid: 'uid-n1', resourceVersion: '7' } };
const service = { apiVersion: 'v1', kind: 'Service', metadata: { name: 'web', namespace: 'shop', uid: 'uid-s1' } };

class ManualTime {
  ms = Date.UTC(2026, 0, 2, 3, 4, 5, 600);
  now = () => this.ms;
}

function correlatorAt(time = new ManualTime()) {
  const correlator = new EventCorrelator({ now: time.now });
  const record = (subject: typeof node | typeof service, reason: string, message: string, type: EventType = 'Normal', component = 'cloud-node-controller') => {
    const { ref, namespace } = objectReference(subject);
    return correlator.correlate(correlator.makeEvent(ref, namespace, type, reason, message, component, 'host-a'));
  };
  return { correlator, record, time };
}

describe('EventCorrelator', () => {
  test('a new event: unique name, involved object, source and reporting fields, count 1', () => {
    const { record } = correlatorAt();
    const first = record(node, 'Synced', 'Node synced successfully')!;
    expect(first.update).toBe(false);
    expect(first.event).toEqual({
      apiVersion: 'v1',
      kind: 'Event',
      metadata: { name: first.event.metadata.name, namespace: 'default' },
      involvedObject: { apiVersion: 'v1', kind: 'Node', name: 'node-1', namespace: undefined, uid: 'uid-n1', resourceVersion: '7' },
      type: 'Normal',
      reason: 'Synced',
      message: 'Node synced successfully',
      source: { component: 'cloud-node-controller' },
      reportingComponent: 'cloud-node-controller',
      reportingInstance: 'host-a',
      firstTimestamp: '2026-01-02T03:04:05Z',
      lastTimestamp: '2026-01-02T03:04:05Z',
      count: 1,
    });
    expect(first.event.metadata.name).toMatch(/^node-1\.[0-9a-f]+$/);
    // Events about namespaced objects live in the object's namespace.
    expect(record(service, 'EnsuringLoadBalancer', 'Ensuring load balancer')!.event.metadata.namespace).toBe('shop');
  });

  test('identical events become updates of the first: same name, count + 1, first timestamp kept', () => {
    const { record, time } = correlatorAt();
    const first = record(node, 'Synced', 'ok')!;
    time.ms += 61_000;
    const second = record(node, 'Synced', 'ok')!;
    expect(second.update).toBe(true);
    expect(second.event.metadata.name).toBe(first.event.metadata.name);
    expect(second.event.count).toBe(2);
    expect(second.event.firstTimestamp).toBe('2026-01-02T03:04:05Z');
    expect(second.event.lastTimestamp).toBe('2026-01-02T03:05:06Z');
    // Another message, type, component or object is another Event.
    expect(record(node, 'Synced', 'other')!.update).toBe(false);
    expect(record(node, 'Synced', 'ok', 'Warning')!.update).toBe(false);
    expect(record(node, 'Synced', 'ok', 'Normal', 'cloud-node-lifecycle-controller')!.update).toBe(false);
    expect(record(service, 'Synced', 'ok')!.update).toBe(false);
  });

  test('the spam filter passes a burst of 25 per object and type, then 1 per 5 minutes; dropped events still count', () => {
    const { record, time } = correlatorAt();
    const results = Array.from({ length: 30 }, () => record(node, 'SyncLoadBalancerFailed', 'boom', 'Warning'));
    expect(results.filter((r) => r !== undefined)).toHaveLength(25);
    expect(results.slice(0, 25).map((r) => r!.event.count)).toEqual(Array.from({ length: 25 }, (_, i) => i + 1));
    expect(results.slice(25).every((r) => r === undefined)).toBe(true);

    // Other reasons about the same object and type share the allowance.
    expect(record(node, 'OtherReason', 'x', 'Warning')).toBeUndefined();
    // Another type, or another object, has its own.
    expect(record(node, 'Synced', 'ok', 'Normal')).toBeDefined();
    expect(record(service, 'SyncLoadBalancerFailed', 'boom', 'Warning')).toBeDefined();

    time.ms += 299_000;
    expect(record(node, 'SyncLoadBalancerFailed', 'boom', 'Warning')).toBeUndefined();
    time.ms += 1_000;
    const refilled = record(node, 'SyncLoadBalancerFailed', 'boom', 'Warning')!;
    expect(refilled.update).toBe(true);
    expect(refilled.event.count).toBe(32); // 30 + the one 299s later + this one
  });

  test('from the 10th distinct message of one object and reason within 10 minutes, messages are combined', () => {
    const { record } = correlatorAt();
    const separate = Array.from({ length: 9 }, (_, i) => record(service, 'SyncLoadBalancerFailed', `error ${i}`, 'Warning')!);
    expect(new Set(separate.map((r) => r.event.metadata.name)).size).toBe(9);
    expect(separate.every((r) => !r.update && r.event.count === 1)).toBe(true);

    const tenth = record(service, 'SyncLoadBalancerFailed', 'error 9', 'Warning')!;
    expect(tenth.update).toBe(false);
    expect(tenth.event.message).toBe(`${AGGREGATE_PREFIX}error 9`);
    expect(tenth.event.count).toBe(1);
    expect(separate.map((r) => r.event.metadata.name)).not.toContain(tenth.event.metadata.name);

    const eleventh = record(service, 'SyncLoadBalancerFailed', 'error 10', 'Warning')!;
    expect(eleventh.update).toBe(true);
    expect(eleventh.event.metadata.name).toBe(tenth.event.metadata.name);
    expect(eleventh.event.count).toBe(2);
    expect(eleventh.event.message).toBe(`${AGGREGATE_PREFIX}error 10`);

    // Even a message seen before is combined once over the limit.
    const repeat = record(service, 'SyncLoadBalancerFailed', 'error 0', 'Warning')!;
    expect(repeat.event.metadata.name).toBe(tenth.event.metadata.name);
    expect(repeat.event.count).toBe(3);
  });

  test('distinct messages spread over more than 10 minutes are not combined', () => {
    const { record, time } = correlatorAt();
    for (let i = 0; i < 15; i++) {
      const r = record(service, 'SyncLoadBalancerFailed', `error ${i}`, 'Warning')!;
      expect(r.event.message).toBe(`error ${i}`);
      time.ms += 601_000;
    }
  });

  test('long messages are cut to 1024 characters', () => {
    const { record } = correlatorAt();
    const msg = record(node, 'X', 'y'.repeat(5000))!.event.message;
    expect(msg).toHaveLength(1024);
    expect(msg.endsWith('...')).toBe(true);
  });
});

/** Events in memory: POST creates (409 when the name exists), a strategic PATCH merges fields (404 when missing). */
class FakeEventsApi implements KubeTransport {
  readonly server = 'https://fake.invalid';
  readonly stored = new Map<string, CoreEvent>();
  readonly requests: { method: string; path: string; contentType?: string; body: unknown }[] = [];
  /** Fails the next N requests without an answer. */
  dropNext = 0;
  /** Answers every request with this status. */
  rejectWith?: number;
  /** Never answers (until the request's signal aborts). */
  hang = false;
  /** Stores the next N POSTs but fails them without an answer (the answer lost on the way back). */
  loseAnswerNext = 0;

  async request<T>(req: KubeRequest): Promise<T> {
    this.requests.push({ method: req.method, path: req.path, contentType: req.contentType, body: req.body });
    if (this.hang) {
      await new Promise((_, reject) => req.signal?.addEventListener('abort', () => reject(req.signal!.reason)));
    }
    if (this.dropNext > 0) {
      this.dropNext--;
      throw new TypeError('socket hang up');
    }
    const fail = (status: number, reason: string) => new KubeApiError(status, reason, reason, req.method, req.path);
    if (this.rejectWith) throw fail(this.rejectWith, 'Forbidden');
    const m = /^\/api\/v1\/namespaces\/([^/]+)\/events(?:\/([^/]+))?$/.exec(req.path);
    if (!m) throw new Error(`unexpected path ${req.path}`);
    if (req.method === 'POST') {
      const event = structuredClone(req.body as CoreEvent);
      const key = `${m[1]}/${event.metadata.name}`;
      if (this.stored.has(key)) throw fail(409, 'AlreadyExists');
      this.stored.set(key, event);
      if (this.loseAnswerNext > 0) {
        this.loseAnswerNext--;
        throw new TypeError('socket hang up');
      }
      return structuredClone(event) as T;
    }
    if (req.method === 'PATCH') {
      const key = `${m[1]}/${m[2]}`;
      const current = this.stored.get(key);
      if (!current) throw fail(404, 'NotFound');
      Object.assign(current, req.body);
      return structuredClone(current) as T;
    }
    throw new Error(`unexpected ${req.method}`);
  }

  async *watch<T>(): AsyncGenerator<WatchEvent<T>> {
    throw new Error('not used');
  }

  events(): CoreEvent[] {
    return [...this.stored.values()];
  }
}

function broadcaster(api: KubeTransport, extra: Partial<ConstructorParameters<typeof EventBroadcaster>[0]> = {}) {
  return new EventBroadcaster({ transport: api, logger: silentLogger, instance: 'host-a', retryDelayMs: 5, ...extra });
}

describe('EventBroadcaster', () => {
  test('event() returns before anything is written; flush() writes it', async () => {
    const api = new FakeEventsApi();
    const b = broadcaster(api);
    b.recorder('cloud-node-controller').event(node, 'Normal', 'Synced', 'Node synced successfully');
    expect(api.requests).toHaveLength(0);
    await b.flush();
    expect(api.requests.map((r) => `${r.method} ${r.path}`)).toEqual(['POST /api/v1/namespaces/default/events']);
    const [event] = api.events();
    expect(event).toMatchObject({
      involvedObject: { kind: 'Node', name: 'node-1', uid: 'uid-n1' },
      reason: 'Synced',
      source: { component: 'cloud-node-controller' },
      reportingComponent: 'cloud-node-controller',
      reportingInstance: 'host-a',
      count: 1,
    });
  });

  test('a repeat of a written event is a strategic merge PATCH of count, lastTimestamp and message', async () => {
    const api = new FakeEventsApi();
    const b = broadcaster(api);
    const rec = b.recorder('service-controller');
    rec.event(service, 'Warning', 'SyncLoadBalancerFailed', 'boom');
    await b.flush();
    rec.event(service, 'Warning', 'SyncLoadBalancerFailed', 'boom');
    await b.flush();
    const patch = api.requests[1]!;
    expect(patch.method).toBe('PATCH');
    expect(patch.contentType).toBe('application/strategic-merge-patch+json');
    expect(Object.keys(patch.body as object).sort()).toEqual(['count', 'lastTimestamp', 'message']);
    expect(api.events()).toHaveLength(1);
    expect(api.events()[0]!.count).toBe(2);
  });

  test('100 identical events recorded at once: one POST of one Event with count 25 (the spam filter burst)', async () => {
    const api = new FakeEventsApi();
    const b = broadcaster(api);
    const rec = b.recorder('service-controller');
    for (let i = 0; i < 100; i++) rec.event(service, 'Warning', 'SyncLoadBalancerFailed', 'boom');
    await b.flush();
    expect(api.requests.map((r) => r.method)).toEqual(['POST']);
    expect(api.events().map((e) => e.count)).toEqual([25]);
  });

  test('a PATCH of an Event that expired creates it again, whole', async () => {
    const api = new FakeEventsApi();
    const b = broadcaster(api);
    const rec = b.recorder('service-controller');
    rec.event(service, 'Normal', 'EnsuredLoadBalancer', 'ok');
    await b.flush();
    api.stored.clear();
    rec.event(service, 'Normal', 'EnsuredLoadBalancer', 'ok');
    await b.flush();
    expect(api.requests.map((r) => r.method)).toEqual(['POST', 'PATCH', 'POST']);
    expect(api.events()).toMatchObject([{ reason: 'EnsuredLoadBalancer', count: 2 }]);
  });

  test('failures without an answer are retried; rejections are logged, never thrown, never retried', async () => {
    const api = new FakeEventsApi();
    const lines: string[] = [];
    const b = broadcaster(api, { logger: createLogger({ write: (l) => lines.push(l) }) });
    const rec = b.recorder('service-controller');
    api.dropNext = 2;
    rec.event(service, 'Normal', 'A', 'a');
    await b.flush();
    expect(api.requests.map((r) => r.method)).toEqual(['POST', 'POST', 'POST']);
    expect(api.events()).toHaveLength(1);

    api.rejectWith = 403;
    expect(() => rec.event(service, 'Normal', 'B', 'b')).not.toThrow();
    await b.flush();
    expect(api.requests).toHaveLength(4);
    expect(lines.some((l) => l.includes('server rejected event'))).toBe(true);

    api.rejectWith = undefined;
    rec.event(service, 'Normal', 'C', 'c');
    await b.flush();
    expect(api.events().map((e) => e.reason)).toEqual(['A', 'C']);
  });

  test('a write failing on every try is given up after maxTries', async () => {
    const api = new FakeEventsApi();
    const b = broadcaster(api, { maxTries: 3 });
    api.dropNext = 100;
    b.recorder('x').event(node, 'Normal', 'A', 'a');
    await b.flush();
    expect(api.requests).toHaveLength(3);
    expect(api.events()).toHaveLength(0);
  });

  test('writers in several processes (the speakers of two nodes) recording about one object in the same millisecond: each Event is written', async () => {
    const api = new FakeEventsApi();
    const time = new ManualTime();
    // Each its own broadcaster, as each speaker process has; one clock reading for both.
    const writers = ['node-a', 'node-b'].map((instance) => broadcaster(api, { instance, correlator: { now: time.now } }));
    writers[0]!.recorder('edge-ccm-speaker').event(service, 'Normal', 'L2Announcing', 'node node-a announces 198.51.100.200 on eth0');
    writers[1]!.recorder('edge-ccm-speaker').event(service, 'Normal', 'L2Announcing', 'node node-b announces 2001:db8:1::200 on eth0');
    for (const w of writers) await w.flush();
    expect(api.events().map((e) => e.message).sort()).toEqual(['node node-a announces 198.51.100.200 on eth0', 'node node-b announces 2001:db8:1::200 on eth0']);
  });

  test("a create answered AlreadyExists on its first try (another writer's Event has the name) is a logged, counted loss; on a retry it is the earlier try's Event", async () => {
    const api = new FakeEventsApi();
    const registry = new Registry();
    const lines: string[] = [];
    const b = broadcaster(api, { registry, logger: createLogger({ write: (l) => lines.push(l) }) });
    const rec = b.recorder('x');
    // The answer to the first try is lost, but the Event was stored: the retry's 409 means done.
    api.loseAnswerNext = 1;
    rec.event(node, 'Normal', 'A', 'a');
    await b.flush();
    expect(api.requests.map((r) => r.method)).toEqual(['POST', 'POST']);
    expect(lines.filter((l) => l.includes('another Event'))).toEqual([]);
    // Another writer's Event under the name this one gets: the first try's 409 loses it.
    const taken = structuredClone(api.events()[0]!);
    const realRequest = api.request.bind(api);
    api.request = async <T>(req: KubeRequest): Promise<T> => {
      if (req.method === 'POST') api.stored.set(`default/${(req.body as CoreEvent).metadata.name}`, taken);
      return realRequest<T>(req);
    };
    rec.event(node, 'Normal', 'B', 'b');
    await b.flush();
    expect(lines.filter((l) => l.includes('another Event'))).toHaveLength(1);
    expect(await metricValue(registry, 'edge_ccm_events_dropped_total', { cause: 'name-taken' })).toBe(1);
  });

  test('beyond the queue size, similar events are combined into one Event carrying their count, not dropped', async () => {
    const api = new FakeEventsApi();
    const registry = new Registry();
    const b = broadcaster(api, { queueSize: 2, registry });
    const rec = b.recorder('cloud-node-controller');
    const names = Array.from({ length: 30 }, (_, i) => `n${i + 1}`);
    for (const name of names) rec.event({ kind: 'Node', metadata: { name } }, 'Normal', 'Synced', 'Node synced successfully');
    await b.flush();
    const events = api.events();
    expect(events.map((e) => e.involvedObject.name)).toEqual(['n1', 'n2', 'n3']);
    const combined = events[2]!;
    expect(combined.count).toBe(28);
    expect(combined.reason).toBe('Synced');
    expect(combined.message.startsWith(AGGREGATE_PREFIX)).toBe(true);
    expect(combined.message).toContain('28 Synced events on 28 Node object(s)');
    expect(combined.message).toContain('n3, n4');
    expect(combined.message).toContain('n22 and 8 more');
    expect(combined.message).toContain('Last message: Node synced successfully');
    // Every recorded event is in a count: written alone or combined.
    expect(events.reduce((n, e) => n + e.count, 0)).toBe(30);
    expect(await metricValue(registry, 'edge_ccm_events_combined_total', { reason: 'Synced' })).toBe(28);
    expect(await metricValue(registry, 'edge_ccm_events_dropped_total')).toBeUndefined();
  });

  test('combined Events are kept per namespace, kind, type, reason and source; past that many kinds the rest is dropped and counted', async () => {
    const api = new FakeEventsApi();
    const registry = new Registry();
    const b = broadcaster(api, { queueSize: 2, registry });
    const rec = b.recorder('x');
    const ev = (name: string, reason: string) => rec.event({ kind: 'Node', metadata: { name } }, 'Normal', reason, reason);
    ev('a', 'A'); ev('b', 'A'); // the queue
    ev('c', 'A'); ev('d', 'B'); ev('e', 'A'); // two combined Events
    ev('f', 'C'); ev('g', 'C'); // a third kind: no room
    await b.flush();
    const combined = api.events().filter((e) => e.message.startsWith(AGGREGATE_PREFIX));
    expect(combined.map((e) => [e.reason, e.count])).toEqual([['A', 2], ['B', 1]]);
    expect(await metricValue(registry, 'edge_ccm_events_dropped_total', { cause: 'overflow-full' })).toBe(2);
  });

  test('what the spam filter drops is counted', async () => {
    const api = new FakeEventsApi();
    const registry = new Registry();
    const b = broadcaster(api, { registry });
    for (let i = 0; i < 100; i++) b.recorder('service-controller').event(service, 'Warning', 'SyncLoadBalancerFailed', 'boom');
    await b.flush();
    expect(await metricValue(registry, 'edge_ccm_events_dropped_total', { cause: 'spam-filter' })).toBe(75);
  });

  test('events about objects without a name are dropped', async () => {
    const api = new FakeEventsApi();
    const b = broadcaster(api);
    b.recorder('x').event({ kind: 'Node', metadata: {} }, 'Normal', 'A', 'a');
    await b.flush();
    expect(api.requests).toHaveLength(0);
  });

  test('close() gives up on a server that does not answer after its timeout, and drops later events', async () => {
    const api = new FakeEventsApi();
    api.hang = true;
    const b = broadcaster(api);
    const rec = b.recorder('x');
    rec.event(node, 'Normal', 'A', 'a');
    rec.event(service, 'Normal', 'B', 'b');
    await eventually('the first write sent (it hangs)', () => api.requests.length === 1, 10_000, 1);
    await b.close(50);
    expect(api.requests).toHaveLength(1);
    api.hang = false;
    rec.event(node, 'Normal', 'C', 'c');
    await b.flush();
    expect(api.requests).toHaveLength(1);
  });
});
