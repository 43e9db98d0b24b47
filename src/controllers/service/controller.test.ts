import { describe, expect, spyOn, test } from 'bun:test';
import type { V1Node, V1Service } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import { AddressAssignmentError, ImplementedElsewhereError, RetryAfterError, defaultLoadBalancerName, type CloudProvider, type LoadBalancer } from '../../cloud/types.ts';
import { NODE_SYNC_KEY, ServiceController } from './index.ts';
import { ENSURE_BLOCKED_RETRY_SECONDS, retryAfterSeconds } from './load-balancer-sync.ts';
import type { ControllerContext } from '../types.ts';
import { KubeApiError } from '../../kube/errors.ts';
import { PATCH_TYPES } from '../../kube/resources.ts';
import { LB_CLEANUP_FINALIZER, EXCLUDE_FROM_LB_LABEL, TO_BE_DELETED_TAINT } from '../../kube/service-helpers.ts';
import { FakeClock } from '../../../test/fakes/fake-clock.ts';
import { FakeCloud } from '../../../test/fakes/fake-cloud.ts';
import { HandFedInformer, RecordingTransport, controllerContext } from '../../../test/fakes/controller-context.ts';
import { RecordingEventRecorder } from '../../../test/fakes/event-recorder.ts';
import { eventually } from '../../../test/harness/eventually.ts';

// ---- test doubles for the API side: a transport that records writes, an informer fed by hand ----

// ---- fixtures, as upstream's newService / makeNode with tweaks ----

type ServiceTweak = (s: V1Service) => void;
function newService(name: string, type: string, ...tweaks: ServiceTweak[]): V1Service {
  const s: V1Service = {
    metadata: { name, namespace: 'default', uid: `uid-${name}`, resourceVersion: '1' },
    spec: { type, ports: [{ port: 80, protocol: 'TCP', targetPort: 0 }] },
  };
  for (const t of tweaks) t(s);
  return s;
}
const withProtocol = (protocol: string): ServiceTweak => (s) => {
  s.spec!.ports = [{ port: 80, protocol, targetPort: 0 }];
};
const withIngress = (ip: string): ServiceTweak => (s) => {
  s.status = { loadBalancer: { ingress: [{ ip }] } };
};
const withFinalizer: ServiceTweak = (s) => {
  s.metadata!.finalizers = [LB_CLEANUP_FINALIZER];
};
const deleting: ServiceTweak = (s) => {
  s.metadata!.deletionTimestamp = new Date();
};
const withClass = (cls: string): ServiceTweak => (s) => {
  s.spec!.loadBalancerClass = cls;
};
const withETPLocal: ServiceTweak = (s) => {
  s.spec!.externalTrafficPolicy = 'Local';
};
/** A new resourceVersion, as the API server would give an updated object. */
const bump = (s: V1Service, ...tweaks: ServiceTweak[]): V1Service => {
  const c = structuredClone(s);
  c.metadata!.resourceVersion = String(Number(c.metadata!.resourceVersion ?? '0') + 1);
  for (const t of tweaks) t(c);
  return c;
};

type NodeTweak = (n: V1Node) => void;
function makeNode(name: string, ...tweaks: NodeTweak[]): V1Node {
  const n: V1Node = {
    metadata: { name, labels: {}, resourceVersion: '1' },
    spec: { taints: [], providerID: 'providerID' },
    status: { conditions: [{ type: 'Ready', status: 'True' }] },
  };
  for (const t of tweaks) t(n);
  return n;
}
const notReady: NodeTweak = (n) => {
  n.status!.conditions = [{ type: 'Ready', status: 'False' }];
};
const tainted = (key: string): NodeTweak => (n) => {
  n.spec!.taints!.push({ key, effect: 'NoSchedule' });
};
const excluded = (value = ''): NodeTweak => (n) => {
  n.metadata!.labels![EXCLUDE_FROM_LB_LABEL] = value;
};
const markedDeleted: NodeTweak = (n) => {
  n.metadata!.deletionTimestamp = new Date();
};
const withProviderID = (id: string): NodeTweak => (n) => {
  n.spec!.providerID = id;
};

// ---- the controller under test ----

interface Setup {
  controller: ServiceController;
  cloud: FakeCloud;
  transport: RecordingTransport;
  recorder: RecordingEventRecorder;
  registry: Registry;
  nodes: HandFedInformer<V1Node>;
  services: HandFedInformer<V1Service>;
  clock: FakeClock;
}

interface SetupOptions {
  nodes?: V1Node[];
  services?: V1Service[];
  workers?: number;
  classes?: string[];
  /** Replaces the fake's load balancer (to slow a call down). */
  balancer?: (fake: LoadBalancer) => LoadBalancer;
  isManagedNode?: (node: V1Node) => boolean;
  ensureBlocked?: () => string | undefined;
}

function setup(opts: SetupOptions = {}): Setup {
  const cloud = new FakeCloud({ loadBalancerClasses: opts.classes });
  const provider: CloudProvider = opts.balancer ? { providerName: 'fake', loadBalancer: opts.balancer(cloud.loadBalancer!) } : cloud;
  const transport = new RecordingTransport();
  const recorder = new RecordingEventRecorder();
  const registry = new Registry();
  const nodes = new HandFedInformer<V1Node>();
  const services = new HandFedInformer<V1Service>();
  for (const n of opts.nodes ?? []) nodes.set(n);
  for (const s of opts.services ?? []) services.set(s);
  const clock = new FakeClock();
  const ctx = controllerContext({
    transport,
    recorder,
    registry,
    cloud: provider,
    nodeInformer: nodes.asInformer(),
    serviceInformer: services.asInformer(),
    isManagedNode: opts.isManagedNode ?? (() => true),
  });
  const controller = new ServiceController(ctx, { workers: opts.workers ?? 1, clock, ensureBlocked: opts.ensureBlocked });
  return { controller, cloud, transport, recorder, registry, nodes, services, clock };
}

const key = (s: V1Service) => `${s.metadata!.namespace}/${s.metadata!.name}`;
const statusPath = (name: string) => `/api/v1/namespaces/default/services/${name}/status`;
const sorted = (names: string[]) => [...names].sort();
/** Update calls as "service: node,node", order-independent like upstream's compareUpdateCalls. */
const updateCalls = (cloud: FakeCloud) => cloud.updateCalls.map((c) => `${c.service.metadata!.name}: ${sorted(c.nodeNames).join(',')}`).sort();

