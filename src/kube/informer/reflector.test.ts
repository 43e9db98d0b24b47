import { expect, test } from 'bun:test';
import type { V1ConfigMap } from '@kubernetes/client-node';
import { KubeApiError } from '../errors.ts';
import { Backoff } from '../../util/backoff.ts';
import { Informer, stripManagedFields } from './informer.ts';
import { Reflector, type ReflectorOptions } from './reflector.ts';
import { Store, type StoreChange } from './store.ts';
import { CONFIGMAPS, type ListResult } from '../resources.ts';
import type { KubeRequest, KubeTransport, QueryValue, WatchEvent } from '../transport.ts';
import { eventually } from '../../../test/harness/eventually.ts';

/**
 * Error paths only, against a scripted transport: what the reflector does after each failure
 * (relist, resume from which resourceVersion, how long to wait). The happy path runs against a
 * real kube-apiserver in test/integration/informer.test.ts.
 */

type ListStep = ListResult<V1ConfigMap> | Error;
/** A watch yields its events, then ends normally or throws `end`; `refuse` throws before any event. */
type WatchStep = { refuse: Error } | { events: WatchEvent[]; end?: Error };

/** Plays the script; once the watches run out it calls `finished` and holds the last watch open. */
class ScriptedTransport implements KubeTransport {
  readonly server = 'https://scripted.invalid';
  readonly listQueries: Record<string, QueryValue>[] = [];
  readonly watchQueries: Record<string, QueryValue>[] = [];

  constructor(
    private readonly lists: ListStep[],
    private readonly watches: WatchStep[],
    private readonly finished: () => void,
  ) {}

  async request<T>(req: KubeRequest): Promise<T> {
    this.listQueries.push(req.query ?? {});
    const step = this.lists.shift();
    if (!step) throw new Error(`unscripted list #${this.listQueries.length}`);
    if (step instanceof Error) throw step;
    return structuredClone(step) as T;
  }

  async *watch<T>(_path: string, query: Record<string, QueryValue>, signal: AbortSignal): AsyncGenerator<WatchEvent<T>> {
    this.watchQueries.push(query);
    const step = this.watches.shift();
    if (!step) {
      this.finished();
      if (!signal.aborted) await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
      return;
    }
    if ('refuse' in step) throw step.refuse;
    for (const event of step.events) yield structuredClone(event) as WatchEvent<T>;
    if (step.end) throw step.end;
  }
}

const cm = (name: string, rv: string): V1ConfigMap => ({ metadata: { name, namespace: 'ns', resourceVersion: rv } });
const list = (rv: string, items: V1ConfigMap[], cont?: string): ListResult<V1ConfigMap> => ({
  kind: 'ConfigMapList',
  apiVersion: 'v1',
  metadata: { resourceVersion: rv, continue: cont },
  items,
});
const gone = () => new KubeApiError(410, 'Expired', 'too old resource version', 'GET', '/api/v1/configmaps');
const goneEvent = (): WatchEvent => ({ type: 'ERROR', object: { kind: 'Status', code: 410, reason: 'Expired', message: 'too old resource version: 5 (20)' } });

/** A ConfigMap reflector in namespace ns over the transport, with a backoff whose delays are exact (no jitter). */
function configMapReflector(transport: KubeTransport, extra: Partial<ReflectorOptions<V1ConfigMap>>): Reflector<V1ConfigMap> {
  return new Reflector<V1ConfigMap>({
    transport,
    type: CONFIGMAPS,
    namespace: 'ns',
    store: new Store<V1ConfigMap>(),
    onChange: () => {},
    backoff: new Backoff({ random: () => 0, now: () => 0 }),
    ...extra,
  });
}

/** Runs a reflector through the script with a backoff whose delays are exact and not waited. */
async function runReflector(lists: ListStep[], watches: WatchStep[]) {
  const abort = new AbortController();
  const transport = new ScriptedTransport(lists, watches, () => abort.abort());
  const store = new Store<V1ConfigMap>();
  const changes: StoreChange<V1ConfigMap>[] = [];
  const delays: number[] = [];
  const reflector = configMapReflector(transport, { store, onChange: (c) => changes.push(c), sleep: async (ms) => void delays.push(ms) });
  await reflector.run(abort.signal);
  return { transport, store, changes, delays, reflector };
}

