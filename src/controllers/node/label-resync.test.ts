import { describe, expect, test } from 'bun:test';
import type { V1Node, V1NodeAddress } from '@kubernetes/client-node';
import type { InstanceMetadata } from '../../cloud/types.ts';
import {
  CLOUD_LABELS_ANNOTATION,
  CloudNodeController,
  ResyncTrigger,
  planInitialization,
  planLabelResync,
  trackedCloudLabelKeys,
  type CloudLabelsPatch,
  type InitializationPatch,
  type NodeLabelWriter,
  type CloudNodeWriter,
} from './index.ts';
import { KubeApiError } from '../../kube/errors.ts';
import type { Informer } from '../../kube/informer/index.ts';
import { silentLogger } from '../../log.ts';
import { createStaticProvider } from '../../../providers/static/index.ts';
import { FakeCloud, fakeMetadata } from '../../../test/fakes/fake-cloud.ts';
import { makeNode, untainted } from '../../../test/fakes/node-fixtures.ts';
import { controllerContext } from '../../../test/fakes/controller-context.ts';
import { eventually } from '../../../test/harness/eventually.ts';

// Label re-sync of initialised nodes (beyond upstream): the pure plan, the initialisation's
// record of the keys it set, and the controller's wiring (the periodic pass, the provider's
// change notice, debounced).

const ZONE_GA = 'topology.kubernetes.io/zone';
const ZONE_BETA = 'failure-domain.beta.kubernetes.io/zone';
const REGION_GA = 'topology.kubernetes.io/region';
const TYPE_GA = 'node.kubernetes.io/instance-type';

function meta(overrides: Partial<InstanceMetadata> = {}): InstanceMetadata {
  return fakeMetadata('node0', { instanceType: 'small', zone: 'z1', region: 'r1', ...overrides });
}

/** An initialised node carrying the given labels and (when given) the ownership annotation. */
function initialised(labels: Record<string, string>, ownedKeys?: string): V1Node {
  const node = makeNode({ tainted: false, labels });
  if (ownedKeys !== undefined) node.metadata!.annotations = { [CLOUD_LABELS_ANNOTATION]: ownedKeys };
  return node;
}

const IN_LINE = {
  [TYPE_GA]: 'small', 'beta.kubernetes.io/instance-type': 'small',
  [ZONE_GA]: 'z1', [ZONE_BETA]: 'z1',
  [REGION_GA]: 'r1', 'failure-domain.beta.kubernetes.io/region': 'r1',
};

describe('planLabelResync', () => {
  test('a node in line with the metadata needs no write', () => {
    const node = initialised({ ...IN_LINE, 'example.com/rack': 'r7' }, 'example.com/rack');
    expect(planLabelResync(node, meta({ additionalLabels: { 'example.com/rack': 'r7' } }))).toEqual({ patch: undefined, discarded: [] });
  });

  test('a new zone sets the GA and the beta label, and nothing else', () => {
    const plan = planLabelResync(initialised(IN_LINE, ''), meta({ zone: 'z2' }));
    expect(plan.patch).toEqual({ labels: { [ZONE_GA]: 'z2', [ZONE_BETA]: 'z2' }, annotations: {} });
  });

  test('an empty zone, region or instance type leaves the node labels alone', () => {
    const plan = planLabelResync(initialised(IN_LINE, ''), meta({ zone: '', region: '', instanceType: '' }));
    expect(plan.patch).toBeUndefined();
  });

  test('our labels follow the metadata: changed, added, and removed when the provider drops them', () => {
    const node = initialised({ ...IN_LINE, 'example.com/rack': 'r7', 'example.com/old': 'x' }, 'example.com/old,example.com/rack');
    const plan = planLabelResync(node, meta({ additionalLabels: { 'example.com/rack': 'r8', 'example.com/new': 'n' } }));
    expect(plan.patch).toEqual({
      labels: { 'example.com/rack': 'r8', 'example.com/new': 'n', 'example.com/old': null },
      annotations: { [CLOUD_LABELS_ANNOTATION]: 'example.com/new,example.com/rack' },
    });
  });

  test('a label someone else set is neither changed nor removed', () => {
    // example.com/team is the operator's (not in the annotation), with another value than the provider's.
    const node = initialised({ ...IN_LINE, 'example.com/team': 'ops', 'example.com/owner': 'kubelet' }, '');
    const plan = planLabelResync(node, meta({ additionalLabels: { 'example.com/team': 'infra' } }));
    expect(plan.patch).toBeUndefined();
    expect(plan.discarded).toEqual([{ key: 'example.com/team', reason: 'already-present' }]);
  });

  test('one of our labels deleted from the node by hand comes back', () => {
    const plan = planLabelResync(initialised(IN_LINE, 'example.com/rack'), meta({ additionalLabels: { 'example.com/rack': 'r7' } }));
    expect(plan.patch).toEqual({ labels: { 'example.com/rack': 'r7' }, annotations: {} });
  });

  test('kubernetes.io and k8s.io keys are never written or removed', () => {
    const node = initialised({ ...IN_LINE, 'node-role.kubernetes.io/edge': '' }, 'node-role.kubernetes.io/edge');
    const plan = planLabelResync(node, meta({ additionalLabels: { 'node.kubernetes.io/exclude': 'x', 'sub.k8s.io/y': 'y' } }));
    expect(plan.patch).toEqual({ labels: {}, annotations: { [CLOUD_LABELS_ANNOTATION]: '' } });
    expect(plan.discarded.map((d) => d.reason)).toEqual(['kubernetes-namespace', 'kubernetes-namespace']);
  });

  test('a node without the annotation adopts the labels equal to the metadata, not the others', () => {
    const node = initialised({ ...IN_LINE, 'example.com/rack': 'r7', 'example.com/team': 'ops' });
    const plan = planLabelResync(node, meta({ additionalLabels: { 'example.com/rack': 'r7', 'example.com/team': 'infra', 'example.com/site': 's1' } }));
    expect(plan.patch).toEqual({
      labels: { 'example.com/site': 's1' },
      annotations: { [CLOUD_LABELS_ANNOTATION]: 'example.com/rack,example.com/site' },
    });
    expect(trackedCloudLabelKeys(node)).toBeUndefined();
  });
});

