import { afterAll, afterEach, beforeAll, describe, expect, test } from 'bun:test';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { readFile } from 'node:fs/promises';
import { KubeConfig, type V1ConfigMap } from '@kubernetes/client-node';
import { Informer } from '../../src/kube/informer/informer.ts';
import { CONFIGMAPS, ResourceClient } from '../../src/kube/resources.ts';
import { BunKubeTransport, type KubeTransport } from '../../src/kube/transport.ts';
import { createLogger } from '../../src/log.ts';
import { type ControlPlane, startControlPlane } from '../harness/control-plane.ts';
import { transportFor } from '../harness/kubeconfig.ts';
import { eventually } from '../harness/eventually.ts';

// A private control plane: these tests restart the API server and compact etcd, which would
// disturb other files sharing sharedControlPlane().
let cp: ControlPlane;
/** Informers still running when a test ends (even a failed one) are stopped by afterEach. */
const running: { abort: AbortController; done: Promise<void> }[] = [];

beforeAll(async () => {
  cp = await startControlPlane();
}, 200_000);

afterEach(async () => {
  for (const r of running.splice(0)) {
    r.abort.abort();
    await r.done;
  }
});

afterAll(async () => {
  await cp?.stop();
});

/** A fresh transport: after an API server restart a pooled connection may be dead. */
function configMaps(): ResourceClient<V1ConfigMap> {
  return new ResourceClient<V1ConfigMap>(transportFor(cp.adminKubeconfig), CONFIGMAPS);
}

async function createNamespace(api: KubeTransport, name: string): Promise<void> {
  await api.request({ method: 'POST', path: '/api/v1/namespaces', body: { apiVersion: 'v1', kind: 'Namespace', metadata: { name } } });
}


/**
 * A TCP proxy in front of the API server that can cut the informer off (drop its connections,
 * refuse new ones) while the server stays up for everyone else: a network partition, during
 * which the test can change things the informer cannot see.
 */
class PartitionProxy {
  private readonly sockets = new Set<Socket>();
  private cutOff = false;

  private constructor(private readonly server: Server, readonly url: string) {}

  static async start(target: URL): Promise<PartitionProxy> {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as { port: number };
    const proxy = new PartitionProxy(server, `https://127.0.0.1:${port}`);
    server.on('connection', (client) => proxy.relay(client, Number(target.port)));
    return proxy;
  }

  /** A transport that reaches the API server through this proxy, as the admin. */
  async transport(kubeconfigPath: string, server: string): Promise<KubeTransport> {
    const kc = new KubeConfig();
    kc.loadFromString((await readFile(kubeconfigPath, 'utf8')).replace(server, this.url));
    return new BunKubeTransport(kc, { qps: 0 });
  }

  cut(): void {
    this.cutOff = true;
    for (const socket of this.sockets) socket.destroy();
  }

  heal(): void {
    this.cutOff = false;
  }

  async close(): Promise<void> {
    this.cut();
    await new Promise((resolve) => this.server.close(resolve));
  }

  private relay(client: Socket, port: number): void {
    if (this.cutOff) return void client.destroy();
    const upstream = connect(port, '127.0.0.1');
    for (const [socket, other] of [[client, upstream], [upstream, client]] as const) {
      this.sockets.add(socket);
      socket.on('error', () => other.destroy());
      socket.on('close', () => {
        this.sockets.delete(socket);
        other.destroy();
      });
    }
    client.pipe(upstream).pipe(client);
  }
}

interface Recorded {
  events: string[];
  deleted: Set<string>;
}

/** Starts an informer on one namespace, records what its handlers hear, and registers it for cleanup. */
function startInformer(namespace: string, opts: { pageSize?: number; resyncMs?: number; transport?: KubeTransport } = {}) {
  const logLines: string[] = [];
  const informer = new Informer<V1ConfigMap>({
    transport: opts.transport ?? transportFor(cp.adminKubeconfig),
    type: CONFIGMAPS,
    namespace,
    logger: createLogger({ format: 'json', write: (line) => logLines.push(line) }),
    pageSize: opts.pageSize,
    resyncMs: opts.resyncMs,
  });
  const recorded: Recorded = { events: [], deleted: new Set() };
  informer.addHandlers({
    onAdd: (o) => recorded.events.push(`add ${o.metadata?.name}`),
    onUpdate: (old, o) => recorded.events.push(`update ${o.metadata?.name} ${old.data?.v}->${o.data?.v}`),
    onDelete: (o) => {
      recorded.events.push(`delete ${o.metadata?.name}`);
      recorded.deleted.add(o.metadata?.name ?? '');
    },
  });
  const abort = new AbortController();
  const done = informer.run(abort.signal);
  running.push({ abort, done });
  return { informer, recorded, logLines, abort, done };
}

