import { afterEach, describe, expect, test } from 'bun:test';
import type { V1Node } from '@kubernetes/client-node';
import type { Registry } from 'prom-client';
import { KubeApiError } from '../../kube/errors.ts';
import type { KubeRequest } from '../../kube/transport.ts';
import { parsePrefix } from '../../net/ip.ts';
import { controllerContext, HandFedInformer, RecordingTransport } from '../../../test/fakes/controller-context.ts';
import { RecordingEventRecorder } from '../../../test/fakes/event-recorder.ts';
import { FakeCloud, fakeMetadata } from '../../../test/fakes/fake-cloud.ts';
import { eventually } from '../../../test/harness/eventually.ts';
import { NodeIPAMController } from './controller.ts';
import type { CIDRAllocatorType } from './options.ts';

/**
 * The controller's own work on a hand-fed informer: which writes it makes (a patch of both pod
 * CIDR fields, the node's uid tested; the CloudAllocator's record first), what it reports (one
 * Warning event and one count per problem, not one per node update), and what wakes a waiting node.
 */

const stops: AbortController[] = [];
afterEach(() => {
  for (const s of stops.splice(0)) s.abort();
});

/** Records every request; a written ConfigMap is answered with itself, as the API server does. */
class EchoingTransport extends RecordingTransport {
  private configMap?: { data: Record<string, string> };
  override async request<T>(req: KubeRequest): Promise<T> {
    const answer = await super.request<T>(req);
    if (!req.path.includes('/configmaps') || req.method === 'GET') return answer;
    const written = req.body as { data: Record<string, string> };
    this.configMap = req.method === 'POST' ? written : { ...this.configMap, data: { ...this.configMap?.data, ...written.data } };
    return this.configMap as T;
  }
}

function cidrsOf(patch: unknown): unknown {
  const ops = patch as { op: string; path: string; value: unknown }[];
  expect(ops[0]).toMatchObject({ op: 'test', path: '/metadata/uid' });
  return { spec: Object.fromEntries(ops.slice(1).map((o) => [o.path.slice('/spec/'.length), o.value])) };
}

function node(name: string, spec: V1Node['spec'] = {}): V1Node {
  return { metadata: { name, uid: `uid-${name}` }, spec };
}

function setup(allocatorType: CIDRAllocatorType, cluster = '10.244.0.0/30', mask = 31, before: V1Node[] = []) {
  const informer = new HandFedInformer<V1Node>();
  for (const n of before) informer.set(n);
  const transport = new EchoingTransport();
  const recorder = new RecordingEventRecorder();
  const cloud = new FakeCloud();
  const ctx = controllerContext({ nodeInformer: informer.asInformer(), transport, recorder, cloud });
  // The record: a ConfigMap that does not exist yet; writes answered with what was sent.
  transport.fail = (req: KubeRequest) => (req.method === 'GET' && req.path.includes('/configmaps/') ? new KubeApiError(404, 'NotFound', 'none', 'GET', req.path) : undefined);
  const controller = new NodeIPAMController(ctx, {
    allocatorType,
    clusterCIDRs: [parsePrefix(cluster)!],
    maskSizes: [mask],
    serviceCIDRs: [],
    recordNamespace: 'kube-system',
    recordName: 'ccm-node-ipam',
    workers: 1,
  });
  const stop = new AbortController();
  stops.push(stop);
  const running = controller.run(stop.signal);
  // A node's pod CIDRs as its JSON patch writes them, after the uid test.
  const patches = () => transport.requests.filter((r) => r.method === 'PATCH' && r.path.startsWith('/api/v1/nodes/')).map((r) => [r.path, cidrsOf(r.body)]);
  return { informer, transport, recorder, cloud, registry: ctx.registry, running, patches };
}

async function metric(registry: Registry, name: string, labels: Record<string, string>): Promise<number | undefined> {
  const found = (await registry.getMetricsAsJSON()).find((m) => m.name === name);
  return found?.values.find((v) => Object.entries(labels).every(([k, l]) => v.labels[k] === l))?.value;
}

