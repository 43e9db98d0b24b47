import { describe, expect, test } from 'bun:test';
import type { V1Node, V1NodeAddress } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import { CloudNodeController, EVENT_PROVIDED_NODE_IP_INVALID, type InitializationPatch, type CloudNodeWriter } from './index.ts';
import { KubeApiError } from '../../kube/errors.ts';
import type { Informer } from '../../kube/informer/index.ts';
import { FakeCloud, fakeMetadata } from '../../../test/fakes/fake-cloud.ts';
import { EXTERNAL, HOSTNAME, INTERNAL, makeNode, untainted } from '../../../test/fakes/node-fixtures.ts';
import { RecordingEventRecorder } from '../../../test/fakes/event-recorder.ts';
import { controllerContext } from '../../../test/fakes/controller-context.ts';

// The controller's flow around the pure decisions: which provider calls and which writes happen,
// in which order. The writes themselves are checked against a real API server in
// test/integration/node-controller.test.ts; here a recording writer stands in.

type Write =
  | { kind: 'initialize'; name: string; patch: InitializationPatch }
  | { kind: 'labels'; name: string; labels: Record<string, string> }
  | { kind: 'addresses'; name: string; addresses: V1NodeAddress[] };

class RecordingWriter implements CloudNodeWriter {
  readonly writes: Write[] = [];
  /** Thrown by the next initialize calls, in order. */
  initializeErrors: Error[] = [];
  /** What get() returns (the node re-read after a conflict). */
  fresh?: V1Node;

  async get(): Promise<V1Node> {
    if (!this.fresh) throw new Error('no fresh node configured');
    return this.fresh;
  }

  async initialize(name: string, patch: InitializationPatch): Promise<V1Node> {
    this.writes.push({ kind: 'initialize', name, patch });
    const error = this.initializeErrors.shift();
    if (error) throw error;
    // The answer only needs what the controller reads next: the node without its taint.
    return untainted(this.store.get(name)!);
  }

  async setLabels(name: string, labels: Record<string, string>): Promise<V1Node> {
    this.writes.push({ kind: 'labels', name, labels });
    return this.store.get(name)!;
  }

  /** Thrown by the next setAddresses calls, in order. */
  addressErrors: Error[] = [];
  /** The resourceVersion precondition of each address write. */
  readonly addressVersions: (string | undefined)[] = [];

  async setAddresses(name: string, resourceVersion: string | undefined, addresses: V1NodeAddress[]): Promise<V1Node> {
    this.writes.push({ kind: 'addresses', name, addresses });
    this.addressVersions.push(resourceVersion);
    const error = this.addressErrors.shift();
    if (error) throw error;
    return this.store.get(name)!;
  }

  constructor(private readonly store: Map<string, V1Node>) {}
}

interface Setup {
  controller: CloudNodeController;
  cloud: FakeCloud;
  writer: RecordingWriter;
  recorder: RecordingEventRecorder;
  registry: Registry;
}

function setup(nodes: V1Node[], opts: { cloud?: FakeCloud; workers?: number; isManagedNode?: (n: V1Node) => boolean } = {}): Setup {
  const store = new Map(nodes.map((n) => [n.metadata!.name!, n]));
  // Only the informer's store is read by syncNode/updateNodeStatus; handlers are not exercised here.
  const nodeInformer = {
    store: { get: (key: string) => store.get(key), list: () => [...store.values()] },
    addHandlers: () => () => {},
    waitForSync: async () => true,
  } as unknown as Informer<V1Node>;
  const cloud = opts.cloud ?? new FakeCloud();
  const writer = new RecordingWriter(store);
  const recorder = new RecordingEventRecorder();
  const registry = new Registry();
  const ctx = controllerContext({ recorder, registry, cloud, nodeInformer, isManagedNode: opts.isManagedNode ?? (() => true) });
  const controller = new CloudNodeController(ctx, { workers: opts.workers ?? 1, nodeStatusUpdateFrequencyMs: 1000 }, { writer });
  return { controller, cloud, writer, recorder, registry };
}

const ADDRESSES = [HOSTNAME('node0.cloud.internal'), INTERNAL('10.0.0.1'), EXTERNAL('132.143.154.163')];