test('lists page by page, then watches from the list resourceVersion with bookmarks and a 5-10 minute timeout', async () => {
  const { transport, store, reflector } = await runReflector(
    [list('10', [cm('a', '3')], 'page-2'), list('10', [cm('b', '4')])],
    [],
  );
  expect(transport.listQueries.map((q) => [q.limit, q.continue])).toEqual([[500, undefined], [500, 'page-2']]);
  expect(store.keys().sort()).toEqual(['ns/a', 'ns/b']);
  expect(store.get('ns/a')).toMatchObject({ kind: 'ConfigMap', apiVersion: 'v1' });
  const [watch] = transport.watchQueries;
  expect(watch).toMatchObject({ resourceVersion: '10', allowWatchBookmarks: true });
  expect(watch!.timeoutSeconds as number).toBeGreaterThanOrEqual(300);
  expect(watch!.timeoutSeconds as number).toBeLessThan(600);
  expect(reflector.hasSynced()).toBe(true);
});

test('a dropped or closed watch resumes from the last resourceVersion seen, bookmarks included, without listing again', async () => {
  const { transport, changes, delays } = await runReflector(
    [list('10', [])],
    [
      { events: [{ type: 'ADDED', object: cm('a', '11') }, { type: 'BOOKMARK', object: { metadata: { resourceVersion: '15' } } }], end: new TypeError('socket closed') },
      { events: [{ type: 'MODIFIED', object: cm('a', '16') }] }, // closed by the server's timeout
      { refuse: new TypeError('connection refused') },
      { events: [{ type: 'DELETED', object: cm('a', '17') }] },
    ],
  );
  expect(transport.listQueries).toHaveLength(1);
  expect(transport.watchQueries.map((q) => q.resourceVersion)).toEqual(['10', '15', '16', '16', '17']);
  expect(delays).toEqual([800, 1600]); // the errors wait; the normal close does not
  expect(changes.map((c) => `${c.type} ${c.obj.metadata?.resourceVersion}`)).toEqual(['add 11', 'update 16', 'delete 17']);
});

test('410 from the watch request or as an ERROR event relists at once; other errors back off and resume', async () => {
  const { transport, delays } = await runReflector(
    [list('10', []), list('20', []), list('30', [])],
    [
      { events: [{ type: 'ADDED', object: cm('a', '11') }] },
      { refuse: gone() },
      { events: [{ type: 'ADDED', object: cm('b', '21') }, goneEvent()] },
      { events: [{ type: 'ERROR', object: { kind: 'Status', code: 500, reason: 'InternalError', message: 'etcd hiccup' } }] },
      { refuse: new KubeApiError(503, 'ServiceUnavailable', 'starting', 'GET', '/api/v1/configmaps') },
    ],
  );
  expect(transport.listQueries).toHaveLength(3);
  expect(transport.watchQueries.map((q) => q.resourceVersion)).toEqual(['10', '11', '20', '30', '30', '30']);
  expect(delays).toEqual([800, 1600]);
});

test('list failures back off exponentially and the list is retried; a watch refused with 410 right after a list backs off too', async () => {
  const { transport, delays } = await runReflector(
    [new TypeError('connection refused'), new KubeApiError(500, 'InternalError', 'x', 'GET', '/'), gone(), list('10', []), list('11', [])],
    [{ refuse: gone() }],
  );
  // gone() on the list (an expired continue token) relists at once; the watch's 410 straight
  // after a fresh list is a misbehaving server, so it waits.
  expect(delays).toEqual([800, 1600, 3200]);
  expect(transport.listQueries).toHaveLength(5);
  expect(transport.watchQueries.map((q) => q.resourceVersion)).toEqual(['10', '11']);
});

test('a watch that ends at once without events counts as a failure', async () => {
  const { delays, transport } = await runReflector([list('10', [])], [{ events: [] }]);
  expect(delays).toEqual([800]);
  expect(transport.watchQueries.map((q) => q.resourceVersion)).toEqual(['10', '10']);
});

test('a relist after 410 tells handlers the difference: deletes missed while away, real updates, no same-version updates', async () => {
  const abort = new AbortController();
  const transport = new ScriptedTransport(
    [list('10', [cm('kept', '1'), cm('changed', '2'), cm('gone', '3')]), list('20', [cm('kept', '1'), cm('changed', '12'), cm('new', '14')])],
    [{ events: [{ type: 'BOOKMARK', object: { metadata: { resourceVersion: '15' } } }] }, { refuse: gone() }],
    () => abort.abort(),
  );
  const informer = new Informer<V1ConfigMap>({ transport, type: CONFIGMAPS, namespace: 'ns' });
  const seen: string[] = [];
  informer.addHandlers({
    onAdd: (o) => seen.push(`add ${o.metadata?.name}`),
    onUpdate: (old, o) => seen.push(`update ${o.metadata?.name} ${old.metadata?.resourceVersion}->${o.metadata?.resourceVersion}`),
    onDelete: (o) => seen.push(`delete ${o.metadata?.name} ${o.metadata?.resourceVersion}`),
  });
  await informer.run(abort.signal);
  expect(seen).toEqual([
    'add kept', 'add changed', 'add gone',
    'update changed 2->12', 'add new', 'delete gone 3',
  ]);
  expect(informer.store.keys().sort()).toEqual(['ns/changed', 'ns/kept', 'ns/new']);
});