/** Makes the fake hold a load balancer for the service, as if an earlier sync had created it. */
async function existingBalancer(cloud: FakeCloud, service: V1Service): Promise<void> {
  await cloud.loadBalancer!.ensureLoadBalancer('test-cluster', service, []);
  cloud.clearCalls();
}

async function metricValue(registry: Registry, name: string, suffix = ''): Promise<number> {
  const metrics = await registry.getMetricsAsJSON();
  const metric = metrics.find((m) => m.name === name);
  if (!metric) throw new Error(`no metric ${name}`);
  const value = (metric.values as { metricName?: string; value: number }[]).find((v) => (v.metricName ?? name) === name + suffix);
  return value?.value ?? 0;
}

// ---- service sync ----

describe('syncLoadBalancerIfNeeded (upstream TestSyncLoadBalancerIfNeeded)', () => {
  const ADD_FINALIZER = { metadata: { finalizers: [LB_CLEANUP_FINALIZER] } };
  const REMOVE_FINALIZER = { metadata: { '$deleteFromPrimitiveList/finalizers': [LB_CLEANUP_FINALIZER] } };
  const CLEAR_STATUS = { status: { loadBalancer: { ingress: null } } };
  const ingressFor = (protocol: string) => ({ status: { loadBalancer: { ingress: [{ ip: '192.0.2.10', ports: [{ port: 80, protocol }] }] } } });

  interface Case {
    desc: string;
    service: V1Service;
    lbExists?: boolean;
    classes?: string[];
    op: string;
    ensure?: boolean;
    delete?: boolean;
    patches: unknown[];
    events: string[];
  }
  /** A service that wants a load balancer and has none yet: ensured, finalizer then ingress, two events. */
  const wantsLB = (desc: string, service: V1Service, protocol = 'TCP', classes?: string[]): Case => ({
    desc,
    service,
    classes,
    op: 'ensure',
    ensure: true,
    patches: [ADD_FINALIZER, ingressFor(protocol)],
    events: ['EnsuringLoadBalancer', 'EnsuredLoadBalancer'],
  });

  /** A service whose load balancer exists and must go: deleted, finalizer removed and status cleared, two events. */
  const deletesLB = (desc: string, service: V1Service): Case => ({
    desc,
    service,
    lbExists: true,
    op: 'delete',
    delete: true,
    patches: [REMOVE_FINALIZER, CLEAR_STATUS],
    events: ['DeletingLoadBalancer', 'DeletedLoadBalancer'],
  });

  const cases: Case[] = [
    {
      desc: "service doesn't want LB",
      service: newService('no-external-balancer', 'ClusterIP'),
      op: 'delete',
      patches: [],
      events: ['DeletedLoadBalancer'],
    },
    wantsLB('udp service that wants LB', newService('udp-service', 'LoadBalancer', withProtocol('UDP')), 'UDP'),
    wantsLB('tcp service that wants LB', newService('basic-service1', 'LoadBalancer')),
    wantsLB('sctp service that wants LB', newService('sctp-service', 'LoadBalancer', withProtocol('SCTP')), 'SCTP'),
    {
      desc: 'service specifies a foreign loadBalancerClass: no call, no finalizer, no event',
      service: newService('with-external-balancer', 'LoadBalancer', withClass('custom-loadbalancer')),
      op: 'skip',
      patches: [],
      events: [],
    },
    wantsLB('service specifies a class the provider owns (beyond upstream)', newService('owned-class', 'LoadBalancer', withClass('edge.example/lb')), 'TCP', ['edge.example/lb']),
    deletesLB('service with finalizer that no longer wants LB', newService('no-external-balancer', 'ClusterIP', withIngress('8.8.8.8'), withFinalizer)),
    deletesLB('service that needs cleanup', newService('basic-service1', 'LoadBalancer', withIngress('8.8.8.8'), withFinalizer, deleting)),
    {
      desc: 'service that needs cleanup but whose load balancer is already gone',
      service: newService('basic-service1', 'LoadBalancer', withIngress('8.8.8.8'), withFinalizer, deleting),
      op: 'delete',
      patches: [REMOVE_FINALIZER, CLEAR_STATUS],
      events: ['DeletedLoadBalancer'],
    },
    {
      desc: 'service with a foreign class that still carries our finalizer is cleaned up',
      service: newService('class-changed', 'LoadBalancer', withClass('custom-loadbalancer'), withFinalizer),
      lbExists: true,
      op: 'delete',
      delete: true,
      patches: [REMOVE_FINALIZER],
      events: ['DeletingLoadBalancer', 'DeletedLoadBalancer'],
    },
    {
      desc: 'service with finalizer that wants LB',
      service: newService('basic-service1', 'LoadBalancer', withFinalizer),
      op: 'ensure',
      ensure: true,
      patches: [ingressFor('TCP')],
      events: ['EnsuringLoadBalancer', 'EnsuredLoadBalancer'],
    },
  ];

  for (const tc of cases) {
    test(tc.desc, async () => {
      const { controller, cloud, transport, recorder } = setup({ nodes: [makeNode('node1')], classes: tc.classes });
      if (tc.lbExists) await existingBalancer(cloud, tc.service);
      const op = await controller.sync.syncLoadBalancerIfNeeded(tc.service, key(tc.service));
      expect(op).toBe(tc.op as never);

      expect(cloud.count('ensureLoadBalancer')).toBe(tc.ensure ? 1 : 0);
      expect(cloud.count('ensureLoadBalancerDeleted')).toBe(tc.delete ? 1 : 0);
      if (tc.op === 'skip') expect(cloud.calls).toEqual([]);
      if (tc.ensure) {
        const lb = cloud.balancers.get(defaultLoadBalancerName(tc.service));
        expect(lb?.clusterName).toBe('test-cluster');
        expect(lb?.service.spec?.ports?.[0]?.port).toBe(80);
        expect(lb?.nodeNames).toEqual(['node1']);
      }
      if (tc.delete) expect(cloud.balancers.size).toBe(0);

      const name = tc.service.metadata!.name!;
      expect(transport.patches()).toEqual(tc.patches.map((body) => ({ path: statusPath(name), body })));
      for (const r of transport.requests) {
        expect(r.contentType).toBe(PATCH_TYPES.strategic);
        expect(r.query?.fieldManager).toBe('edge-ccm');
      }
      expect(recorder.reasons()).toEqual(tc.events);
      for (const e of recorder.events) expect(e).toMatchObject({ kind: 'Service', namespace: 'default', name });
    });
  }
});

