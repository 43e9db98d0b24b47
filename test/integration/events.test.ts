import { afterEach, beforeAll, describe, expect, test } from 'bun:test';
import type { V1Node, V1Service } from '@kubernetes/client-node';
import { AGGREGATE_PREFIX, type CoreEvent, EventBroadcaster } from '../../src/kube/events.ts';
import { EVENTS, NODES, ResourceClient, SERVICES } from '../../src/kube/resources.ts';
import type { KubeTransport } from '../../src/kube/transport.ts';
import { silentLogger } from '../../src/log.ts';
import { RequestFence } from '../../src/kube/request-fence.ts';
import { Registry } from 'prom-client';
import { sharedControlPlane } from '../harness/control-plane.ts';
import { transportFor } from '../harness/kubeconfig.ts';

let api: KubeTransport;
let events: ResourceClient<CoreEvent>;
let namespace: string;
const broadcasters: EventBroadcaster[] = [];

beforeAll(async () => {
  const cp = await sharedControlPlane();
  api = transportFor(cp.adminKubeconfig);
  events = new ResourceClient<CoreEvent>(api, EVENTS);
  namespace = `events-${crypto.randomUUID().slice(0, 8)}`;
  await api.request({ method: 'POST', path: '/api/v1/namespaces', body: { apiVersion: 'v1', kind: 'Namespace', metadata: { name: namespace } } });
}, 300_000);

afterEach(async () => {
  for (const b of broadcasters.splice(0)) await b.close();
});

function newBroadcaster(): EventBroadcaster {
  const b = new EventBroadcaster({ transport: api, logger: silentLogger, instance: 'ccm-test-host' });
  broadcasters.push(b);
  return b;
}

/** A Service as the informer hands it over: kind and apiVersion set, server-assigned uid. */
async function createService(name: string): Promise<V1Service> {
  const created = await new ResourceClient<V1Service>(api, SERVICES).create(
    { apiVersion: 'v1', kind: 'Service', metadata: { name, namespace }, spec: { type: 'ClusterIP', ports: [{ port: 80 }] } },
    { namespace },
  );
  return { ...created, apiVersion: 'v1', kind: 'Service' };
}

/**
 * The Events one component wrote about an object. Only its own: kube-apiserver writes Events too,
 * e.g. its ipallocator-repair-controller's "ClusterIPNotAllocated" warning about a just-created
 * Service whenever its IPAddress informer lags its Service informer (more likely on a busy machine).
 */
async function eventsAbout(ns: string, name: string, component: string): Promise<CoreEvent[]> {
  const list = await events.list({ namespace: ns, query: { fieldSelector: `involvedObject.name=${name},source=${component}` } });
  return list.items;
}

describe('events against a real API server', () => {
  test('a Node event is written to "default" with source, reporting and involved object fields', async () => {
    const nodeName = `node-${crypto.randomUUID().slice(0, 8)}`;
    const node = await new ResourceClient<V1Node>(api, NODES).create({ apiVersion: 'v1', kind: 'Node', metadata: { name: nodeName } });
    const b = newBroadcaster();
    b.recorder('cloud-node-controller').event({ ...node, apiVersion: 'v1', kind: 'Node' }, 'Normal', 'Synced', 'Node synced successfully');
    await b.flush();
    const written = await eventsAbout('default', nodeName, 'cloud-node-controller');
    expect(written).toHaveLength(1);
    const e = written[0]!;
    expect(e).toMatchObject({
      type: 'Normal',
      reason: 'Synced',
      message: 'Node synced successfully',
      count: 1,
      source: { component: 'cloud-node-controller' },
      reportingComponent: 'cloud-node-controller',
      reportingInstance: 'ccm-test-host',
      involvedObject: { apiVersion: 'v1', kind: 'Node', name: nodeName, uid: node.metadata!.uid! },
    });
    expect(e.metadata.namespace).toBe('default');
    expect(e.metadata.name).toStartWith(`${nodeName}.`);
    expect(e.firstTimestamp).toBe(e.lastTimestamp);
    expect(e.firstTimestamp).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
  }, 60_000);

  test('100 identical events make one Event whose count stops at the spam filter burst (25)', async () => {
    const svc = await createService('web');
    const b = newBroadcaster();
    const rec = b.recorder('service-controller');
    // Flushing now and then makes the later ones real PATCHes of the first.
    for (let i = 1; i <= 100; i++) {
      rec.event(svc, 'Warning', 'SyncLoadBalancerFailed', 'Error syncing load balancer: provider unavailable');
      if (i % 10 === 0) await b.flush();
    }
    await b.flush();
    const written = await eventsAbout(namespace, 'web', 'service-controller');
    expect(written).toHaveLength(1);
    expect(written[0]).toMatchObject({
      type: 'Warning',
      reason: 'SyncLoadBalancerFailed',
      count: 25,
      involvedObject: { kind: 'Service', name: 'web', namespace, uid: svc.metadata!.uid! },
    });
    expect(written[0]!.metadata.namespace).toBe(namespace);
  }, 60_000);

  test('12 different messages for one object and reason: 9 Events, then one combined Event counting the rest', async () => {
    const svc = await createService('api');
    const b = newBroadcaster();
    const rec = b.recorder('service-controller');
    for (let i = 0; i < 12; i++) {
      rec.event(svc, 'Warning', 'SyncLoadBalancerFailed', `error ${i}`);
      if (i % 4 === 3) await b.flush();
    }
    await b.flush();
    const written = await eventsAbout(namespace, 'api', 'service-controller');
    expect(written).toHaveLength(10);
    const combined = written.filter((e) => e.message.startsWith(AGGREGATE_PREFIX));
    expect(combined).toHaveLength(1);
    expect(combined[0]).toMatchObject({ count: 3, message: `${AGGREGATE_PREFIX}error 11` });
    expect(written.filter((e) => !e.message.startsWith(AGGREGATE_PREFIX)).map((e) => e.message).sort()).toEqual(
      Array.from({ length: 9 }, (_, i) => `error ${i}`).sort(),
    );
  }, 60_000);
});