test('run resolves promptly when aborted during a backoff wait', async () => {
  const abort = new AbortController();
  const transport = new ScriptedTransport([new TypeError('connection refused')], [], () => {});
  const reflector = new Reflector<V1ConfigMap>({
    transport,
    type: CONFIGMAPS,
    store: new Store(),
    onChange: () => {},
    backoff: new Backoff({ initialMs: 3_600_000, maxMs: 3_600_000 }),
  });
  const running = reflector.run(abort.signal);
  await eventually('the first list', () => transport.listQueries.length > 0, 10_000, 1);
  abort.abort();
  await running; // would hang for an hour if the wait ignored the signal
  expect(reflector.hasSynced()).toBe(false);
});

test('waitForSync answers false when its signal aborts before the first list', async () => {
  const informer = new Informer<V1ConfigMap>({ transport: new ScriptedTransport([], [], () => {}), type: CONFIGMAPS });
  const abort = new AbortController();
  const waiting = informer.waitForSync(abort.signal);
  abort.abort();
  expect(await waiting).toBe(false);
  expect(informer.hasSynced()).toBe(false);
});

test('woken by the API server answering again, it retries at once and its backoff starts over', async () => {
  const abort = new AbortController();
  const refused = () => ({ refuse: new TypeError('connection refused') });
  const transport = new ScriptedTransport([list('10', [])], [refused(), refused(), refused(), refused(), refused()], () => abort.abort());
  const waits: string[] = [];
  const reflector = configMapReflector(transport, {
    // The third wait is cut short: the API server is back.
    retryWait: { wait: async (ms) => (waits.push(String(ms)), waits.length === 3 ? 'back' : 'elapsed') },
  });
  await reflector.run(abort.signal);
  expect(waits).toEqual(['800', '1600', '3200', '800', '1600']);
  expect(transport.watchQueries.map((q) => q.resourceVersion)).toEqual(['10', '10', '10', '10', '10', '10']);
});

test('only a failure without an answer waits through retryWait; an answered one (403) keeps its plain backoff', async () => {
  const abort = new AbortController();
  const forbidden = new KubeApiError(403, 'Forbidden', 'cannot watch', 'GET', '/api/v1/configmaps');
  const transport = new ScriptedTransport([list('10', [])], [{ refuse: forbidden }, { refuse: new TypeError('connection refused') }], () => abort.abort());
  const waits: string[] = [];
  const reflector = configMapReflector(transport, {
    sleep: async (ms) => void waits.push(`sleep ${ms}`),
    retryWait: { wait: async (ms) => (waits.push(`retryWait ${ms}`), 'elapsed') },
  });
  await reflector.run(abort.signal);
  expect(waits).toEqual(['sleep 800', 'retryWait 1600']);
});

test("with stripManagedFields, the store holds neither the list's nor the watch's managedFields, and every other field", async () => {
  const managed = [{ manager: 'kubectl', operation: 'Update', fieldsV1: { 'f:data': { 'f:k': {} } } }];
  const withFields = (name: string, rv: string): V1ConfigMap => ({ metadata: { name, namespace: 'ns', resourceVersion: rv, labels: { l: name }, managedFields: managed }, data: { k: name } });
  const abort = new AbortController();
  const transport = new ScriptedTransport([list('10', [withFields('a', '3')])], [{ events: [
    { type: 'ADDED', object: withFields('b', '11') },
    { type: 'MODIFIED', object: withFields('a', '12') },
  ] }], () => abort.abort());
  const store = new Store<V1ConfigMap>();
  const changed: (V1ConfigMap | undefined)[] = [];
  await configMapReflector(transport, { store, transform: stripManagedFields, onChange: (c) => changed.push(c.obj, 'oldObj' in c ? c.oldObj : undefined) }).run(abort.signal);
  for (const name of ['a', 'b']) {
    const held = store.get(`ns/${name}`)!;
    expect(held.metadata).toEqual({ name, namespace: 'ns', resourceVersion: name === 'a' ? '12' : '11', labels: { l: name } });
    expect(held.data).toEqual({ k: name });
  }
  expect(changed.length).toBeGreaterThan(0);
  for (const object of changed.filter(Boolean)) expect(object!.metadata).not.toHaveProperty('managedFields');
});