describe('ensuring a load balancer', () => {
  test('zero eligible nodes: a warning, and the load balancer is still ensured', async () => {
    const svc = newService('svc', 'LoadBalancer');
    const { controller, cloud, recorder } = setup({ nodes: [makeNode('gone', markedDeleted), makeNode('excluded', excluded())], services: [svc] });
    await controller.sync.syncService(key(svc));
    expect(recorder.events.map((e) => [e.type, e.reason, e.message])).toEqual([
      ['Normal', 'EnsuringLoadBalancer', 'Ensuring load balancer'],
      ['Warning', 'UnAvailableLoadBalancer', 'There are no available nodes for LoadBalancer'],
      ['Normal', 'EnsuredLoadBalancer', 'Ensured load balancer'],
    ]);
    expect(cloud.ensureCalls[0]?.nodeNames).toEqual([]);
  });

  test('nodes are the eligible managed ones; readiness and other taints do not matter', async () => {
    const svc = newService('svc', 'LoadBalancer');
    const { controller, cloud } = setup({
      nodes: [
        makeNode('ready'),
        makeNode('not-ready', notReady),
        makeNode('other-taint', tainted('other')),
        makeNode('autoscaler', tainted(TO_BE_DELETED_TAINT)),
        makeNode('excluded-false', excluded('false')),
        makeNode('excluded-true', excluded('true')),
        makeNode('unmanaged'),
      ],
      services: [svc],
      isManagedNode: (n) => n.metadata?.name !== 'unmanaged',
    });
    await controller.sync.syncService(key(svc));
    expect(sorted(cloud.ensureCalls[0]!.nodeNames)).toEqual(['excluded-false', 'not-ready', 'other-taint', 'ready']);
  });

  test('status is written only when the ingress changed', async () => {
    const svc = newService('svc', 'LoadBalancer', withFinalizer, (s) => {
      s.status = { loadBalancer: { ingress: [{ ip: '192.0.2.10', ports: [{ port: 80, protocol: 'TCP' }] }] } };
    });
    const { controller, transport, recorder } = setup({ nodes: [makeNode('n1')], services: [svc] });
    await controller.sync.syncService(key(svc));
    expect(transport.requests).toEqual([]);
    expect(recorder.reasons()).toEqual(['EnsuringLoadBalancer', 'EnsuredLoadBalancer']);
  });

  test('a missing status from the provider is an error, after the finalizer was added', async () => {
    const svc = newService('svc', 'LoadBalancer');
    const { controller, cloud, transport, recorder } = setup({ nodes: [makeNode('n1')], services: [svc] });
    cloud.ensureStatus = () => undefined;
    await expect(controller.sync.syncService(key(svc))).rejects.toThrow('service status returned by ensureLoadBalancer is missing');
    expect(transport.patches().map((p) => p.body)).toEqual([{ metadata: { finalizers: [LB_CLEANUP_FINALIZER] } }]);
    expect(recorder.events.at(-1)).toMatchObject({
      type: 'Warning',
      reason: 'SyncLoadBalancerFailed',
      message: 'Error syncing load balancer: service status returned by ensureLoadBalancer is missing',
    });
  });

  test('a refused ensure that says what the service holds now writes it with the condition (issue 29)', async () => {
    // The pool load balancer refused the spec and the service gave its shared address up (its
    // new port clashes with a co-holder's): a status left as it was would keep claiming it.
    const svc = newService('svc', 'LoadBalancer', withFinalizer, withIngress('203.0.113.131'), (s) => (s.metadata!.generation = 4));
    const refusal = new AddressAssignmentError('requested address 198.51.100.12 is not in any pool this service may use; the service gave up 203.0.113.131', 'RequestedAddressNotInPool');
    refusal.holds = { ingress: [] };
    const { controller, transport } = setup({
      nodes: [makeNode('n1')],
      services: [svc],
      balancer: (fake) => ({ ...fake, assignedPools: () => [], ensureLoadBalancer: async () => { throw refusal; } }),
    });
    await expect(controller.sync.syncService(key(svc))).rejects.toThrow('the service gave up 203.0.113.131');
    const patches = transport.patches();
    expect(patches).toHaveLength(1);
    expect(patches[0]!.body).toMatchObject({
      status: {
        loadBalancer: { ingress: null },
        conditions: [{ type: 'edge-ccm.io/AddressAssigned', status: 'False', reason: 'RequestedAddressNotInPool', observedGeneration: 4 }],
      },
    });
  });

  test('a refused ensure that holds what the status says writes the condition only', async () => {
    const svc = newService('svc', 'LoadBalancer', withFinalizer, withIngress('203.0.113.131'));
    const refusal = new AddressAssignmentError('requested address 198.51.100.12 is not in any pool this service may use', 'RequestedAddressNotInPool');
    refusal.holds = { ingress: [{ ip: '203.0.113.131' }] };
    const { controller, transport } = setup({
      nodes: [makeNode('n1')],
      services: [svc],
      balancer: (fake) => ({ ...fake, assignedPools: () => [], ensureLoadBalancer: async () => { throw refusal; } }),
    });
    await expect(controller.sync.syncService(key(svc))).rejects.toThrow('is not in any pool');
    expect(transport.patches().map((p) => Object.keys((p.body as { status: object }).status))).toEqual([['conditions']]);
  });

  test('a provider error: SyncLoadBalancerFailed with the wrapped message', async () => {
    const svc = newService('svc', 'LoadBalancer', withFinalizer);
    const { controller, cloud, recorder } = setup({ nodes: [makeNode('n1')], services: [svc] });
    cloud.failWith('ensureLoadBalancer', new Error('quota exceeded'));
    await expect(controller.sync.syncService(key(svc))).rejects.toThrow('failed to ensure load balancer: quota exceeded');
    expect(recorder.events.map((e) => [e.type, e.reason, e.message])).toEqual([
      ['Normal', 'EnsuringLoadBalancer', 'Ensuring load balancer'],
      ['Warning', 'SyncLoadBalancerFailed', 'Error syncing load balancer: failed to ensure load balancer: quota exceeded'],
    ]);
  });

  test('implemented elsewhere: skipped quietly, no status and no EnsuredLoadBalancer', async () => {
    const svc = newService('svc', 'LoadBalancer');
    const { controller, cloud, transport, recorder } = setup({ nodes: [makeNode('n1')], services: [svc] });
    cloud.failWith('ensureLoadBalancer', new ImplementedElsewhereError());
    await controller.sync.syncService(key(svc));
    expect(recorder.reasons()).toEqual(['EnsuringLoadBalancer']);
    expect(transport.patches().map((p) => p.body)).toEqual([{ metadata: { finalizers: [LB_CLEANUP_FINALIZER] } }]);
  });

  test('another edge-ccm decides (ensureBlocked): no provider call, no write, a Warning saying why, retried after the delay', async () => {
    const svc = newService('svc', 'LoadBalancer');
    let blocked: string | undefined = 'another edge-ccm (x) holds the Lease kube-system/ccm';
    const { controller, cloud, transport, recorder, services } = setup({ nodes: [makeNode('n1')], services: [svc], ensureBlocked: () => blocked });
    const refused = await controller.sync.syncService(key(svc)).catch((e: unknown) => e);
    expect(retryAfterSeconds(refused)).toBe(ENSURE_BLOCKED_RETRY_SECONDS);
    expect(cloud.count('ensureLoadBalancer')).toBe(0);
    expect(transport.requests).toEqual([]);
    expect(recorder.events.map((e) => [e.type, e.reason, e.message])).toEqual([
      ['Warning', 'SyncLoadBalancerFailed', 'Error syncing load balancer: another edge-ccm (x) holds the Lease kube-system/ccm'],
    ]);
    blocked = undefined;
    await controller.sync.syncService(key(services.store.get(key(svc))!));
    expect(cloud.count('ensureLoadBalancer')).toBe(1);
  });

  test('adding the finalizer fails: no provider call', async () => {
    const svc = newService('svc', 'LoadBalancer');
    const { controller, cloud, transport } = setup({ nodes: [makeNode('n1')], services: [svc] });
    transport.fail = () => new KubeApiError(403, 'Forbidden', 'nope', 'PATCH', statusPath('svc'));
    await expect(controller.sync.syncService(key(svc))).rejects.toThrow('failed to add load balancer cleanup finalizer');
    expect(cloud.count('ensureLoadBalancer')).toBe(0);
  });
});

