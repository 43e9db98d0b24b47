import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import type { CoreV1Event, V1Node, V1Service } from '@kubernetes/client-node';
import { defaultLoadBalancerName } from '../../src/cloud/types.ts';
import { ServiceController } from '../../src/controllers/service/index.ts';
import { isNotFound } from '../../src/kube/errors.ts';
import { EventBroadcaster } from '../../src/kube/events.ts';
import { Informer } from '../../src/kube/informer/index.ts';
import { EVENTS, NODES, PATCH_TYPES, ResourceClient, SERVICES } from '../../src/kube/resources.ts';
import { LB_CLEANUP_FINALIZER, EXCLUDE_FROM_LB_LABEL } from '../../src/kube/service-helpers.ts';
import type { KubeRequest, KubeTransport, QueryValue, WatchEvent } from '../../src/kube/transport.ts';
import { createLogger } from '../../src/log.ts';
import { FakeCloud } from '../fakes/fake-cloud.ts';
import { type ControlPlane, sharedControlPlane } from '../harness/control-plane.ts';
import { transportFor } from '../harness/kubeconfig.ts';
import { eventually } from '../harness/eventually.ts';
import { createNamespace } from '../harness/namespaces.ts';
import { controllerContext } from '../fakes/controller-context.ts';

// The service load-balancer controller against a real API server: finalizer, ingress status and
// events through its real writes, node changes reaching the provider, deletion through the
// finalizer. Its services live in a namespace of their own and its nodes carry a prefix, so other
// test files sharing the control plane are neither seen nor touched.

const PREFIX = `svcit-${process.pid}`;
const NAMESPACE = PREFIX;
const INGRESS_IP = '192.0.2.77';

/** Passes everything to the real transport and keeps a record of the controller's writes. */
class WriteRecordingTransport implements KubeTransport {
  readonly server: string;
  readonly writes: KubeRequest[] = [];
  constructor(private readonly inner: KubeTransport) {
    this.server = inner.server;
  }
  request<T>(req: KubeRequest): Promise<T> {
    if (req.method !== 'GET') this.writes.push(req);
    return this.inner.request<T>(req);
  }
  watch<T>(path: string, query: Record<string, QueryValue>, signal: AbortSignal): AsyncGenerator<WatchEvent<T>> {
    return this.inner.watch<T>(path, query, signal);
  }
  writesTo(serviceName: string): { method: string; path: string; contentType?: string; body: unknown }[] {
    const prefix = `/api/v1/namespaces/${NAMESPACE}/services/${serviceName}`;
    return this.writes
      .filter((w) => w.path === prefix || w.path.startsWith(`${prefix}/`))
      .map((w) => ({ method: w.method, path: w.path, contentType: w.contentType, body: w.body }));
  }
}

let cp: ControlPlane;
let transport: KubeTransport;
let recording: WriteRecordingTransport;
let services: ResourceClient<V1Service>;
let nodes: ResourceClient<V1Node>;
let cloud: FakeCloud;
let broadcaster: EventBroadcaster;
const stop = new AbortController();
const running: Promise<void>[] = [];
const nodeNames = [`${PREFIX}-n1`, `${PREFIX}-n2`];

beforeAll(async () => {
  cp = await sharedControlPlane();
  transport = transportFor(cp.adminKubeconfig);
  recording = new WriteRecordingTransport(transport);
  services = new ResourceClient<V1Service>(transport, SERVICES);
  nodes = new ResourceClient<V1Node>(transport, NODES);
  await createNamespace(transport, NAMESPACE);
  for (const name of nodeNames) await nodes.create({ metadata: { name }, spec: { providerID: `fake://${name}` } });

  const logger = createLogger({ verbosity: 0, write: () => {} });
  const nodeInformer = new Informer<V1Node>({ transport, type: NODES, logger });
  const serviceInformer = new Informer<V1Service>({ transport, type: SERVICES, namespace: NAMESPACE, logger });
  broadcaster = new EventBroadcaster({ transport, logger });
  cloud = new FakeCloud({ ingressIP: INGRESS_IP });
  const ctx = controllerContext({
    transport: recording,
    recorder: broadcaster.recorder('service-controller'),
    logger,
    clusterName: 'it',
    cloud,
    nodeInformer,
    serviceInformer,
    isManagedNode: (n) => n.metadata?.name?.startsWith(PREFIX) ?? false,
  });
  // One worker: services are synced in the order their events arrive (the foreign-class test relies on it).
  const controller = new ServiceController(ctx, { workers: 1 });
  running.push(nodeInformer.run(stop.signal), serviceInformer.run(stop.signal), controller.run(stop.signal));
}, 240_000);