/** name -> resourceVersion, sorted by name: what the server has now, and what the informer's store has. */
function versions(objects: V1ConfigMap[]): Record<string, string> {
  const pairs = objects.map((o): [string, string] => [o.metadata?.name ?? '', o.metadata?.resourceVersion ?? '']);
  return Object.fromEntries(pairs.sort(([a], [b]) => a.localeCompare(b)));
}
async function serverState(namespace: string): Promise<Record<string, string>> {
  return versions((await configMaps().list({ namespace })).items);
}
function storeState(informer: Informer<V1ConfigMap>): Record<string, string> {
  return versions(informer.store.list());
}

describe('informer against a real kube-apiserver', () => {
  test('lists existing objects page by page, then sees creates, updates and deletes', async () => {
    const ns = 'informer-basic';
    const client = configMaps();
    await createNamespace(transportFor(cp.adminKubeconfig), ns);
    for (let i = 1; i <= 5; i++) {
      await client.create({ metadata: { name: `pre-${i}`, namespace: ns, labels: { app: i % 2 ? 'odd' : 'even' } }, data: { v: '0' } });
    }
    // What the default transform removes is really there on the server.
    expect((await client.get('pre-1', { namespace: ns })).metadata?.managedFields?.length).toBeGreaterThan(0);

    const { informer, recorded, logLines, abort, done } = startInformer(ns, { pageSize: 2 });
    // A handler that throws or rejects must not keep events from the handlers after it (`late` below).
    informer.addHandlers({
      onAdd: () => { throw new Error('boom'); },
      onUpdate: () => Promise.reject(new Error('async boom')),
    });
    expect(await informer.waitForSync(AbortSignal.timeout(60_000))).toBe(true);
    expect(informer.hasSynced()).toBe(true);
    expect(informer.store.keys().sort()).toEqual([1, 2, 3, 4, 5].map((i) => `${ns}/pre-${i}`));
    expect(recorded.events.sort()).toEqual([1, 2, 3, 4, 5].map((i) => `add pre-${i}`));
    const stored = informer.store.get(`${ns}/pre-1`);
    expect(stored?.metadata?.managedFields).toBeUndefined();
    expect(stored).toMatchObject({ kind: 'ConfigMap', apiVersion: 'v1', data: { v: '0' } });

    // A late handler sees the objects already stored; an index covers them too.
    const late: string[] = [];
    informer.addHandlers({ onAdd: (o) => late.push(o.metadata?.name ?? '') });
    expect(late.sort()).toEqual(['pre-1', 'pre-2', 'pre-3', 'pre-4', 'pre-5']);
    informer.store.addIndexer('app', (o) => (o.metadata?.labels?.app ? [o.metadata.labels.app] : []));
    expect(informer.store.byIndex('app', 'even').map((o) => o.metadata?.name).sort()).toEqual(['pre-2', 'pre-4']);

    recorded.events.length = 0;
    await client.create({ metadata: { name: 'new', namespace: ns, labels: { app: 'even' } }, data: { v: '0' } });
    await client.patch('pre-1', 'merge', { data: { v: '1' } }, { namespace: ns });
    await client.patch('pre-2', 'merge', { metadata: { labels: { app: 'odd' } } }, { namespace: ns });
    await client.delete('pre-3', { namespace: ns });
    await eventually('the watch events', () => recorded.events.length >= 4);
    expect(recorded.events).toEqual(['add new', 'update pre-1 0->1', 'update pre-2 0->0', 'delete pre-3']);
    expect(late).toContain('new');
    expect(informer.store.byIndex('app', 'even').map((o) => o.metadata?.name).sort()).toEqual(['new', 'pre-4']);
    expect(informer.store.get(`${ns}/pre-1`)?.data).toEqual({ v: '1' });
    expect(informer.store.get(`${ns}/pre-3`)).toBeUndefined();
    expect(storeState(informer)).toEqual(await serverState(ns));

    // The throwing handler was logged each time, and changed nothing.
    const failures = logLines.map((l) => JSON.parse(l)).filter((l) => l.msg === 'informer handler failed');
    expect(failures.some((l) => l.handler === 'onAdd' && l.error === 'boom')).toBe(true);
    await eventually('the rejected promise to be logged', () => logLines.some((l) => l.includes('async boom')));

    abort.abort();
    await done; // run resolves once the watch is closed
  }, 120_000);

  test('resync re-delivers every stored object as an update to itself', async () => {
    const ns = 'informer-resync';
    await createNamespace(transportFor(cp.adminKubeconfig), ns);
    await configMaps().create({ metadata: { name: 'only', namespace: ns }, data: { v: '0' } });
    const { informer } = startInformer(ns, { resyncMs: 200 });
    const resynced: [V1ConfigMap, V1ConfigMap][] = [];
    informer.addHandlers({ onUpdate: (old, o) => resynced.push([old, o]) });
    await eventually('two resyncs', () => resynced.length >= 2);
    for (const [old, o] of resynced) {
      expect(old).toBe(o);
      expect(o.metadata?.name).toBe('only');
    }
  }, 120_000);

  test('survives an API server restart: changes made right after it are all delivered', async () => {
    const ns = 'informer-restart';
    await createNamespace(transportFor(cp.adminKubeconfig), ns);
    for (const name of ['keep', 'change', 'remove']) await configMaps().create({ metadata: { name, namespace: ns }, data: { v: '0' } });
    const { informer, recorded, logLines } = startInformer(ns);
    expect(await informer.waitForSync(AbortSignal.timeout(60_000))).toBe(true);
    recorded.events.length = 0;

    // kill, then start once the informer has failed a few times: its backoff has grown to
    // seconds, so the changes below most likely land while it is still disconnected.
    const retries = () => logLines.filter((l) => JSON.parse(l).msg === 'list/watch failed, retrying').length;
    await cp.stopApiServer();
    try {
      await eventually('three failed attempts while the server is down', () => retries() >= 3);
    } finally {
      await cp.startApiServer();
    }
    const client = configMaps();
    await client.create({ metadata: { name: 'added', namespace: ns }, data: { v: '0' } });
    await client.patch('change', 'merge', { data: { v: '1' } }, { namespace: ns });
    await client.delete('remove', { namespace: ns });

    await eventually('every change after the restart', () => recorded.events.length >= 3);
    expect(recorded.events.sort()).toEqual(['add added', 'delete remove', 'update change 0->1']);
    expect(storeState(informer)).toEqual(await serverState(ns));
    // And it keeps watching afterwards.
    await client.create({ metadata: { name: 'later', namespace: ns }, data: { v: '0' } });
    await eventually('the create after recovery', () => recorded.events.includes('add later'));
  }, 300_000);

  test('objects deleted while it is cut off from the server reach onDelete through the relist after 410', async () => {
    const ns = 'informer-partition';
    await createNamespace(transportFor(cp.adminKubeconfig), ns);
    for (const name of ['keep', 'change', 'remove']) await configMaps().create({ metadata: { name, namespace: ns }, data: { v: '0' } });
    const proxy = await PartitionProxy.start(new URL(cp.server));
    try {
      const { informer, recorded, logLines } = startInformer(ns, { transport: await proxy.transport(cp.adminKubeconfig, cp.server) });
      expect(await informer.waitForSync(AbortSignal.timeout(60_000))).toBe(true);
      recorded.events.length = 0;
      const logged = (msg: string) => logLines.some((l) => JSON.parse(l).msg === msg);

      proxy.cut();
      await eventually('the informer to lose its watch', () => logged('list/watch failed, retrying'));
      const client = configMaps();
      await client.create({ metadata: { name: 'added', namespace: ns }, data: { v: '0' } });
      await client.patch('change', 'merge', { data: { v: '1' } }, { namespace: ns });
      await client.delete('remove', { namespace: ns });
      await cp.compactEtcd(); // the informer's resourceVersion is gone: only a relist can catch up
      expect(recorded.events).toEqual([]);
      proxy.heal();

      await eventually('a relist after 410', () => logged('resource version too old, listing again'), 120_000);
      await eventually('the relist difference', () => recorded.events.length >= 3);
      expect(recorded.events.sort()).toEqual(['add added', 'delete remove', 'update change 0->1']);
      expect(storeState(informer)).toEqual(await serverState(ns));
    } finally {
      await proxy.close();
    }
  }, 300_000);

  test('after etcd compaction and a reconnect it relists on 410 and matches the server, deletes included', async () => {
    const ns = 'informer-compact';
    const other = 'informer-compact-other';
    const admin = transportFor(cp.adminKubeconfig);
    await createNamespace(admin, ns);
    await createNamespace(admin, other);
    for (const name of ['keep', 'change', 'remove']) await configMaps().create({ metadata: { name, namespace: ns }, data: { v: '0' } });
    const { informer, recorded, logLines } = startInformer(ns);
    expect(await informer.waitForSync(AbortSignal.timeout(60_000))).toBe(true);
    recorded.events.length = 0;

    // Writes the informer does not watch move etcd past its resourceVersion; compaction then
    // erases that version, so the watch cannot resume after the reconnect.
    for (let i = 0; i < 3; i++) await configMaps().create({ metadata: { name: `elsewhere-${i}`, namespace: other } });
    await cp.compactEtcd();
    await cp.restartApiServer();
    const client = configMaps();
    await client.create({ metadata: { name: 'added', namespace: ns }, data: { v: '0' } });
    await client.patch('change', 'merge', { data: { v: '1' } }, { namespace: ns });
    await client.delete('remove', { namespace: ns });

    const relisted = () => logLines.some((l) => JSON.parse(l).msg === 'resource version too old, listing again');
    await eventually('a relist after 410', relisted, 120_000);
    await eventually('the store to match the server', async () => JSON.stringify(storeState(informer)) === JSON.stringify(await serverState(ns)), 60_000);
    expect(storeState(informer)).toEqual(await serverState(ns));
    expect(recorded.events.sort()).toEqual(['add added', 'delete remove', 'update change 0->1']);
    expect(recorded.deleted).toEqual(new Set(['remove']));
  }, 300_000);
});