describe('memory: node lists per service', () => {
  test('services synced against the same nodes share one node list; a node change makes a new one', async () => {
    const given: V1Node[][] = [];
    const svcs = ['a', 'b', 'c'].map((n) => newService(n, 'LoadBalancer'));
    const { controller, nodes } = setup({
      nodes: [makeNode('n1'), makeNode('n2')],
      services: svcs,
      balancer: (fake) => ({ ...fake, ensureLoadBalancer: (c, s, ns, sig) => (given.push(ns), fake.ensureLoadBalancer(c, s, ns, sig)) }),
    });
    for (const s of svcs.slice(0, 2)) await controller.sync.syncService(key(s));
    expect(given).toHaveLength(2);
    expect(given[1]).toBe(given[0]!); // one array for both, not one per service
    nodes.set(makeNode('n3'));
    await controller.sync.syncService(key(svcs[2]!));
    expect(given[2]).not.toBe(given[0]!);
    expect(given[2]!.map((n) => n.metadata!.name)).toEqual(['n1', 'n2', 'n3']);
    expect(given[0]!.map((n) => n.metadata!.name)).toEqual(['n1', 'n2']); // the shared list was not changed in place
  });
});

describe('status patch errors (upstream TestProcessServiceCreateOrUpdateK8sError)', () => {
  test('conflict: an error and a SyncLoadBalancerFailed event', async () => {
    const svc = newService('svc-k8s-err', 'LoadBalancer', withFinalizer);
    const { controller, transport, recorder } = setup({ nodes: [makeNode('n1')], services: [svc] });
    transport.fail = (r) => new KubeApiError(409, 'Conflict', 'object conflict', r.method, r.path);
    await expect(controller.sync.syncService(key(svc))).rejects.toThrow('failed to update load balancer status: ');
    expect(recorder.events.at(-1)?.message).toStartWith('Error syncing load balancer: failed to update load balancer status: ');
  });

  test('not found: the service is gone, nothing to retry', async () => {
    const svc = newService('svc-k8s-err', 'LoadBalancer', withFinalizer);
    const { controller, transport, recorder } = setup({ nodes: [makeNode('n1')], services: [svc] });
    transport.fail = (r) => new KubeApiError(404, 'NotFound', 'gone', r.method, r.path);
    await controller.sync.syncService(key(svc));
    expect(recorder.reasons()).not.toContain('SyncLoadBalancerFailed');
  });
});

describe('deletion', () => {
  test('implemented elsewhere on deletion: the finalizer is still removed', async () => {
    const svc = newService('svc', 'LoadBalancer', withFinalizer, deleting);
    const { controller, cloud, transport } = setup({ services: [svc] });
    await existingBalancer(cloud, svc);
    cloud.failWith('ensureLoadBalancerDeleted', new ImplementedElsewhereError());
    await controller.sync.syncService(key(svc));
    expect(transport.patches().map((p) => p.body)).toEqual([{ metadata: { '$deleteFromPrimitiveList/finalizers': [LB_CLEANUP_FINALIZER] } }]);
  });

  test('a deletion error keeps the finalizer', async () => {
    const svc = newService('svc', 'LoadBalancer', withFinalizer, deleting);
    const { controller, cloud, transport, recorder } = setup({ services: [svc] });
    await existingBalancer(cloud, svc);
    cloud.failWith('ensureLoadBalancerDeleted', new Error('busy'));
    await expect(controller.sync.syncService(key(svc))).rejects.toThrow('failed to delete load balancer: busy');
    expect(transport.requests).toEqual([]);
    expect(recorder.reasons()).toEqual(['DeletingLoadBalancer', 'SyncLoadBalancerFailed']);
  });

  test('the existence check fails: nothing deleted, finalizer kept', async () => {
    const svc = newService('svc', 'LoadBalancer', withFinalizer, deleting);
    const { controller, cloud, transport } = setup({ services: [svc] });
    cloud.failWith('getLoadBalancer', new Error('timeout'));
    await expect(controller.sync.syncService(key(svc))).rejects.toThrow('failed to check if load balancer exists before cleanup: timeout');
    expect(cloud.count('ensureLoadBalancerDeleted')).toBe(0);
    expect(transport.requests).toEqual([]);
  });
});