describe('events of a leadership term pass its fence (issue 26: an Event of the lost term was sent after the lease was lost)', () => {
  async function droppedTermEnded(registry: Registry): Promise<number> {
    const values = (await registry.getSingleMetric('edge_ccm_events_dropped_total')?.get())?.values ?? [];
    return values.find((v) => v.labels.cause === 'term-ended')?.value ?? 0;
  }

  test('an event queued by a term that ends before it is written is never sent, and is counted', async () => {
    const svc = await createService('fenced');
    const registry = new Registry();
    const b = new EventBroadcaster({ transport: api, logger: silentLogger, instance: 'ccm-test-host', registry });
    broadcasters.push(b);
    const term = new RequestFence();
    const rec = b.recorder('service-controller', term);
    rec.event(svc, 'Normal', 'EnsuringLoadBalancer', 'queued by the old term');
    // The lease lost before the writer got to it (it writes on a later tick).
    await term.close('the leader lease was lost', 1_000);
    await b.flush();
    // Recorded after the term ended: dropped at once.
    rec.event(svc, 'Normal', 'EnsuredLoadBalancer', 'recorded after the term ended');
    // The next term's events go out as usual (and show the writer is not stuck).
    const next = new RequestFence();
    b.recorder('service-controller', next).event(svc, 'Normal', 'EnsuredLoadBalancer', 'the new term');
    await b.flush();
    const written = await eventsAbout(namespace, 'fenced', 'service-controller');
    expect(written.map((e) => e.message)).toEqual(['the new term']);
    expect(await droppedTermEnded(registry)).toBe(2);
  }, 60_000);

  test('an event whose write failed without an answer is not retried once its term has ended', async () => {
    const svc = await createService('fenced-retry');
    const registry = new Registry();
    let requests = 0;
    let failing = true;
    // The API server unreachable at first (as in an outage), back after the term has ended.
    const flaky: KubeTransport = {
      server: api.server,
      request: async <T>(req: Parameters<KubeTransport['request']>[0]): Promise<T> => {
        requests++;
        if (failing) throw new TypeError('fetch failed: connection refused');
        return api.request<T>(req);
      },
      watch: (path, query, signal) => api.watch(path, query, signal),
    };
    const b = new EventBroadcaster({ transport: flaky, logger: silentLogger, instance: 'ccm-test-host', registry, retryDelayMs: 200 });
    broadcasters.push(b);
    const term = new RequestFence();
    b.recorder('service-controller', term).event(svc, 'Warning', 'SyncLoadBalancerFailed', 'from the lost term');
    while (requests === 0) await Bun.sleep(10); // the first try went out and failed
    await term.close('the leader lease was lost', 1_000);
    failing = false;
    await b.flush();
    expect(await eventsAbout(namespace, 'fenced-retry', 'service-controller')).toEqual([]);
    expect(requests).toBe(1);
    expect(await droppedTermEnded(registry)).toBe(1);
  }, 60_000);
});