afterAll(async () => {
  stop.abort();
  await Promise.allSettled(running);
  await broadcaster?.close(1_000);
  if (services) {
    // Whatever a failed test left: drop our finalizer so the objects can go.
    for (const svc of (await services.list({ namespace: NAMESPACE })).items) {
      const name = svc.metadata!.name!;
      await services.patch(name, 'merge', { metadata: { finalizers: null } }, { namespace: NAMESPACE }).catch(() => {});
      await services.delete(name, { namespace: NAMESPACE }).catch(() => {});
    }
  }
  if (nodes) await Promise.allSettled(nodeNames.map((n) => nodes.delete(n)));
});


async function eventsFor(name: string): Promise<CoreV1Event[]> {
  // Events still queued in the broadcaster would make a "no events" check pass too early.
  await broadcaster.flush();
  const events = new ResourceClient<CoreV1Event>(transport, EVENTS);
  // Only ours: kube-apiserver's ipallocator repair controller may write its own about a new Service.
  const list = await events.list({ namespace: NAMESPACE, query: { fieldSelector: `involvedObject.kind=Service,involvedObject.name=${name},source=service-controller` } });
  return list.items.sort((a, b) => String(a.firstTimestamp ?? a.eventTime).localeCompare(String(b.firstTimestamp ?? b.eventTime)));
}

async function hasEvents(name: string, reasons: string[]): Promise<string[] | undefined> {
  const seen = (await eventsFor(name)).map((e) => e.reason ?? '');
  return reasons.every((r) => seen.includes(r)) ? seen : undefined;
}

function loadBalancerService(name: string, spec: Partial<V1Service['spec']> = {}): V1Service {
  return {
    metadata: { name, namespace: NAMESPACE },
    spec: { type: 'LoadBalancer', ports: [{ name: 'http', port: 80, protocol: 'TCP', targetPort: 8080 }], selector: { app: name }, ...spec },
  };
}

async function ensured(name: string): Promise<V1Service> {
  return eventually(`the ingress of ${name}`, async () => {
    const svc = await services.get(name, { namespace: NAMESPACE });
    return svc.status?.loadBalancer?.ingress?.[0]?.ip === INGRESS_IP ? svc : undefined;
  });
}

async function gone(name: string): Promise<void> {
  await eventually(`${name} to disappear`, async () => {
    try {
      await services.get(name, { namespace: NAMESPACE });
      return undefined;
    } catch (e) {
      if (isNotFound(e)) return true;
      throw e;
    }
  });
}

const ADD_FINALIZER = { metadata: { finalizers: [LB_CLEANUP_FINALIZER] } };
const SET_INGRESS = { status: { loadBalancer: { ingress: [{ ip: INGRESS_IP, ports: [{ port: 80, protocol: 'TCP' }] }] } } };
const REMOVE_FINALIZER = { metadata: { '$deleteFromPrimitiveList/finalizers': [LB_CLEANUP_FINALIZER] } };