describe('services gone from the informer (upstream TestProcessServiceDeletion)', () => {
  test('a service never synced: nothing to do', async () => {
    const { controller, cloud, recorder } = setup();
    await controller.sync.syncService('default/external-balancer');
    expect(cloud.calls).toEqual([]);
    expect(recorder.events).toEqual([]);
  });

  test('a synced service deleted without finalizer: its load balancer is deleted once', async () => {
    const svc = newService('external-balancer', 'LoadBalancer');
    const { controller, cloud, services, recorder } = setup({ nodes: [makeNode('n1')], services: [svc] });
    await controller.sync.syncService(key(svc));
    services.remove(svc);
    recorder.events.length = 0;
    await controller.sync.syncService(key(svc));
    expect(cloud.deleteCalls.map((s) => s.metadata!.uid)).toEqual(['uid-external-balancer']);
    expect(recorder.reasons()).toEqual(['DeletingLoadBalancer', 'DeletedLoadBalancer']);
    await controller.sync.syncService(key(svc));
    expect(cloud.count('ensureLoadBalancerDeleted')).toBe(1);
  });

  test('the provider fails to delete: DeleteLoadBalancerFailed, and the next try deletes', async () => {
    const svc = newService('external-balancer', 'LoadBalancer');
    const { controller, cloud, services, recorder } = setup({ nodes: [makeNode('n1')], services: [svc] });
    await controller.sync.syncService(key(svc));
    services.remove(svc);
    cloud.failWith('ensureLoadBalancerDeleted', new Error('error Deleting the Loadbalancer'), { times: 1 });
    await expect(controller.sync.syncService(key(svc))).rejects.toThrow('error Deleting the Loadbalancer');
    expect(recorder.events.at(-1)).toMatchObject({ type: 'Warning', reason: 'DeleteLoadBalancerFailed', message: 'Error deleting load balancer: error Deleting the Loadbalancer' });
    await controller.sync.syncService(key(svc));
    expect(cloud.balancers.size).toBe(0);
  });

  test('re-created under the same name (new UID): the old load balancer is deleted first', async () => {
    const old = newService('svc', 'LoadBalancer');
    const { controller, cloud, services } = setup({ nodes: [makeNode('n1')], services: [old] });
    await controller.sync.syncService(key(old));
    const recreated = bump(old, (s) => (s.metadata!.uid = 'uid-new'));
    services.set(recreated);
    await controller.sync.syncService(key(old));
    expect(cloud.deleteCalls.map((s) => s.metadata!.uid)).toEqual(['uid-svc']);
    expect(cloud.ensureCalls.map((c) => c.service.metadata!.uid)).toEqual(['uid-svc', 'uid-new']);
  });
});

// ---- node sync ----