describe('initialisation with label re-sync on', () => {
  test('records the additional labels it set, not the ones the node had or the reserved ones', () => {
    const node = makeNode({ labels: { 'example.com/team': 'ops' } });
    const metadata = meta({ additionalLabels: { 'example.com/rack': 'r7', 'example.com/team': 'infra', 'node.kubernetes.io/x': 'y' } });
    expect(planInitialization(node, metadata, { trackCloudLabels: true }).patch.metadata.annotations).toEqual({ [CLOUD_LABELS_ANNOTATION]: 'example.com/rack' });
    expect(planInitialization(node, metadata).patch.metadata.annotations).toBeUndefined();
  });

  test('the node it writes is in line for the next re-sync', () => {
    const node = makeNode();
    const metadata = meta({ additionalLabels: { 'example.com/rack': 'r7' } });
    const { patch } = planInitialization(node, metadata, { trackCloudLabels: true });
    const after = untainted({ ...node, metadata: { ...node.metadata, labels: patch.metadata.labels as Record<string, string>, annotations: patch.metadata.annotations as Record<string, string> } });
    expect(planLabelResync(after, metadata).patch).toBeUndefined();
  });
});

describe('ResyncTrigger', () => {
  test('a burst of requests wakes the waiter once, a debounce after the last', async () => {
    const trigger = new ResyncTrigger(150);
    trigger.request();
    await Bun.sleep(50);
    trigger.request();
    const last = performance.now();
    expect(await trigger.wait(60_000)).toBe(true);
    // Timers never fire early; a little slack for timer granularity.
    expect(performance.now() - last).toBeGreaterThanOrEqual(140);
    expect(await trigger.wait(300)).toBe(false);
  });

  test('a request due while nobody waits is kept for the next wait', async () => {
    const trigger = new ResyncTrigger(10);
    trigger.request();
    await Bun.sleep(100);
    // Kept: the wait answers true at once; lost, it would answer false when its 2s period ends.
    expect(await trigger.wait(2_000)).toBe(true);
  });

  test('without a request the wait lasts the period; an abort ends it; stop drops a pending request', async () => {
    const trigger = new ResyncTrigger(50);
    expect(await trigger.wait(20)).toBe(false);
    const abort = new AbortController();
    const waiting = trigger.wait(60_000, abort.signal);
    abort.abort();
    expect(await waiting).toBe(false);
    trigger.request();
    trigger.stop();
    expect(await trigger.wait(200)).toBe(false);
  });
});

type Write = { kind: 'labels'; name: string; resourceVersion?: string; patch: CloudLabelsPatch } | { kind: 'initialize' | 'addresses'; name: string };