describe('RangeAllocator', () => {
  test('a node without CIDRs gets one by a patch of podCIDR and podCIDRs (the node\'s uid tested); one with CIDRs is left alone', async () => {
    const t = setup('RangeAllocator');
    t.informer.set(node('held', { podCIDRs: ['10.244.0.0/31'] }));
    t.informer.set(node('new'));
    await eventually('the patch', () => t.patches().length === 1);
    expect(t.patches()).toEqual([['/api/v1/nodes/new', { spec: { podCIDR: '10.244.0.2/31', podCIDRs: ['10.244.0.2/31'] } }]]);
    expect(await metric(t.registry, 'node_ipam_controller_cidrset_cidrs_allocations_total', { clusterCIDR: '10.244.0.0/30' })).toBe(1);
    expect(await metric(t.registry, 'node_ipam_controller_cidrset_usage_cidrs', { clusterCIDR: '10.244.0.0/30' })).toBe(1);
  });

  test('a node changed by another writer before its own CIDR write reached the informer is not patched (nor counted) twice', async () => {
    // Seen with real kubelets (test/e2e/real-cluster.test.ts): the cloud node controller's write
    // of a just-registered node comes in right after the CIDR patch, still without the CIDRs.
    const t = setup('RangeAllocator');
    t.informer.set(node('new'));
    await eventually('the patch', () => t.patches().length === 1);
    t.informer.set({ ...node('new'), metadata: { name: 'new', uid: 'uid-new', labels: { initialised: 'yes' } } });
    await Bun.sleep(100);
    expect(t.patches()).toHaveLength(1);
    expect(await metric(t.registry, 'node_ipam_controller_cidrset_cidrs_allocations_total', { clusterCIDR: '10.244.0.0/30' })).toBe(1);
    // A new Node by that name (another uid) is a new node: it gets its CIDRs.
    t.informer.remove(node('new'));
    t.informer.set({ ...node('new'), metadata: { name: 'new', uid: 'uid-new-2' } });
    await eventually('the new node\'s patch', () => t.patches().length === 2);
  });

  test('exhausted: one Warning event and one count, however often the node changes; a deletion frees a CIDR for it', async () => {
    const t = setup('RangeAllocator');
    t.informer.set(node('a', { podCIDRs: ['10.244.0.0/31'] }));
    t.informer.set(node('b', { podCIDRs: ['10.244.0.2/31'] }));
    t.informer.set(node('c'));
    await eventually('the Warning', () => t.recorder.events.length === 1);
    t.informer.set({ ...node('c'), metadata: { name: 'c', uid: 'uid-c', labels: { changed: 'yes' } } });
    await Bun.sleep(50);
    expect(t.recorder.events).toEqual([{
      kind: 'Node', namespace: undefined, name: 'c', type: 'Warning', reason: 'CIDRNotAvailable',
      message: 'No free /31 left in --cluster-cidr 10.244.0.0/30 for node c (2 of 2 held)',
    }]);
    expect(await metric(t.registry, 'edge_ccm_node_ipam_problems_total', { reason: 'CIDRNotAvailable' })).toBe(1);
    t.informer.remove(node('a', { podCIDRs: ['10.244.0.0/31'] }));
    await eventually('c given a\'s CIDR', () => t.patches().some(([path]) => path === '/api/v1/nodes/c'));
    expect(t.patches()).toEqual([['/api/v1/nodes/c', { spec: { podCIDR: '10.244.0.0/31', podCIDRs: ['10.244.0.0/31'] } }]]);
  });

  test('CIDRs outside the cluster CIDR, or held twice: a Warning event each, nothing written', async () => {
    const t = setup('RangeAllocator');
    t.informer.set(node('far', { podCIDRs: ['192.168.7.0/24'] }));
    t.informer.set(node('one', { podCIDRs: ['10.244.0.0/31'] }));
    t.informer.set(node('two', { podCIDRs: ['10.244.0.0/31'] }));
    await eventually('two Warnings', () => t.recorder.events.length === 2);
    expect(t.recorder.events.map((e) => [e.name, e.reason])).toEqual([['far', 'CIDROutsideClusterCIDR'], ['two', 'CIDRConflict']]);
    expect(t.recorder.events[1]!.message).toBe('The podCIDR 10.244.0.0/31 of node two overlaps CIDRs held by node one');
    expect(t.patches()).toEqual([]);
  });
});