describe('node changes (upstream TestNodeChangesForStableNodeSetEnabled / TestNodesNotEqual)', () => {
  const node1 = makeNode('node1');
  const node2 = makeNode('node2');
  const node3 = makeNode('node3');
  const svcs = [newService('s0', 'LoadBalancer', withETPLocal), newService('s1', 'LoadBalancer', withETPLocal), newService('external-balancer', 'LoadBalancer')];
  const allUpdated = (nodes: string) => svcs.map((s) => `${s.metadata!.name}: ${nodes}`).sort();

  /** Syncs the services with `initial` nodes, then switches the informer to `next` and runs one node-sync pass. */
  async function nodeSync(initial: V1Node[], next: V1Node[], prepare?: (s: Setup) => void) {
    const s = setup({ nodes: initial, services: svcs, workers: 3 });
    for (const svc of svcs) await s.controller.sync.syncService(key(svc));
    s.cloud.clearCalls();
    s.recorder.events.length = 0;
    for (const n of initial) if (!next.some((m) => m.metadata!.name === n.metadata!.name)) s.nodes.remove(n);
    for (const n of next) s.nodes.set(n);
    prepare?.(s);
    const retry = await s.controller.sync.syncNodes(3);
    return { ...s, retry };
  }

  const cases: [string, V1Node[], V1Node[], string[]][] = [
    ['no node changes', [node1, node2, node3], [node1, node2, node3], []],
    ['1 new node gets added', [node1, node2], [node1, node2, node3], allUpdated('node1,node2,node3')],
    ['1 node goes NotReady', [node1, node2, node3], [node1, makeNode('node2', notReady), node3], []],
    ['1 node gets the autoscaler taint', [node1, node2, node3], [node1, makeNode('node2', tainted(TO_BE_DELETED_TAINT)), node3], allUpdated('node1,node3')],
    ['1 node goes Ready', [node1, makeNode('node2', notReady), node3], [node1, node2, node3], []],
    ['1 node gets excluded', [node1, node2, node3], [node1, makeNode('node2', excluded()), node3], allUpdated('node1,node3')],
    ['1 node gets an exclusion label parsing as false', [node1, node2, node3], [node1, makeNode('node2', excluded('False')), node3], []],
    ['1 old node gets deleted', [node1, node2, node3], [node1, node2], allUpdated('node1,node2')],
    ['1 node marked for deletion', [node1, node2, node3], [node1, makeNode('node2', markedDeleted), node3], allUpdated('node1,node3')],
    ['1 spurious node update (other taint)', [node1, node2, node3], [node1, makeNode('node2', tainted('Other')), node3], []],
    ['nodes with updated providerID', [node1, node2], [makeNode('node1', withProviderID('cumulus/1')), makeNode('node2', withProviderID('cumulus/2'))], allUpdated('node1,node2')],
    ['change of a node with empty providerID', [makeNode('node1', withProviderID('cumulus/1')), makeNode('node2', withProviderID(''))], [makeNode('node1', withProviderID('cumulus/1')), makeNode('node3', withProviderID(''))], allUpdated('node1,node3')],
  ];
  for (const [desc, initial, next, expected] of cases) {
    test(desc, async () => {
      const { cloud, retry, recorder } = await nodeSync(initial, next);
      expect(updateCalls(cloud)).toEqual(expected);
      expect(retry.size).toBe(0);
      expect(recorder.reasons()).toEqual(expected.map(() => 'UpdatedLoadBalancer'));
    });
  }

  test('1 new node gets added, with retries: failures go back to the service queue, not to the next node sync', async () => {
    const { controller, cloud, retry, recorder } = await nodeSync([node1, node2], [node1, node2, node3], (s) => s.cloud.failWith('updateLoadBalancer', new Error('error please')));
    expect(sorted([...retry])).toEqual(['default/external-balancer', 'default/s0', 'default/s1']);
    expect(recorder.reasons()).toEqual(['UpdateLoadBalancerFailed', 'UpdateLoadBalancerFailed', 'UpdateLoadBalancerFailed']);
    expect(recorder.events[0]?.message).toBe(
      'Error updating load balancer with new hosts [node1 node2 node3] [node names limited, total number of nodes: 3], error: error please',
    );
    cloud.clearFailures();
    expect((await controller.sync.syncNodes(3)).size).toBe(0);
    expect(updateCalls(cloud)).toEqual(allUpdated('node1,node2,node3')); // only the three failed ones
  });

  test('a node that stops being managed leaves every load balancer', async () => {
    let managed = true;
    const s = setup({ nodes: [node1, node2], services: svcs, workers: 2, isManagedNode: (n) => managed || n.metadata!.name !== 'node2' });
    for (const svc of svcs) await s.controller.sync.syncService(key(svc));
    managed = false;
    await s.controller.sync.syncNodes(2);
    expect(updateCalls(s.cloud)).toEqual(allUpdated('node1'));
  });

  test('every node gone: UnAvailableLoadBalancer instead of UpdatedLoadBalancer', async () => {
    const { cloud, recorder } = await nodeSync([node1], []);
    expect(updateCalls(cloud)).toEqual(allUpdated(''));
    expect(recorder.reasons()).toEqual(['UnAvailableLoadBalancer', 'UnAvailableLoadBalancer', 'UnAvailableLoadBalancer']);
  });

  test('a failed update of a load balancer that no longer exists is no error', async () => {
    const { retry, recorder } = await nodeSync([node1], [node1, node2], (s) => {
      s.cloud.balancers.clear();
      s.cloud.failWith('updateLoadBalancer', new Error('not found'));
    });
    expect(retry.size).toBe(0);
    expect(recorder.events).toEqual([]);
  });

  test('implemented elsewhere on update: no event, no retry', async () => {
    const { retry, recorder } = await nodeSync([node1], [node1, node2], (s) => s.cloud.failWith('updateLoadBalancer', new ImplementedElsewhereError()));
    expect(retry.size).toBe(0);
    expect(recorder.events).toEqual([]);
  });

  test('more than 20 hosts: the failure event names 20 and counts the rest', async () => {
    const many = Array.from({ length: 25 }, (_, i) => makeNode(`node-${String(i).padStart(2, '0')}`));
    const { recorder } = await nodeSync([], many, (s) => s.cloud.failWith('updateLoadBalancer', new Error('boom')));
    const message = recorder.events[0]?.message ?? '';
    expect(message).toContain('node-19 <5 more>]');
    expect(message).not.toContain('node-20');
    expect(message).toContain('total number of nodes: 25], error: boom');
  });

  test('metrics: one sync and one latency sample per updated load balancer, one latency sample per pass', async () => {
    const { registry, controller, cloud, nodes } = await nodeSync([node1], [node1, node2]);
    expect(await metricValue(registry, 'service_controller_loadbalancer_sync_total')).toBe(3);
    expect(await metricValue(registry, 'service_controller_update_loadbalancer_host_latency_seconds', '_count')).toBe(3);
    expect(await metricValue(registry, 'service_controller_nodesync_latency_seconds', '_count')).toBe(1);
    expect(await metricValue(registry, 'service_controller_nodesync_error_total')).toBe(0);
    // A failing pass: nodes unchanged attempts nothing; a new node makes three failed updates.
    cloud.failWith('updateLoadBalancer', new Error('x'));
    await controller.sync.syncNodes(1);
    expect(await metricValue(registry, 'service_controller_nodesync_error_total')).toBe(0);
    nodes.set(node3);
    await controller.sync.syncNodes(1);
    expect(await metricValue(registry, 'service_controller_nodesync_error_total')).toBe(3);
    expect(await metricValue(registry, 'service_controller_loadbalancer_sync_total')).toBe(6);
    expect(await metricValue(registry, 'service_controller_nodesync_latency_seconds', '_count')).toBe(3);
  });
});

describe('updateLoadBalancerHosts (upstream TestUpdateNodesInExternalLoadBalancer / TestNodeChangesInExternalLoadBalancer)', () => {
  const nodes = [makeNode('node1'), makeNode('node2'), makeNode('node3')];
  const cases: [string, (V1Service | undefined)[], number, string[]][] = [
    ['no services present', [], 1, []],
    ['services without external load balancers', [newService('s0', 'ClusterIP'), newService('s1', 'NodePort')], 2, []],
    ['one service with a load balancer', [newService('s0', 'LoadBalancer')], 3, ['s0: node1,node2,node3']],
    ['three services with load balancers', ['s0', 's1', 's2'].map((n) => newService(n, 'LoadBalancer')), 4, ['s0', 's1', 's2'].map((n) => `${n}: node1,node2,node3`)],
    ['two with and two without', [newService('s0', 'NodePort'), newService('s1', 'LoadBalancer'), newService('s3', 'LoadBalancer'), newService('s4', 'ClusterIP')], 5, ['s1: node1,node2,node3', 's3: node1,node2,node3']],
    ['one with and one missing', [newService('s0', 'LoadBalancer'), undefined], 6, ['s0: node1,node2,node3']],
    ['a foreign class', [newService('s0', 'LoadBalancer', withClass('other'))], 1, []],
  ];
  for (const [desc, services, workers, expected] of cases) {
    test(desc, async () => {
      const { controller, cloud } = setup({ nodes });
      const retry = await controller.sync.updateLoadBalancerHosts(services, workers);
      expect(retry.size).toBe(0);
      expect(updateCalls(cloud)).toEqual(expected);
    });
  }

  test('four services with only 2 workers: at most 2 updates at once', async () => {
    const { controller, cloud } = setup({ nodes });
    cloud.latencyMs = 5;
    const services = ['s0', 's1', 's3', 's4'].map((n) => newService(n, 'LoadBalancer'));
    await controller.sync.updateLoadBalancerHosts(services, 2);
    expect(updateCalls(cloud)).toHaveLength(4);
    expect(cloud.maxInFlight).toBe(2);
  });

  test('the node list cannot be read: every service is retried and counted as an error', async () => {
    const { controller, cloud, registry } = setup({
      nodes,
      isManagedNode: () => {
        throw new Error('random error');
      },
    });
    const services = ['s0', 's1', 's3', 's4'].map((n) => newService(n, 'LoadBalancer'));
    const retry = await controller.sync.updateLoadBalancerHosts(services, 3);
    expect(sorted([...retry])).toEqual(['default/s0', 'default/s1', 'default/s3', 'default/s4']);
    expect(cloud.updateCalls).toEqual([]);
    expect(await metricValue(registry, 'service_controller_nodesync_error_total')).toBe(4);
  });
});