describe('syncNode', () => {
  test('tainted node: one metadata call, the node write, then the address write, then Synced', async () => {
    const s = setup([makeNode({ addresses: [HOSTNAME('nodeoverriden')] })]);
    s.cloud.setNode('node0', { metadata: fakeMetadata('node0', { providerID: 'fake://12345', nodeAddresses: ADDRESSES }) });
    await s.controller.syncNode('node0');
    expect(s.cloud.calls).toEqual(['instanceMetadata']);
    expect(s.writer.writes.map((w) => w.kind)).toEqual(['initialize', 'addresses']);
    expect(s.writer.writes[0]).toMatchObject({ patch: { spec: { providerID: 'fake://12345', taints: [] } } });
    expect(s.writer.writes[1]).toEqual({ kind: 'addresses', name: 'node0', addresses: ADDRESSES });
    expect(s.recorder.events).toEqual([{ kind: 'Node', name: 'node0', namespace: undefined, type: 'Normal', reason: 'Synced', message: 'Node synced successfully' }]);
  });

  test('both delay histograms get one observation per initialised node', async () => {
    const s = setup([makeNode()]);
    s.cloud.setNode('node0', { metadata: fakeMetadata('node0') });
    await s.controller.syncNode('node0');
    const text = await s.registry.metrics();
    expect(text).toContain('node_controller_cloud_provider_taint_removal_delay_seconds_count 1');
    expect(text).toContain('node_controller_initial_node_sync_delay_seconds_count 1');
  });

  test('untainted node gets no cloud call; its GA labels are reconciled from the beta ones', async () => {
    const s = setup([makeNode({ tainted: false, labels: { 'failure-domain.beta.kubernetes.io/zone': 'z1' } })]);
    await s.controller.syncNode('node0');
    expect(s.cloud.calls).toEqual([]);
    expect(s.writer.writes).toEqual([{ kind: 'labels', name: 'node0', labels: { 'topology.kubernetes.io/zone': 'z1' } }]);
    expect(s.recorder.events).toEqual([]);
  });

  test('untainted node with consistent labels: no call, no write', async () => {
    const s = setup([makeNode({ tainted: false })]);
    await s.controller.syncNode('node0');
    expect(s.cloud.calls).toEqual([]);
    expect(s.writer.writes).toEqual([]);
  });

  test('nil metadata: no write, the taint stays, no error (tried again later with backoff: test/integration/node-controller.test.ts)', async () => {
    const s = setup([makeNode({ providedNodeIP: '10.0.0.1', providerID: 'node0.aws.12345' })]);
    await s.controller.syncNode('node0');
    expect(s.cloud.count('instanceMetadata')).toBe(1);
    expect(s.writer.writes).toEqual([]);
    expect(s.recorder.events).toEqual([]);
  });

  test('provider error: an error to retry, no write', async () => {
    const s = setup([makeNode()]);
    s.cloud.failWith('instanceMetadata', new Error('metadata error'));
    await expect(s.controller.syncNode('node0')).rejects.toThrow('failed to get instance metadata for node node0: metadata error');
    expect(s.writer.writes).toEqual([]);
  });

  test('no providerID from provider nor spec: an error to retry, no write', async () => {
    const s = setup([makeNode()]);
    s.cloud.setNode('node0', { metadata: fakeMetadata('node0', { providerID: '' }) });
    await expect(s.controller.syncNode('node0')).rejects.toThrow('does not set node provider ID');
    expect(s.writer.writes).toEqual([]);
  });

  test('provided node IP not among the provider addresses: Warning event, error, no write', async () => {
    const s = setup([makeNode({ providedNodeIP: '10.0.0.2' })]);
    s.cloud.setNode('node0', { metadata: fakeMetadata('node0', { nodeAddresses: [INTERNAL('10.0.0.1')] }) });
    await expect(s.controller.syncNode('node0')).rejects.toThrow('is not valid');
    expect(s.writer.writes).toEqual([]);
    expect(s.recorder.events).toHaveLength(1);
    expect(s.recorder.events[0]).toMatchObject({ type: 'Warning', reason: EVENT_PROVIDED_NODE_IP_INVALID, name: 'node0' });
    expect(s.recorder.events[0]!.message).toContain('10.0.0.2');
  });

  test('a conflict re-reads the node and patches again, with no second provider call', async () => {
    const s = setup([makeNode({ resourceVersion: '1' })]);
    s.cloud.setNode('node0', { metadata: fakeMetadata('node0') });
    s.writer.initializeErrors = [new KubeApiError(409, 'Conflict', 'the object has been modified', 'PATCH', '/api/v1/nodes/node0')];
    s.writer.fresh = makeNode({ resourceVersion: '2', labels: { added: 'meanwhile' } });
    await s.controller.syncNode('node0');
    const patches = s.writer.writes.filter((w) => w.kind === 'initialize');
    expect(patches.map((w) => w.patch.metadata.resourceVersion)).toEqual(['1', '2']);
    expect(s.cloud.count('instanceMetadata')).toBe(1);
  });

  test('a node initialised by someone else meanwhile is left alone after the conflict', async () => {
    const s = setup([makeNode()]);
    s.cloud.setNode('node0', { metadata: fakeMetadata('node0') });
    s.writer.initializeErrors = [new KubeApiError(409, 'Conflict', 'modified', 'PATCH', '/api/v1/nodes/node0')];
    s.writer.fresh = makeNode({ tainted: false, resourceVersion: '2' });
    await s.controller.syncNode('node0');
    expect(s.writer.writes.map((w) => w.kind)).toEqual(['initialize']);
    expect(s.recorder.events).toEqual([]);
  });

  test('unmanaged and unknown nodes are not touched', async () => {
    const s = setup([makeNode()], { isManagedNode: () => false });
    await s.controller.syncNode('node0');
    await s.controller.syncNode('missing');
    expect(s.cloud.calls).toEqual([]);
    expect(s.writer.writes).toEqual([]);
  });
});