/** A writer for both interfaces that applies label patches to the store, as the API would. */
class StoreWriter implements CloudNodeWriter, NodeLabelWriter {
  readonly writes: Write[] = [];
  labelErrors: Error[] = [];

  constructor(private readonly store: Map<string, V1Node>) {}

  async get(name: string): Promise<V1Node> {
    return this.store.get(name)!;
  }

  async initialize(name: string, patch: InitializationPatch): Promise<V1Node> {
    this.writes.push({ kind: 'initialize', name });
    const node = this.store.get(name)!;
    const next = untainted({
      ...node,
      // No null in these patches: nothing here has node rules.
      metadata: { ...node.metadata, labels: { ...node.metadata?.labels, ...patch.metadata.labels } as Record<string, string>, annotations: { ...node.metadata?.annotations, ...patch.metadata.annotations } as Record<string, string> },
      spec: { ...node.spec, providerID: patch.spec.providerID ?? node.spec?.providerID },
    });
    this.store.set(name, next);
    return next;
  }

  async setLabels(name: string): Promise<V1Node> {
    return this.store.get(name)!;
  }

  async setAddresses(name: string, _resourceVersion: string | undefined, _addresses: V1NodeAddress[]): Promise<V1Node> {
    this.writes.push({ kind: 'addresses', name });
    return this.store.get(name)!;
  }

  async patchCloudLabels(name: string, resourceVersion: string | undefined, patch: CloudLabelsPatch): Promise<V1Node> {
    this.writes.push({ kind: 'labels', name, resourceVersion, patch });
    const error = this.labelErrors.shift();
    if (error) throw error;
    const node = structuredClone(this.store.get(name)!);
    const labels = { ...node.metadata!.labels };
    for (const [k, v] of Object.entries(patch.labels)) {
      if (v === null) delete labels[k];
      else labels[k] = v;
    }
    node.metadata = { ...node.metadata, labels, annotations: { ...node.metadata?.annotations, ...patch.annotations }, resourceVersion: String(Number(node.metadata?.resourceVersion ?? 0) + 1) };
    this.store.set(name, node);
    return node;
  }

  labelWrites(): Extract<Write, { kind: 'labels' }>[] {
    return this.writes.filter((w): w is Extract<Write, { kind: 'labels' }> => w.kind === 'labels');
  }
}

function setup(nodes: V1Node[], opts: { relabelNodes?: boolean; periodMs?: number; changeDebounceMs?: number } = {}) {
  const store = new Map(nodes.map((n) => [n.metadata!.name!, n]));
  const handlers: { onAdd?: (n: V1Node) => void }[] = [];
  const nodeInformer = {
    store: { get: (key: string) => store.get(key), list: () => [...store.values()] },
    addHandlers: (h: { onAdd?: (n: V1Node) => void }) => {
      handlers.push(h);
      return () => {};
    },
    waitForSync: async () => true,
  } as unknown as Informer<V1Node>;
  const cloud = new FakeCloud();
  const writer = new StoreWriter(store);
  const ctx = controllerContext({ cloud, nodeInformer });
  const controller = new CloudNodeController(
    ctx,
    { workers: 1, nodeStatusUpdateFrequencyMs: opts.periodMs ?? 3_600_000, relabelNodes: opts.relabelNodes, changeDebounceMs: opts.changeDebounceMs },
    { writer, labelWriter: writer },
  );
  return { controller, cloud, writer, store };
}