describe('CloudAllocator', () => {
  test('waits for the machine (spec.providerID); the pin, written to the record before the node', async () => {
    const t = setup('CloudAllocator', '10.244.0.0/24', 26);
    t.cloud.setNode('n1', { metadata: fakeMetadata('n1', { podCIDRs: ['10.244.0.128/26'] }) });
    t.informer.set(node('n1'));
    await Bun.sleep(50);
    expect(t.patches()).toEqual([]);
    t.informer.set(node('n1', { providerID: 'fake://n1' }));
    await eventually('the patch', () => t.patches().length === 1);
    const writes = t.transport.requests.filter((r) => r.method !== 'GET').map((r) => `${r.method} ${r.path}`);
    expect(writes).toEqual(['POST /api/v1/namespaces/kube-system/configmaps', 'PATCH /api/v1/nodes/n1']);
    expect(t.transport.requests.find((r) => r.method === 'POST')!.body).toMatchObject({ metadata: { name: 'ccm-node-ipam' }, data: { fake_3A_2F_2Fn1: '10.244.0.128/26' } });
    expect(t.patches()[0]![1]).toEqual({ spec: { podCIDR: '10.244.0.128/26', podCIDRs: ['10.244.0.128/26'] } });
  });

  test('a pin of the wrong size: a Warning event naming the fault, no CIDRs; fixed in the inventory, given', async () => {
    const t = setup('CloudAllocator', '10.244.0.0/24', 26);
    t.cloud.setNode('n1', { metadata: fakeMetadata('n1', { podCIDRs: ['10.244.0.0/25'] }) });
    t.informer.set(node('n1', { providerID: 'fake://n1' }));
    await eventually('the Warning', () => t.recorder.events.length === 1);
    expect(t.recorder.events[0]).toMatchObject({ reason: 'InvalidPodCIDRPin', message: 'The inventory pins podCIDRs 10.244.0.0/25 for node n1: 10.244.0.0/25 is a /25, and nodes get a /26 of 10.244.0.0/24' });
    expect(t.patches()).toEqual([]);
    t.cloud.setNode('n1', { metadata: fakeMetadata('n1', { podCIDRs: ['10.244.0.64/26'] }) });
    t.cloud.notifyChange();
    await eventually('the patch', () => t.patches().length === 1);
    expect(t.patches()[0]![1]).toEqual({ spec: { podCIDR: '10.244.0.64/26', podCIDRs: ['10.244.0.64/26'] } });
  });

  test('a second Node of the same machine waits (CIDRConflict) while the first holds its CIDRs, and gets them as soon as the first is deleted', async () => {
    const t = setup('CloudAllocator', '10.244.0.0/24', 26);
    t.cloud.setNode('old', { metadata: fakeMetadata('old') });
    t.informer.set(node('old', { providerID: 'fake://m1', podCIDRs: ['10.244.0.64/26'] }));
    await eventually('the record of the machine', () => t.transport.requests.some((r) => r.method === 'POST'));
    t.informer.set(node('new', { providerID: 'fake://m1' }));
    await eventually('the Warning', () => t.recorder.events.some((e) => e.name === 'new' && e.reason === 'CIDRConflict'));
    expect(t.patches()).toEqual([]);
    // No further update of 'new' (a real kubelet with an unchanged status writes every few minutes): the deletion alone wakes it.
    t.informer.remove(node('old', { providerID: 'fake://m1', podCIDRs: ['10.244.0.64/26'] }));
    await eventually('the machine\'s CIDRs on the new Node', () => t.patches().length === 1);
    expect(t.patches()[0]).toEqual(['/api/v1/nodes/new', { spec: { podCIDR: '10.244.0.64/26', podCIDRs: ['10.244.0.64/26'] } }]);
  });

  test('the nodes waiting at the start of a term are recorded in one write, then patched', async () => {
    const waiting = ['w1', 'w2', 'w3'].map((name) => node(name, { providerID: `fake://${name}` }));
    const t = setup('CloudAllocator', '10.244.0.0/24', 26, waiting);
    await eventually('three patches', () => t.patches().length === 3);
    const writes = t.transport.requests.filter((r) => r.method !== 'GET').map((r) => `${r.method} ${r.path}`);
    expect(writes[0]).toBe('POST /api/v1/namespaces/kube-system/configmaps');
    expect(writes.filter((w) => w.includes('configmaps'))).toHaveLength(1);
    expect(Object.keys((t.transport.requests.find((r) => r.method === 'POST')!.body as { data: object }).data)).toHaveLength(3);
  });

  test('taking over from another allocator: the nodes\' CIDRs recorded as their machines\' in one write, no node written', async () => {
    const nodes = ['k1', 'k2'].map((name, i) => node(name, { providerID: `fake://${name}`, podCIDRs: [`10.244.0.${i * 64}/26`] }));
    const t = setup('CloudAllocator', '10.244.0.0/24', 26, [...nodes, node('not-yet', { podCIDRs: ['10.244.0.128/26'] })]);
    await eventually('the record', () => t.transport.requests.some((r) => r.method === 'POST'));
    await Bun.sleep(50);
    expect(t.transport.requests.find((r) => r.method === 'POST')!.body).toMatchObject({ data: { fake_3A_2F_2Fk1: '10.244.0.0/26', fake_3A_2F_2Fk2: '10.244.0.64/26' } });
    expect(t.transport.requests.filter((r) => r.method !== 'GET').map((r) => r.method)).toEqual(['POST']);
  });
});