test('a node sync racing a service sync never puts stale hosts back (upstream TestSlowNodeSync)', async () => {
  const node1 = makeNode('node1');
  const node2 = makeNode('node2');
  const node3 = makeNode('node3');
  const service1 = newService('service1', 'LoadBalancer');
  const service2 = newService('service2', 'LoadBalancer');
  let updateStarted!: () => void;
  const started = new Promise<void>((r) => (updateStarted = r));
  let releaseUpdate!: () => void;
  const released = new Promise<void>((r) => (releaseUpdate = r));
  let gate = false;
  const s = setup({
    nodes: [node1],
    services: [service1, service2],
    balancer: (fake) => ({
      ...fake,
      updateLoadBalancer: async (...args) => {
        if (gate) {
          updateStarted();
          await released;
        }
        return fake.updateLoadBalancer(...args);
      },
    }),
  });
  // Both load balancers know node1; node2 then joins.
  await s.controller.sync.syncService(key(service1));
  await s.controller.sync.syncService(key(service2));
  s.cloud.clearCalls();
  s.nodes.set(node2);
  gate = true;

  const nodeSync = s.controller.sync.syncNodes(1);
  await started; // service1's update (node1, node2) is under way
  s.nodes.set(node3);
  await s.controller.sync.syncService(key(service2)); // ensures service2 with node1..3
  releaseUpdate();
  expect((await nodeSync).size).toBe(0);

  // service2 is not updated again by the node sync: its hosts are already current.
  expect(s.cloud.updateCalls.map((c) => [c.service.metadata!.name, sorted(c.nodeNames)])).toEqual([['service1', ['node1', 'node2']]]);
  expect(s.cloud.ensureCalls.map((c) => [c.service.metadata!.name, sorted(c.nodeNames)])).toEqual([['service2', ['node1', 'node2', 'node3']]]);
});

// ---- events from the informers, queues and workers ----

describe('informer events', () => {
  /** Takes every queued item and marks it done, so the next event's effect shows alone. */
  async function drain(s: Setup) {
    for (const q of [s.controller.serviceQueue, s.controller.nodeQueue]) {
      while (q.len() > 0) {
        const r = await q.get();
        if (!r.shutdown) q.done(r.item);
      }
    }
  }

  test('service adds: load balancers and cleanups are queued, others not', () => {
    const s = setup();
    s.services.set(newService('lb', 'LoadBalancer'));
    s.services.set(newService('cluster-ip', 'ClusterIP'));
    s.services.set(newService('foreign', 'LoadBalancer', withClass('other')));
    s.services.set(newService('leftover', 'ClusterIP', withFinalizer));
    expect(s.controller.serviceQueue.len()).toBe(2);
  });

  test('service updates: only what the load balancer depends on, or cleanup', async () => {
    const svc = newService('lb', 'LoadBalancer');
    const s = setup({ services: [svc] });
    await drain(s);
    let current = svc;
    const update = async (...tweaks: ServiceTweak[]) => {
      current = bump(current, ...tweaks);
      s.services.set(current);
      const queued = s.controller.serviceQueue.len();
      await drain(s);
      return queued;
    };
    expect(await update((x) => (x.metadata!.labels = { a: 'b' }))).toBe(0);
    expect(await update(withIngress('1.2.3.4'))).toBe(0);
    expect(await update((x) => (x.spec!.loadBalancerIP = '10.0.0.1'))).toBe(1);
    expect(await update(withFinalizer)).toBe(0);
    expect(await update(deleting)).toBe(1);
  });

  test('service deletes are not handled: the deletion timestamp already was', async () => {
    const svc = newService('lb', 'LoadBalancer');
    const s = setup({ services: [svc] });
    await drain(s);
    s.services.remove(svc);
    expect(s.controller.serviceQueue.len()).toBe(0);
  });

  test('node adds and deletes queue a node sync; only exclusion, providerID or ownership updates do', async () => {
    const unmanaged = new Set<string>();
    const node = makeNode('n1');
    const s = setup({ isManagedNode: (n) => !unmanaged.has(n.metadata!.resourceVersion!) });
    s.nodes.set(node);
    expect(s.controller.nodeQueue.len()).toBe(1);
    await drain(s);
    let version = 1;
    const update = async (...tweaks: NodeTweak[]) => {
      const n = makeNode('n1', ...tweaks);
      n.metadata!.resourceVersion = String(++version);
      s.nodes.set(n);
      const queued = s.controller.nodeQueue.len();
      await drain(s);
      return queued;
    };
    expect(await update(notReady)).toBe(0);
    expect(await update(tainted('other'))).toBe(0);
    expect(await update(tainted(TO_BE_DELETED_TAINT))).toBe(0);
    expect(await update(markedDeleted)).toBe(0);
    expect(await update(excluded())).toBe(1);
    expect(await update(excluded())).toBe(0);
    expect(await update(excluded(), withProviderID('other'))).toBe(1);
    unmanaged.add(String(version + 1)); // the next version is no longer ours
    expect(await update(excluded(), withProviderID('other'))).toBe(1);
    s.nodes.remove(node);
    expect(s.controller.nodeQueue.len()).toBe(1);
  });
});