describe('updateNodeStatus (periodic pass)', () => {
  for (const workers of [1, 5, 10, 30]) {
    test(`100 nodes with ${workers} workers: exactly one metadata call each, at most ${workers} at once`, async () => {
      const nodes = Array.from({ length: 100 }, (_, i) => makeNode({ name: `node0${i}`, tainted: false }));
      const cloud = new FakeCloud({ latencyMs: 2 });
      cloud.defaults.metadata = (node) => fakeMetadata(node.metadata!.name!, { nodeAddresses: ADDRESSES });
      const s = setup(nodes, { cloud, workers });
      await s.controller.updateNodeStatus();
      expect(cloud.count('instanceMetadata')).toBe(100);
      expect(new Set(cloud.callLog.map((c) => c.target)).size).toBe(100);
      expect(cloud.maxInFlight).toBe(workers);
      expect(s.writer.writes.filter((w) => w.kind === 'addresses')).toHaveLength(100);
    });
  }

  test('tainted and unmanaged nodes get no call; unchanged addresses no write', async () => {
    const nodes = [
      makeNode({ name: 'tainted' }),
      makeNode({ name: 'foreign', tainted: false }),
      makeNode({ name: 'same', tainted: false, addresses: ADDRESSES }),
      makeNode({ name: 'changed', tainted: false, addresses: [INTERNAL('10.9.9.9')] }),
    ];
    const cloud = new FakeCloud();
    cloud.defaults.metadata = (node) => fakeMetadata(node.metadata!.name!, { nodeAddresses: ADDRESSES });
    const s = setup(nodes, { cloud, isManagedNode: (n) => n.metadata?.name !== 'foreign' });
    await s.controller.updateNodeStatus();
    expect(cloud.callLog.map((c) => c.target).sort()).toEqual(['changed', 'same']);
    expect(s.writer.writes).toEqual([{ kind: 'addresses', name: 'changed', addresses: ADDRESSES }]);
  });

  test('an address write carries the resourceVersion read; on a conflict the node is read again and the list recomputed with what the kubelet added', async () => {
    const cloud = new FakeCloud();
    cloud.defaults.metadata = (node) => fakeMetadata(node.metadata!.name!, { nodeAddresses: [INTERNAL('10.0.0.1')] });
    const s = setup([makeNode({ tainted: false, resourceVersion: '7' })], { cloud });
    s.writer.addressErrors = [new KubeApiError(409, 'Conflict', 'the object has been modified', 'PATCH', '/api/v1/nodes/node0/status')];
    s.writer.fresh = makeNode({ tainted: false, resourceVersion: '8', addresses: [HOSTNAME('node0')] }); // the kubelet posted meanwhile
    await s.controller.updateNodeStatus();
    expect(s.writer.writes).toEqual([
      { kind: 'addresses', name: 'node0', addresses: [INTERNAL('10.0.0.1')] },
      { kind: 'addresses', name: 'node0', addresses: [INTERNAL('10.0.0.1'), HOSTNAME('node0')] },
    ]);
    expect(s.writer.addressVersions).toEqual(['7', '8']);
    expect(cloud.count('instanceMetadata')).toBe(1);
  });

  test('a provider error for one node does not stop the pass', async () => {
    const nodes = [makeNode({ name: 'a', tainted: false }), makeNode({ name: 'b', tainted: false })];
    const cloud = new FakeCloud().failWith('instanceMetadata', new Error('down'), { target: 'a' });
    cloud.defaults.metadata = (node) => fakeMetadata(node.metadata!.name!, { nodeAddresses: ADDRESSES });
    const s = setup(nodes, { cloud });
    await s.controller.updateNodeStatus();
    expect(s.writer.writes.map((w) => w.name)).toEqual(['b']);
  });
});

test('a provider without instances cannot build the controller', () => {
  expect(() => setup([], { cloud: new FakeCloud({ instances: false }) })).toThrow('does not support instances');
});