describe('the periodic pass with label re-sync', () => {
  test('on: one metadata call per node brings its labels in line, under the resourceVersion read', async () => {
    const s = setup([initialised(IN_LINE, '')], { relabelNodes: true });
    s.cloud.setNode('node0', { metadata: meta({ zone: 'z2', additionalLabels: { 'example.com/rack': 'r1' } }) });
    await s.controller.updateNodeStatus();
    expect(s.cloud.count('instanceMetadata')).toBe(1);
    expect(s.writer.labelWrites()).toEqual([{
      kind: 'labels', name: 'node0', resourceVersion: '1',
      patch: { labels: { [ZONE_GA]: 'z2', [ZONE_BETA]: 'z2', 'example.com/rack': 'r1' }, annotations: { [CLOUD_LABELS_ANNOTATION]: 'example.com/rack' } },
    }]);
    // In line now: the next pass writes nothing.
    await s.controller.updateNodeStatus();
    expect(s.writer.labelWrites()).toHaveLength(1);
  });

  test('off (upstream): the pass writes no labels', async () => {
    const s = setup([initialised(IN_LINE, '')]);
    s.cloud.setNode('node0', { metadata: meta({ zone: 'z2' }) });
    await s.controller.updateNodeStatus();
    expect(s.writer.labelWrites()).toEqual([]);
  });

  test('a conflict is planned again from the node as the API has it', async () => {
    const s = setup([initialised(IN_LINE, '')], { relabelNodes: true });
    s.cloud.setNode('node0', { metadata: meta({ additionalLabels: { 'example.com/rack': 'r1' } }) });
    // Meanwhile someone set the label themselves: after the 409 it is theirs, and left alone.
    const theirs = initialised({ ...IN_LINE, 'example.com/rack': 'mine' }, '');
    theirs.metadata!.resourceVersion = '2';
    s.writer.labelErrors.push(new KubeApiError(409, 'Conflict', 'the object has been modified', 'PATCH', '/api/v1/nodes/node0'));
    const get = s.writer.get.bind(s.writer);
    s.writer.get = async (name) => (s.store.set(name, theirs), get(name));
    await s.controller.updateNodeStatus();
    expect(s.writer.labelWrites().map((w) => w.resourceVersion)).toEqual(['1']);
    expect(s.store.get('node0')!.metadata!.labels!['example.com/rack']).toBe('mine');
  });
});

describe('the provider change notice', () => {
  test('runs the pass soon after a change, and tries still-tainted nodes again', async () => {
    const tainted = makeNode({ name: 'late' });
    const s = setup([initialised(IN_LINE, ''), tainted], { relabelNodes: true, changeDebounceMs: 50 });
    s.cloud.setNode('node0', { metadata: meta() });
    s.cloud.setNode('late', { metadata: null }); // not in the inventory yet
    const stop = new AbortController();
    const running = s.controller.run(stop.signal);
    try {
      await eventually('the first pass', () => s.cloud.count('instanceMetadata', 'node0') === 1, 10_000);
      s.controller.queue.add('late');
      await eventually('the tainted node tried', () => s.cloud.count('instanceMetadata', 'late') === 1, 10_000);

      s.cloud.setNode('node0', { metadata: meta({ zone: 'z9' }) });
      s.cloud.setNode('late', { metadata: fakeMetadata('late', { zone: 'z9' }) });
      s.cloud.notifyChange();
      s.cloud.notifyChange();
      await eventually('the zone label re-synced', () => s.store.get('node0')!.metadata!.labels![ZONE_GA] === 'z9', 10_000);
      await eventually('the late node initialised', () => s.writer.writes.some((w) => w.kind === 'initialize' && w.name === 'late'), 10_000);
      expect(s.store.get('late')!.metadata!.labels![ZONE_GA]).toBe('z9');
      expect(s.store.get('late')!.metadata!.annotations![CLOUD_LABELS_ANNOTATION]).toBe('');
      // Two notices in one burst: one early pass.
      expect(s.cloud.count('instanceMetadata', 'node0')).toBe(2);
    } finally {
      stop.abort();
      await running;
    }
    expect(s.cloud.changeListenerCount).toBe(0);
  });

  test('without a notice the pass waits its period', async () => {
    const s = setup([initialised(IN_LINE, '')], { relabelNodes: true, changeDebounceMs: 10 });
    s.cloud.setNode('node0', { metadata: meta() });
    const stop = new AbortController();
    const running = s.controller.run(stop.signal);
    try {
      await eventually('the first pass', () => s.cloud.count('instanceMetadata', 'node0') === 1, 10_000);
      await Bun.sleep(200);
      expect(s.cloud.count('instanceMetadata', 'node0')).toBe(1);
    } finally {
      stop.abort();
      await running;
    }
  });
});

describe('the static provider', () => {
  const INVENTORY = 'inventory:\n  machines:\n    - id: m1\n      zone: z1\n';

  test('asks for label re-sync and tells onChange listeners about good reloads only', () => {
    const provider = createStaticProvider({ config: INVENTORY, configPath: undefined, logger: silentLogger });
    expect(provider.relabelNodes).toBe(true);
    let changes = 0;
    const unsubscribe = provider.onChange(() => changes++);
    expect(provider.reload(INVENTORY.replace('z1', 'z2')).ok).toBe(true);
    expect(changes).toBe(1);
    expect(provider.reload('inventory:\n  machines: 7\n').ok).toBe(false);
    expect(changes).toBe(1);
    unsubscribe();
    provider.reload(INVENTORY);
    expect(changes).toBe(1);
  });
});