describe('service worker requeues (upstream TestServiceQueueDelay)', () => {
  async function processOnce(prepare: (s: Setup) => void) {
    const svc = newService('external-balancer', 'LoadBalancer');
    const s = setup({ nodes: [makeNode('n1')], services: [svc] });
    prepare(s);
    expect(s.controller.serviceQueue.len()).toBe(1);
    expect(await s.controller.processNextServiceItem()).toBe(true);
    return { ...s, k: key(svc) };
  }

  test('success: forgotten, not requeued', async () => {
    const { controller, k, clock } = await processOnce(() => {});
    expect(controller.serviceQueue.numRequeues(k)).toBe(0);
    clock.advance(600_000);
    expect(controller.serviceQueue.len()).toBe(0);
  });

  test('an error: requeued with backoff, after 5s', async () => {
    const { controller, k, clock } = await processOnce((s) => s.cloud.failWith('ensureLoadBalancer', new Error('something went wrong')));
    expect(controller.serviceQueue.numRequeues(k)).toBe(1);
    clock.advance(4_999);
    expect(controller.serviceQueue.len()).toBe(0);
    clock.advance(1);
    expect(controller.serviceQueue.len()).toBe(1);
  });

  test('retry after 42s: requeued after exactly 42s, without backoff', async () => {
    const { controller, k, clock, recorder } = await processOnce((s) => s.cloud.failWith('ensureLoadBalancer', new RetryAfterError(42, 'LB create in progress')));
    expect(controller.serviceQueue.numRequeues(k)).toBe(0);
    expect(recorder.events.at(-1)?.reason).toBe('SyncLoadBalancerFailed');
    clock.advance(41_999);
    expect(controller.serviceQueue.len()).toBe(0);
    clock.advance(1);
    expect(controller.serviceQueue.len()).toBe(1);
  });

  test('retry after from the deletion path is honoured too', async () => {
    const svc = newService('svc', 'LoadBalancer', withFinalizer, deleting);
    const s = setup({ services: [svc] });
    await existingBalancer(s.cloud, svc);
    s.cloud.failWith('ensureLoadBalancerDeleted', new RetryAfterError(7));
    await s.controller.processNextServiceItem();
    s.clock.advance(6_999);
    expect(s.controller.serviceQueue.len()).toBe(0);
    s.clock.advance(1);
    expect(s.controller.serviceQueue.len()).toBe(1);
  });

  test('backoff: 5s doubling to 300s', () => {
    const { controller } = setup();
    const delays = Array.from({ length: 9 }, () => controller.serviceQueue.rateLimiter.when('x'));
    expect(delays).toEqual([5_000, 10_000, 20_000, 40_000, 80_000, 160_000, 300_000, 300_000, 300_000]);
  });

  test('a node-sync turn sends failed services to the service queue', async () => {
    const svc = newService('svc', 'LoadBalancer');
    const s = setup({ nodes: [makeNode('n1')], services: [svc] });
    await s.controller.processNextServiceItem();
    s.cloud.failWith('updateLoadBalancer', new Error('down'));
    s.nodes.set(makeNode('n2'));
    expect(s.controller.nodeQueue.len()).toBe(1); // n1 from the start, n2 now: one pass serves both
    expect(s.controller.serviceQueue.len()).toBe(0);
    expect(await s.controller.processNextNodeItem()).toBe(true);
    expect(s.controller.serviceQueue.len()).toBe(1);
    expect(s.controller.nodeQueue.numRequeues(NODE_SYNC_KEY)).toBe(0);
  });
});

describe('run', () => {
  test('workers sync queued services and node changes until the signal aborts', async () => {
    const svc = newService('svc', 'LoadBalancer');
    const s = setup({ nodes: [makeNode('n1')], services: [svc], workers: 2 });
    const abort = new AbortController();
    const running = s.controller.run(abort.signal);
    try {
      await eventually('both status patches', () => s.transport.patches().length === 2, 10_000);
      expect(s.cloud.ensureCalls.map((c) => c.nodeNames)).toEqual([['n1']]);
      s.nodes.set(makeNode('n2'));
      await eventually('an update with both nodes', () => s.cloud.updateCalls.some((c) => sorted(c.nodeNames).join() === 'n1,n2'), 10_000);
    } finally {
      abort.abort();
      await running;
    }
    expect(s.controller.serviceQueue.shuttingDown()).toBe(true);
    expect(s.controller.nodeQueue.shuttingDown()).toBe(true);
  });

  test('a reload that changes the owned classes syncs just the changed classes: new ones get balancers, dropped ones are cleaned up', async () => {
    const gold = newService('gold', 'LoadBalancer', withClass('example.com/gold'));
    const silver = newService('silver', 'LoadBalancer', withClass('example.com/silver'));
    const other = newService('other', 'LoadBalancer', withClass('example.com/other'));
    const plain = newService('plain', 'LoadBalancer');
    const s = setup({ nodes: [makeNode('n1')], services: [gold, silver, other, plain], classes: ['example.com/silver'] });
    const abort = new AbortController();
    const running = s.controller.run(abort.signal);
    try {
      await eventually('two ensures', () => s.cloud.ensureCalls.length === 2, 10_000);
      expect(s.cloud.ensureCalls.map((c) => c.service.metadata!.name).sort()).toEqual(['plain', 'silver']);
      // silver now holds our finalizer, as the API server would show it.
      s.services.set(bump(silver, withFinalizer));
      await eventually('the service queue drained', () => s.controller.serviceQueue.len() === 0, 10_000);
      s.cloud.clearCalls();

      s.cloud.setLoadBalancerClasses(['example.com/gold']);
      await eventually('one ensure and one delete', () => s.cloud.ensureCalls.length === 1 && s.cloud.deleteCalls.length === 1, 10_000);
      expect(s.cloud.ensureCalls[0]!.service.metadata!.name).toBe('gold');
      expect(s.cloud.deleteCalls[0]!.metadata!.name).toBe('silver');
      // The same classes again: nothing is queued (the notice is handled synchronously).
      const add = spyOn(s.controller.serviceQueue, 'add');
      s.cloud.setLoadBalancerClasses(['example.com/gold']);
      expect(add).not.toHaveBeenCalled();
      add.mockRestore();
      expect(s.cloud.ensureCalls.map((c) => c.service.metadata!.name)).not.toContain('other');
    } finally {
      abort.abort();
      await running;
    }
  });

  test('a provider without load balancers is refused', () => {
    const ctx = { cloud: new FakeCloud({ loadBalancer: false }) } as unknown as ControllerContext;
    expect(() => new ServiceController(ctx, { workers: 1 })).toThrow('does not support external load balancers');
  });
});