describe('service load-balancer controller', () => {
  test('a LoadBalancer service gets its finalizer, ingress and events; deleting it deletes its load balancer', async () => {
    const name = 'web';
    await services.create(loadBalancerService(name));
    const svc = await ensured(name);
    expect(svc.metadata?.finalizers).toEqual([LB_CLEANUP_FINALIZER]);
    expect(svc.status?.loadBalancer?.ingress).toEqual([{ ip: INGRESS_IP, ipMode: 'VIP', ports: [{ port: 80, protocol: 'TCP' }] }]);
    expect(cloud.ensureCalls.filter((c) => c.service.metadata?.name === name).map((c) => [...c.nodeNames].sort())).toEqual([nodeNames]);
    await eventually('the ensure events', () => hasEvents(name, ['EnsuringLoadBalancer', 'EnsuredLoadBalancer']));

    // Exactly two writes, both strategic merge patches on the status subresource.
    const statusPath = `/api/v1/namespaces/${NAMESPACE}/services/${name}/status`;
    expect(recording.writesTo(name)).toEqual([
      { method: 'PATCH', path: statusPath, contentType: PATCH_TYPES.strategic, body: ADD_FINALIZER },
      { method: 'PATCH', path: statusPath, contentType: PATCH_TYPES.strategic, body: SET_INGRESS },
    ]);

    // A change the load balancer does not depend on: no provider call, no write.
    await services.patch(name, 'merge', { metadata: { labels: { tier: 'front' } } }, { namespace: NAMESPACE });
    // A change it does depend on: ensured again, status unchanged so no new status write.
    await services.patch(name, 'merge', { spec: { sessionAffinity: 'ClientIP' } }, { namespace: NAMESPACE });
    await eventually('the second ensure', async () => (cloud.ensureCalls.filter((c) => c.service.metadata?.name === name).length === 2 ? true : undefined));
    expect(cloud.ensureCalls.filter((c) => c.service.metadata?.name === name).map((c) => c.service.spec?.sessionAffinity)).toEqual(['None', 'ClientIP']);

    await services.delete(name, { namespace: NAMESPACE });
    await gone(name);
    expect(cloud.deleteCalls.map((s) => s.metadata?.name)).toContain(name);
    expect(cloud.balancers.has(defaultLoadBalancerName(svc))).toBe(false);
    await eventually('the delete events', () => hasEvents(name, ['DeletingLoadBalancer', 'DeletedLoadBalancer']));
    const writes = recording.writesTo(name);
    // The second ensure wrote nothing: the ingress had not changed (the server's default ipMode included).
    expect(writes.slice(0, 3).map((w) => w.body)).toEqual([ADD_FINALIZER, SET_INGRESS, REMOVE_FINALIZER]);
    // After the finalizer, at most the status clear (which finds the service already gone): nothing else.
    expect(writes.slice(3).map((w) => w.body)).toEqual(writes.length > 3 ? [{ status: { loadBalancer: { ingress: null } } }] : []);
    expect(writes.every((w) => w.method === 'PATCH' && w.path.endsWith('/status'))).toBe(true);
  }, 120_000);

  test('node changes reach the load balancer; readiness does not', async () => {
    const name = 'nodes';
    await services.create(loadBalancerService(name));
    await ensured(name);
    const updatesOf = () => cloud.updateCalls.filter((c) => c.service.metadata?.name === name).map((c) => [...c.nodeNames].sort());
    const before = updatesOf().length;

    // NotReady: nothing to do. Then exclusion: the load balancer loses the node.
    await nodes.patch(nodeNames[1]!, 'merge', { status: { conditions: [{ type: 'Ready', status: 'False', reason: 'Test', message: 'test', lastHeartbeatTime: new Date().toISOString(), lastTransitionTime: new Date().toISOString() }] } }, { subresource: 'status' });
    await nodes.patch(nodeNames[1]!, 'merge', { metadata: { labels: { [EXCLUDE_FROM_LB_LABEL]: 'true' } } });
    await eventually('the update without the excluded node', async () => (updatesOf().length > before ? true : undefined));
    expect(updatesOf().slice(before)).toEqual([[nodeNames[0]!]]);
    await eventually('the UpdatedLoadBalancer event', () => hasEvents(name, ['UpdatedLoadBalancer']));

    await nodes.patch(nodeNames[1]!, 'merge', { metadata: { labels: { [EXCLUDE_FROM_LB_LABEL]: null } } });
    await eventually('the node back', async () => (updatesOf().length > before + 1 ? true : undefined));
    expect(updatesOf().at(-1)).toEqual(nodeNames);

    await services.delete(name, { namespace: NAMESPACE });
    await gone(name);
  }, 120_000);

  test('a service that stops being a LoadBalancer loses its load balancer, finalizer and status', async () => {
    const name = 'demoted';
    await services.create(loadBalancerService(name));
    await ensured(name);
    await services.patch(name, 'merge', { spec: { type: 'ClusterIP' } }, { namespace: NAMESPACE });
    const svc = await eventually('the finalizer removed', async () => {
      const s = await services.get(name, { namespace: NAMESPACE });
      return !s.metadata?.finalizers?.length && !s.status?.loadBalancer?.ingress ? s : undefined;
    });
    expect(svc.spec?.type).toBe('ClusterIP');
    expect(cloud.deleteCalls.map((s) => s.metadata?.name)).toContain(name);
    await services.delete(name, { namespace: NAMESPACE });
  }, 120_000);

  test('a service with a foreign loadBalancerClass is left alone', async () => {
    const foreign = 'foreign';
    const marker = 'after-foreign';
    await services.create(loadBalancerService(foreign, { loadBalancerClass: 'example.com/other-lb' }));
    // Created after it, synced after it by the single worker: once this one is done, the foreign one had its chance.
    await services.create(loadBalancerService(marker));
    await ensured(marker);
    const svc = await services.get(foreign, { namespace: NAMESPACE });
    expect(svc.metadata?.finalizers ?? []).toEqual([]);
    expect(svc.status?.loadBalancer?.ingress ?? []).toEqual([]);
    expect(cloud.callLog.filter((c) => c.target === `${NAMESPACE}/${foreign}`)).toEqual([]);
    expect(recording.writesTo(foreign)).toEqual([]);
    expect(await eventsFor(foreign)).toEqual([]);
    await services.delete(foreign, { namespace: NAMESPACE });
    await services.delete(marker, { namespace: NAMESPACE });
    await gone(marker);
  }, 120_000);
});
