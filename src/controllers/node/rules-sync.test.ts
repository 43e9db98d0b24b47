import { describe, expect, test } from 'bun:test';
import fc from 'fast-check';
import type { V1Node, V1Taint } from '@kubernetes/client-node';
import type { NodeRuleEffects, RuleTaint } from '../../cloud/node-rules.ts';
import { TAINT_EXTERNAL_CLOUD_PROVIDER } from '../../kube/node-helpers.ts';
import { RULE_ANNOTATIONS_ANNOTATION, RULE_LABELS_ANNOTATION, RULE_TAINTS_ANNOTATION, planNodeRules, type NodeRulesPatch } from './rules-sync.ts';
import { planInitialization, type InitializationPatch } from './initialize.ts';
import { CloudNodeController } from './controller.ts';
import type { CloudNodeWriter, NodeLabelWriter, NodeRuleWriter } from './writer.ts';
import type { CloudLabelsPatch } from './label-resync.ts';
import { KubeApiError } from '../../kube/errors.ts';
import type { Informer } from '../../kube/informer/index.ts';
import { FakeCloud, fakeMetadata } from '../../../test/fakes/fake-cloud.ts';
import { controllerContext } from '../../../test/fakes/controller-context.ts';
import { UNINITIALIZED, makeNode } from '../../../test/fakes/node-fixtures.ts';

// What the node rules' effects mean for one node: the plan (pure), at initialisation and after.

const NONE: NodeRuleEffects = { labels: {}, annotations: {}, taints: [] };
const effects = (e: Partial<NodeRuleEffects>): NodeRuleEffects => ({ ...NONE, ...e });
const WORKER = 'node-role.kubernetes.io/worker';
const GPU_TAINT: RuleTaint = { key: 'example.com/gpu', value: 'a100', effect: 'NoSchedule' };

function node(shape: { labels?: Record<string, string>; annotations?: Record<string, string>; taints?: V1Taint[] } = {}): V1Node {
  const n = makeNode({ tainted: false, labels: shape.labels, taints: shape.taints ?? [] });
  n.metadata!.annotations = shape.annotations;
  return n;
}

/** The node after a JSON merge patch of the plan (what the API server makes of it). */
function applied(n: V1Node, patch: NodeRulesPatch | undefined): V1Node {
  if (!patch) return n;
  const merge = (current: Record<string, string> | undefined, changes: Record<string, string | null>) => {
    const out = { ...current };
    for (const [k, v] of Object.entries(changes)) if (v === null) delete out[k];
    else out[k] = v;
    return out;
  };
  return {
    ...n,
    metadata: { ...n.metadata, labels: merge(n.metadata?.labels, patch.labels), annotations: merge(n.metadata?.annotations, patch.annotations) },
    spec: { ...n.spec, taints: patch.taints ?? n.spec?.taints },
  };
}

describe('planNodeRules', () => {
  test('a fresh node gets the labels, annotations and taints, and the record of what was set', () => {
    const { patch, discarded } = planNodeRules(node(), effects({ labels: { [WORKER]: '' }, annotations: { 'example.com/owner': 'team-a' }, taints: [GPU_TAINT] }));
    expect(discarded).toEqual([]);
    expect(patch).toEqual({
      labels: { [WORKER]: '' },
      annotations: {
        'example.com/owner': 'team-a',
        [RULE_LABELS_ANNOTATION]: WORKER,
        [RULE_ANNOTATIONS_ANNOTATION]: 'example.com/owner',
        [RULE_TAINTS_ANNOTATION]: 'example.com/gpu:NoSchedule',
      },
      taints: [{ key: 'example.com/gpu', value: 'a100', effect: 'NoSchedule' }],
    });
  });

  test('in line: no write', () => {
    const want = effects({ labels: { [WORKER]: '' }, taints: [GPU_TAINT] });
    const once = applied(node(), planNodeRules(node(), want).patch);
    expect(planNodeRules(once, want).patch).toBeUndefined();
  });

  test('a rule change removes and changes only what edge-ccm set; a user label of the same kind stays', () => {
    const before = applied(node({ labels: { 'example.com/mine': 'x' } }), planNodeRules(node({ labels: { 'example.com/mine': 'x' } }), effects({ labels: { [WORKER]: '', 'example.com/rack': 'r1' }, taints: [GPU_TAINT] })).patch);
    const { patch } = planNodeRules(before, effects({ labels: { 'example.com/rack': 'r2' } }));
    expect(patch?.labels).toEqual({ [WORKER]: null, 'example.com/rack': 'r2' });
    expect(patch?.taints).toEqual([]);
    expect(patch?.annotations).toEqual({ [RULE_LABELS_ANNOTATION]: 'example.com/rack', [RULE_TAINTS_ANNOTATION]: null });
    const after = applied(before, patch);
    expect(after.metadata?.labels).toEqual({ 'example.com/mine': 'x', 'example.com/rack': 'r2' });
  });

  test('a key someone else set is never taken over, changed or removed', () => {
    const mine = node({ labels: { 'example.com/rack': 'mine' }, annotations: { 'example.com/owner': 'me' }, taints: [{ key: 'example.com/gpu', value: 'mine', effect: 'NoSchedule' }] });
    const { patch, discarded } = planNodeRules(mine, effects({ labels: { 'example.com/rack': 'r1' }, annotations: { 'example.com/owner': 'rule' }, taints: [GPU_TAINT] }));
    expect(patch).toBeUndefined();
    expect(discarded.map((d) => `${d.kind} ${d.key} ${d.reason}`)).toEqual([
      'label example.com/rack already-present',
      'annotation example.com/owner already-present',
      'taint example.com/gpu:NoSchedule already-present',
    ]);
    // And no rules any more: still nothing to remove, since none of it is edge-ccm's.
    expect(planNodeRules(mine, NONE).patch).toBeUndefined();
  });

  test('reserved keys are never written, whatever a provider says; the uninitialized and lifecycle taints are never removed', () => {
    const n = node({ taints: [UNINITIALIZED, { key: 'node.kubernetes.io/not-ready', effect: 'NoExecute' }] });
    // Even listed as ours (a hand-edited record), a reserved taint stays.
    n.metadata!.annotations = { [RULE_TAINTS_ANNOTATION]: `${TAINT_EXTERNAL_CLOUD_PROVIDER}:NoSchedule,node.kubernetes.io/not-ready:NoExecute` };
    const { patch, discarded } = planNodeRules(n, effects({ labels: { 'topology.kubernetes.io/zone': 'z' }, annotations: { 'node.edge-ccm.io/rule-labels': 'x' }, taints: [{ key: 'node.kubernetes.io/unschedulable', value: '', effect: 'NoSchedule' }] }));
    expect(discarded.map((d) => d.reason)).toEqual(['reserved', 'reserved', 'reserved']);
    expect(patch).toEqual({ labels: {}, annotations: { [RULE_TAINTS_ANNOTATION]: null } });
  });

  test('a taint value changes in place; other taints keep their place', () => {
    const other = { key: 'example.com/other', effect: 'NoSchedule' };
    const before = applied(node({ taints: [other] }), planNodeRules(node({ taints: [other] }), effects({ taints: [GPU_TAINT] })).patch);
    const { patch } = planNodeRules(before, effects({ taints: [{ ...GPU_TAINT, value: 'h100' }] }));
    expect(patch?.taints).toEqual([other, { key: 'example.com/gpu', value: 'h100', effect: 'NoSchedule' }]);
  });
});

describe('at initialisation', () => {
  test('the rule taint is in the same write that removes the uninitialized taint; cloud labels keep precedence', () => {
    const metadata = { ...fakeMetadata('node0', { zone: 'z1' }), ruleEffects: effects({ labels: { [WORKER]: '', 'topology.kubernetes.io/zone': 'other' }, taints: [GPU_TAINT] }) };
    const { patch, discardedByRules } = planInitialization(makeNode({ taints: [UNINITIALIZED] }), metadata);
    expect(patch.spec.taints).toEqual([{ key: 'example.com/gpu', value: 'a100', effect: 'NoSchedule' }]);
    expect(patch.metadata.labels?.[WORKER]).toBe('');
    expect(patch.metadata.labels?.['topology.kubernetes.io/zone']).toBe('z1');
    expect(patch.metadata.annotations).toEqual({ [RULE_LABELS_ANNOTATION]: WORKER, [RULE_TAINTS_ANNOTATION]: 'example.com/gpu:NoSchedule' });
    expect(discardedByRules.map((d) => d.key)).toEqual(['topology.kubernetes.io/zone']);
  });

  test('no rules (the provider gives none, or an empty result): the write is what it was', () => {
    const plain = planInitialization(makeNode(), fakeMetadata('node0'));
    expect(planInitialization(makeNode(), { ...fakeMetadata('node0'), ruleEffects: NONE })).toEqual(plain);
  });
});

describe('planNodeRules properties', () => {
  const key = fc.constantFrom('example.com/a', 'example.com/b', 'c', WORKER, 'node-role.kubernetes.io/gpu', 'topology.kubernetes.io/zone');
  const value = fc.constantFrom('', 'x', 'y');
  const effect = fc.constantFrom('NoSchedule' as const, 'NoExecute' as const);
  const map = fc.dictionary(key, value, { maxKeys: 4 });
  const taints = fc.uniqueArray(fc.record({ key, value, effect }), { maxLength: 4, selector: (t) => `${t.key}:${t.effect}` });
  const rules = fc.record({ labels: map, annotations: map, taints });

  /** A node someone labelled and tainted, then edge-ccm applied `first`; then `second` is applied. */
  const scenario = fc.record({ userLabels: map, userTaints: taints, first: rules, second: rules });

  test('one write brings the node in line; what the user set is never changed; what the rules stop giving is gone', () => {
    fc.assert(
      fc.property(scenario, ({ userLabels, userTaints, first, second }) => {
        const start = node({ labels: userLabels, taints: userTaints });
        const once = applied(start, planNodeRules(start, first).patch);
        const twice = applied(once, planNodeRules(once, second).patch);
        // Converged: a second plan has nothing to do.
        expect(planNodeRules(twice, second).patch).toBeUndefined();
        // The user's labels and taints are as they were.
        for (const [k, v] of Object.entries(userLabels)) expect(twice.metadata?.labels?.[k]).toBe(v);
        for (const t of userTaints) expect(twice.spec?.taints).toContainEqual(t);
        // Every label now is the user's or the second rules' (none left over from the first).
        for (const [k, v] of Object.entries(twice.metadata?.labels ?? {})) expect(userLabels[k] === v || second.labels[k] === v).toBe(true);
        for (const t of twice.spec?.taints ?? []) expect(userTaints.some((u) => u.key === t.key && u.effect === t.effect) || second.taints.some((s) => s.key === t.key && s.effect === t.effect)).toBe(true);
        // Nothing reserved was written (but node-role).
        for (const k of Object.keys(twice.metadata?.labels ?? {})) if (k === 'topology.kubernetes.io/zone') expect(userLabels[k]).toBeDefined();
      }),
      { numRuns: 300 },
    );
  });
});

/** A store-backed writer: merge patches applied as the API would, each write a new resourceVersion, 409 on a stale one. */
class StoreWriter implements CloudNodeWriter, NodeLabelWriter, NodeRuleWriter {
  readonly ruleWrites: { resourceVersion?: string; patch: NodeRulesPatch }[] = [];
  constructor(readonly store: Map<string, V1Node>) {}
  async get(name: string): Promise<V1Node> {
    return this.store.get(name)!;
  }
  private write(name: string, resourceVersion: string | undefined, change: (n: V1Node) => V1Node): V1Node {
    const current = this.store.get(name)!;
    if (resourceVersion !== undefined && resourceVersion !== current.metadata?.resourceVersion) throw new KubeApiError(409, 'Conflict', 'the object has been modified', 'PATCH', `/api/v1/nodes/${name}`);
    const next = change(structuredClone(current));
    next.metadata!.resourceVersion = String(Number(current.metadata?.resourceVersion ?? 0) + 1);
    this.store.set(name, next);
    return next;
  }
  async initialize(name: string, _patch: InitializationPatch): Promise<V1Node> {
    return this.store.get(name)!;
  }
  async setLabels(name: string): Promise<V1Node> {
    return this.store.get(name)!;
  }
  async setAddresses(name: string, resourceVersion: string | undefined): Promise<V1Node> {
    return this.write(name, resourceVersion, (n) => n);
  }
  async patchCloudLabels(name: string, resourceVersion: string | undefined, patch: CloudLabelsPatch): Promise<V1Node> {
    return this.write(name, resourceVersion, (n) => applied(n, { labels: patch.labels, annotations: patch.annotations }));
  }
  async patchNodeRules(name: string, resourceVersion: string | undefined, patch: NodeRulesPatch): Promise<V1Node> {
    this.ruleWrites.push({ resourceVersion, patch });
    return this.write(name, resourceVersion, (n) => applied(n, patch));
  }
}

function controllerWith(n: V1Node, ruleEffects: NodeRuleEffects | undefined, relabelNodes = false) {
  const store = new Map([[n.metadata!.name!, n]]);
  const nodeInformer = {
    store: { get: (key: string) => store.get(key), list: () => [...store.values()] },
    addHandlers: () => () => {},
    waitForSync: async () => true,
  } as unknown as Informer<V1Node>;
  const cloud = new FakeCloud();
  cloud.setNode(n.metadata!.name!, { metadata: { ...fakeMetadata(n.metadata!.name!, { zone: 'z1' }), additionalLabels: { 'example.com/rack': 'r1' }, ruleEffects } });
  const writer = new StoreWriter(store);
  const controller = new CloudNodeController(controllerContext({ cloud, nodeInformer }), { workers: 1, nodeStatusUpdateFrequencyMs: 3_600_000, relabelNodes }, { writer, labelWriter: writer, ruleWriter: writer });
  return { controller, writer, store };
}

describe('the periodic pass', () => {
  const initialised = () => makeNode({ tainted: false, taints: [], labels: { 'topology.kubernetes.io/zone': 'z1', 'failure-domain.beta.kubernetes.io/zone': 'z1' } });

  test('applies the rules after the label re-sync, on the node that write returned (no needless conflict)', async () => {
    const s = controllerWith(initialised(), effects({ labels: { [WORKER]: '' }, taints: [GPU_TAINT] }), true);
    await s.controller.updateNodeStatus();
    expect(s.writer.ruleWrites.map((w) => w.resourceVersion)).toEqual(['2']); // the label re-sync wrote version 2
    const n = s.store.get('node0')!;
    expect(n.metadata?.labels).toMatchObject({ [WORKER]: '', 'example.com/rack': 'r1' });
    expect(n.spec?.taints).toEqual([{ key: 'example.com/gpu', value: 'a100', effect: 'NoSchedule' }]);
    await s.controller.updateNodeStatus();
    expect(s.writer.ruleWrites).toHaveLength(1); // in line: nothing more
  });

  test('a conflict is planned again from the node as the API has it: a taint added meanwhile stays', async () => {
    const s = controllerWith(initialised(), effects({ taints: [GPU_TAINT] }));
    let once = false;
    // Someone taints the node between the controller's read and its write.
    s.writer.patchNodeRules = (async (name: string, rv: string | undefined, patch: NodeRulesPatch) => {
      if (!once) {
        once = true;
        const n = structuredClone(s.store.get(name)!);
        n.spec!.taints = [{ key: 'example.com/maintenance', effect: 'NoSchedule' }];
        n.metadata!.resourceVersion = '7';
        s.store.set(name, n);
      }
      return StoreWriter.prototype.patchNodeRules.call(s.writer, name, rv, patch);
    }) as typeof s.writer.patchNodeRules;
    await s.controller.updateNodeStatus();
    expect(s.writer.ruleWrites.map((w) => w.resourceVersion)).toEqual(['1', '7']);
    expect(s.store.get('node0')!.spec?.taints).toEqual([{ key: 'example.com/maintenance', effect: 'NoSchedule' }, { key: 'example.com/gpu', value: 'a100', effect: 'NoSchedule' }]);
  });

  test('a provider without rules (no ruleEffects): nothing is written or removed', async () => {
    const n = initialised();
    n.metadata!.labels![WORKER] = '';
    n.metadata!.annotations = { [RULE_LABELS_ANNOTATION]: WORKER };
    const s = controllerWith(n, undefined);
    await s.controller.updateNodeStatus();
    expect(s.writer.ruleWrites).toEqual([]);
    expect(s.store.get('node0')!.metadata?.labels?.[WORKER]).toBe('');
  });
});
