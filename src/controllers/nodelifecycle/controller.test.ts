import { describe, expect, test } from 'bun:test';
import type { V1Node, V1Taint } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import type { Existence } from '../../cloud/types.ts';
import {
  ANNOTATION_ACKNOWLEDGE_DELETION,
  ANNOTATION_PROTECT_FROM_DELETION,
  CloudNodeLifecycleController,
  DEFAULT_LIFECYCLE_OPTIONS,
  DeletionWindow,
  type DeleteOutcome,
  type DeletionPolicy,
  type LifecycleOptionsInput,
  type LifecycleWriter,
  type NotFoundStreak,
  QUARANTINE_TAINT,
  SHUTDOWN_TAINT,
  UPSTREAM_COMPATIBLE_OPTIONS,
  allowedGone,
  askExistence,
  decide,
  forEachShutDown,
  providerDeadline,
  evaluateBreaker,
  resolveLifecycleOptions,
  withTimeout,
} from './index.ts';
import type { ControllerContext } from '../types.ts';
import { Informer } from '../../kube/informer/index.ts';
import { NODES } from '../../kube/resources.ts';
import type { KubeTransport } from '../../kube/transport.ts';
import { FakeClock } from '../../../test/fakes/fake-clock.ts';
import type { Deadline } from '../../util/deadline.ts';
import { FULFILLED_FALSE, FULFILLED_TRUE, FULFILLED_UNDEFINED } from '../../util/settled.ts';
import { createLogger } from '../../log.ts';
import { FakeCloud } from '../../../test/fakes/fake-cloud.ts';
import { RecordingEventRecorder } from '../../../test/fakes/event-recorder.ts';
import { controllerContext } from '../../../test/fakes/controller-context.ts';

type Ready = 'True' | 'False' | 'Unknown' | 'missing';

function node(name: string, ready: Ready, extra: { uid?: string; taints?: V1Taint[]; annotations?: Record<string, string> } = {}): V1Node {
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: { name, uid: extra.uid ?? `uid-${name}`, resourceVersion: '1', annotations: extra.annotations },
    spec: { taints: extra.taints },
    status: { conditions: ready === 'missing' ? [] : [{ type: 'Ready', status: ready }] },
  };
}

const MINUTE = 60_000;

// --- the pure core ---

describe('decide: policy x answer x grace', () => {
  const policies: DeletionPolicy[] = ['delete', 'taint', 'never'];
  const answers: Existence[] = ['exists', 'not-found', 'unknown'];
  // Each grace stage: the streak before this answer, and the time of the answer.
  const stages: { name: string; previous?: NotFoundStreak; now: number; confirmed: boolean }[] = [
    { name: 'first answer', previous: undefined, now: 0, confirmed: false },
    { name: 'threshold reached inside the grace period', previous: { uid: 'uid-n', since: 0, count: 5 }, now: 5 * MINUTE - 1, confirmed: false },
    { name: 'grace elapsed, below the threshold', previous: { uid: 'uid-n', since: 0, count: 1 }, now: 10 * MINUTE, confirmed: false },
    { name: 'grace elapsed and threshold reached', previous: { uid: 'uid-n', since: 0, count: 2 }, now: 5 * MINUTE, confirmed: true },
  ];
  const expectedGone = { delete: { kind: 'delete' }, taint: { kind: 'quarantine', alreadyTainted: false }, never: { kind: 'hold', reason: 'policy' } } as const;

  for (const policy of policies) {
    const opts = { ...DEFAULT_LIFECYCLE_OPTIONS, deletionPolicy: policy };
    for (const answer of answers) {
      for (const stage of stages) {
        test(`${policy} / ${answer} / ${stage.name}`, () => {
          const { action, streak } = decide(node('n', 'False'), answer, stage.previous, stage.now, opts);
          if (answer === 'exists') {
            expect(action).toEqual({ kind: 'exists', removeTaints: [] });
            expect(streak).toBeUndefined();
          } else if (answer === 'unknown') {
            expect(action).toEqual({ kind: 'unknown' });
            // The grace timer survives an unknown answer; the count of consecutive not-found does not.
            expect(streak).toEqual(stage.previous && { ...stage.previous, count: 0 });
          } else {
            expect(action).toEqual(stage.confirmed ? expectedGone[policy] : { kind: 'hold', reason: 'grace' });
            expect(streak).toEqual(stage.previous ? { ...stage.previous, count: stage.previous.count + 1 } : { uid: 'uid-n', since: stage.now, count: 1 });
          }
        });
      }
    }
    test(`${policy}: a protected node confirmed gone is held for protection`, () => {
      const protectedNode = node('n', 'False', { annotations: { [ANNOTATION_PROTECT_FROM_DELETION]: 'true' } });
      expect(decide(protectedNode, 'not-found', { uid: 'uid-n', since: 0, count: 2 }, 5 * MINUTE, opts).action).toEqual({ kind: 'hold', reason: 'protected' });
    });
  }

  test('upstream-compatible options act on the first not-found', () => {
    const opts = resolveLifecycleOptions(UPSTREAM_COMPATIBLE_OPTIONS);
    expect(decide(node('n', 'False'), 'not-found', undefined, 0, opts).action).toEqual({ kind: 'delete' });
  });

  test('a Ready node is never judged: the answer is ignored, the streak forgotten, our taints removed', () => {
    const tainted = node('n', 'True', { taints: [SHUTDOWN_TAINT, QUARANTINE_TAINT, { key: 'other', effect: 'NoSchedule' }] });
    const d = decide(tainted, 'not-found', { uid: 'uid-n', since: 0, count: 9 }, 10 * MINUTE, DEFAULT_LIFECYCLE_OPTIONS);
    expect(d).toEqual({ action: { kind: 'ready', removeTaints: [SHUTDOWN_TAINT.key, QUARANTINE_TAINT.key] }, streak: undefined });
    expect(decide(node('n', 'True'), undefined, undefined, 0, DEFAULT_LIFECYCLE_OPTIONS).action).toEqual({ kind: 'ready', removeTaints: [] });
  });

  test('Ready Unknown, False and missing all count as NotReady', () => {
    const opts = resolveLifecycleOptions(UPSTREAM_COMPATIBLE_OPTIONS);
    for (const ready of ['False', 'Unknown', 'missing'] as const) {
      expect(decide(node('n', ready), 'not-found', undefined, 0, opts).action).toEqual({ kind: 'delete' });
    }
  });

  test('a NotReady node the provider was not asked about counts as unknown', () => {
    expect(decide(node('n', 'False'), undefined, undefined, 0, DEFAULT_LIFECYCLE_OPTIONS).action).toEqual({ kind: 'unknown' });
  });

  test('exists removes the quarantine taint of an earlier judgement', () => {
    const d = decide(node('n', 'False', { taints: [QUARANTINE_TAINT] }), 'exists', undefined, 0, DEFAULT_LIFECYCLE_OPTIONS);
    expect(d.action).toEqual({ kind: 'exists', removeTaints: [QUARANTINE_TAINT.key] });
  });

  test('a streak of another Node object (re-registered, new UID) is not continued', () => {
    const d = decide(node('n', 'False', { uid: 'new' }), 'not-found', { uid: 'old', since: 0, count: 9 }, 10 * MINUTE, DEFAULT_LIFECYCLE_OPTIONS);
    expect(d).toEqual({ action: { kind: 'hold', reason: 'grace' }, streak: { uid: 'new', since: 10 * MINUTE, count: 1 } });
  });

  test('taint policy on an already quarantined node says so (no second write)', () => {
    const opts = { ...DEFAULT_LIFECYCLE_OPTIONS, deletionPolicy: 'taint' as const };
    const d = decide(node('n', 'False', { taints: [QUARANTINE_TAINT] }), 'not-found', { uid: 'uid-n', since: 0, count: 3 }, 5 * MINUTE, opts);
    expect(d.action).toEqual({ kind: 'quarantine', alreadyTainted: true });
  });
});

describe('breaker', () => {
  test('allowedGone: share of the population, never below 1, capped by maxCount', () => {
    const share = { maxShare: 0.2, windowMs: 10 * MINUTE };
    expect([1, 2, 4, 5, 9, 10, 14, 15, 100].map((n) => allowedGone(share, n))).toEqual([1, 1, 1, 1, 1, 2, 2, 3, 20]);
    expect(allowedGone({ ...share, maxCount: 5 }, 100)).toBe(5);
    expect(allowedGone({ ...share, maxCount: 1 }, 2)).toBe(1);
    expect(allowedGone({ maxShare: 0.57, windowMs: 0 }, 100)).toBe(57);
    expect(allowedGone({ maxShare: 0.7, windowMs: 0 }, 100)).toBe(70);
    expect(allowedGone({ maxShare: 1, windowMs: 0 }, 7)).toBe(7);
  });

  const opts = { maxShare: 0.2, windowMs: 10 * MINUTE };
  const notAcked = () => false;

  test('within the limit everything is deletable', () => {
    const v = evaluateBreaker({ candidates: ['a', 'b'], acknowledged: notAcked, managedCount: 10, recentDeletions: 0, overridden: false }, opts);
    expect(v).toMatchObject({ open: false, allowed: 2, gone: 2, population: 10, deletable: ['a', 'b'], held: [] });
  });

  test('over the limit only acknowledged nodes are deletable; they still count as gone', () => {
    const v = evaluateBreaker({ candidates: ['a', 'b', 'c'], acknowledged: (n) => n === 'b', managedCount: 10, recentDeletions: 0, overridden: false }, opts);
    expect(v).toMatchObject({ open: true, gone: 3, allowed: 2, deletable: ['b'], held: ['a', 'c'] });
  });

  test('recent deletions count against the limit and the population', () => {
    const v = evaluateBreaker({ candidates: ['c'], acknowledged: notAcked, managedCount: 8, recentDeletions: 2, overridden: false }, opts);
    expect(v).toMatchObject({ open: true, population: 10, allowed: 2, gone: 3, deletable: [], held: ['c'] });
  });

  test('the override flag lets everything through', () => {
    const v = evaluateBreaker({ candidates: ['a', 'b', 'c'], acknowledged: notAcked, managedCount: 3, recentDeletions: 0, overridden: true }, opts);
    expect(v).toMatchObject({ open: false, deletable: ['a', 'b', 'c'], held: [] });
  });

  test('maxShare 1 never trips', () => {
    const v = evaluateBreaker({ candidates: ['a', 'b', 'c'], acknowledged: notAcked, managedCount: 3, recentDeletions: 0, overridden: false }, { maxShare: 1, windowMs: 0 });
    expect(v.open).toBe(false);
  });

  test('DeletionWindow forgets deletions older than the window', () => {
    const w = new DeletionWindow(10 * MINUTE);
    w.record(0);
    w.record(5 * MINUTE);
    expect(w.count(9 * MINUTE)).toBe(2);
    expect(w.count(10 * MINUTE)).toBe(1);
    expect(w.count(15 * MINUTE)).toBe(0);
  });
});

describe('options', () => {
  test('defaults', () => {
    expect(resolveLifecycleOptions()).toEqual({
      monitorPeriodMs: 5000, deletionPolicy: 'delete', gracePeriodMs: 300_000, notFoundThreshold: 3,
      breaker: { maxShare: 0.2, windowMs: 600_000 }, breakerAcknowledged: false, providerTimeoutMs: 10_000, shrinkMaxShare: 0.5,
    });
  });
  test('partial breaker options keep the other defaults; undefined means default', () => {
    const o = resolveLifecycleOptions({ breaker: { maxCount: 3 }, gracePeriodMs: undefined });
    expect(o.breaker).toEqual({ maxShare: 0.2, maxCount: 3, windowMs: 600_000 });
    expect(o.gracePeriodMs).toBe(300_000);
    expect(resolveLifecycleOptions({ breaker: { maxCount: 0 } }).breaker).toEqual({ maxShare: 0.2, windowMs: 600_000 }); // the flag's "no cap"
  });
  test('rejects values that defeat the safety rules', () => {
    const bad: LifecycleOptionsInput[] = [
      { notFoundThreshold: 0 }, { notFoundThreshold: 1.5 }, { gracePeriodMs: -1 }, { deletionPolicy: 'remove' as DeletionPolicy },
      { breaker: { maxShare: 1.5 } }, { breaker: { maxShare: -0.1 } }, { breaker: { maxCount: -1 } }, { breaker: { maxCount: 2.5 } }, { monitorPeriodMs: 0 }, { providerTimeoutMs: 0 },
      { shrinkMaxShare: -0.1 }, { shrinkMaxShare: 1.1 },
    ];
    for (const input of bad) expect(() => resolveLifecycleOptions(input)).toThrow(/invalid node lifecycle options/);
  });
});

describe('asking the provider', () => {
  test('withTimeout gives up on a provider that ignores its signal', async () => {
    const never = new Promise<string>(() => {});
    await expect(withTimeout(() => never, 20)).rejects.toThrow(/did not answer within 20ms/);
  });

  test('errors, hangs and malformed bulk replies all become unknown', async () => {
    const cloud = new FakeCloud();
    cloud.setNode('a', { existence: 'not-found' }).setNode('b', { error: new Error('boom') });
    const answers = await askExistence(cloud.instances!, [node('a', 'False'), node('b', 'False'), node('c', 'False')], { timeoutMs: 5000 });
    expect(answers).toEqual(['not-found', 'unknown', 'exists']);

    cloud.latencyMs = 60_000;
    const hung = await askExistence(cloud.instances!, [node('a', 'False')], { timeoutMs: 30 });
    expect(hung).toEqual(['unknown']);

    // A bulk answer out of the three values: that node unknown, the others as answered.
    const errors: string[] = [];
    const onError = (_: V1Node[], error: string) => void errors.push(error);
    const odd = { ...cloud.instances!, instancesExist: async () => ['gone' as Existence, 'exists' as Existence] };
    expect(await askExistence(odd, [node('a', 'False'), node('b', 'False')], { timeoutMs: 5000, onError })).toEqual(['unknown', 'exists']);
    // Answers are by position: a list of another length (or no list) cannot be matched, every node unknown, and said why.
    for (const reply of [['exists'], ['exists', 'exists', 'exists'], new Map([['a', 'exists'], ['b', 'exists']])]) {
      const wrong = { ...cloud.instances!, instancesExist: async () => reply as unknown as Existence[] };
      expect(await askExistence(wrong, [node('a', 'False'), node('b', 'False')], { timeoutMs: 5000, onError })).toEqual(['unknown', 'unknown']);
    }
    expect(errors).toEqual([
      "the provider's bulk answer has 1 answers for 2 nodes; taken as unknown",
      "the provider's bulk answer has 3 answers for 2 nodes; taken as unknown",
      "the provider's bulk answer is not a list for 2 nodes; taken as unknown",
    ]);
  });

  test('shutdown questions: answers given at once are taken in the same turn, pending ones raced and bounded, failures unknown', async () => {
    const nodes = Array.from({ length: 30 }, (_, i) => node(`n${i}`, 'False'));
    const shutDown: string[] = [];
    const errors: string[] = [];
    const onShutdown = async (n: V1Node) => void shutDown.push(n.metadata!.name!);
    const opts = (deadline: Deadline) => ({ deadline, timeoutMs: 30, onError: (failed: V1Node[], error: string) => errors.push(`${failed[0]!.metadata!.name}: ${error}`) });

    // From memory (as the static inventory answers): every node asked before the call returns.
    let asked = 0;
    const memory = { ...new FakeCloud().instances!, instanceShutdown: async (n: V1Node) => (asked++, n.metadata!.name === 'n3') };
    const deadline = providerDeadline(5000);
    const done = forEachShutDown(memory, nodes, 10, opts(deadline), onShutdown);
    expect(asked).toBe(30);
    await done;
    deadline.dispose();
    expect(shutDown).toEqual(['n3']);

    // Shared fulfilled promises (the static provider's answers from its inventory): each node still gets its own answer.
    shutDown.length = 0;
    const shared = { ...memory, instanceShutdown: (n: V1Node) => (['n3', 'n7'].includes(n.metadata!.name!) ? FULFILLED_TRUE : n.metadata!.name === 'n8' ? FULFILLED_UNDEFINED : FULFILLED_FALSE) };
    const again = providerDeadline(5000);
    await forEachShutDown(shared, nodes, 10, opts(again), onShutdown);
    again.dispose();
    expect(shutDown).toEqual(['n3', 'n7']);

    // Slow, hanging, throwing (synchronously) and rejecting answers: at most 10 in flight, and
    // whatever did not answer by the deadline is unknown (told to onError), not shut down.
    const cloud = new FakeCloud({ latencyMs: 5 });
    cloud.setNode('n1', { shutdown: true }).setNode('n2', { error: new Error('boom') });
    const mixed = {
      ...cloud.instances!,
      instanceShutdown: (n: V1Node, signal?: AbortSignal) => {
        if (n.metadata!.name === 'n4') throw new Error('thrown, not rejected');
        if (n.metadata!.name === 'n5') return new Promise<boolean>(() => {});
        return cloud.instances!.instanceShutdown(n, signal);
      },
    };
    shutDown.length = 0;
    const slow = providerDeadline(300);
    await forEachShutDown(mixed, nodes, 10, opts(slow), onShutdown);
    slow.dispose();
    expect(shutDown).toEqual(['n1']);
    expect(cloud.maxInFlight).toBeLessThanOrEqual(10);
    expect(errors.sort()).toEqual(['n2: boom', 'n4: thrown, not rejected', 'n5: provider did not answer within 300ms']);
  });

  test('node-by-node calls are bounded in concurrency', async () => {
    const cloud = new FakeCloud({ latencyMs: 5 });
    const nodes = Array.from({ length: 35 }, (_, i) => node(`n${i}`, 'False'));
    await askExistence(cloud.instances!, nodes, { timeoutMs: 5000 });
    expect(cloud.count('instanceExists')).toBe(35);
    expect(cloud.maxInFlight).toBeLessThanOrEqual(10);
  });
});

// --- the controller, with the provider fake and a recording writer ---

/** Records the writes the controller asks for; the real ones are covered by the integration test. */
class RecordingNodeWriter implements LifecycleWriter {
  readonly writes: string[] = [];
  deleteError?: Error;
  deleteOutcome: DeleteOutcome = 'deleted';

  async addTaint(n: V1Node, taint: V1Taint): Promise<boolean> {
    if (n.spec?.taints?.some((t) => t.key === taint.key)) return false;
    this.writes.push(`taint+ ${n.metadata?.name} ${taint.key}:${taint.effect}`);
    return true;
  }
  async removeTaints(n: V1Node, keys: readonly string[]): Promise<boolean> {
    this.writes.push(`taint- ${n.metadata?.name} ${keys.join(',')}`);
    return true;
  }
  async deleteNode(n: V1Node): Promise<DeleteOutcome> {
    if (this.deleteError) throw this.deleteError;
    this.writes.push(`delete ${n.metadata?.name} ${n.metadata?.uid}`);
    return this.deleteOutcome;
  }
}

const unusedTransport: KubeTransport = new Proxy({} as KubeTransport, {
  get: () => () => {
    throw new Error('the unit tests make no API calls');
  },
});

/**
 * `listed`: adds a Ready node `listed` whose machine the provider always lists, so that a
 * scenario's lone "not found" is one machine gone from a list, not an empty answer (which is
 * never believed: see the empty-answer tests).
 */
function harness(nodes: V1Node[], opts: LifecycleOptionsInput = {}, cloudOpts: { bulk?: boolean; listed?: boolean } = {}) {
  const cloud = new FakeCloud({ bulkExistence: cloudOpts.bulk ?? false });
  if (cloudOpts.listed) {
    nodes = [...nodes, node('listed', 'True')];
    cloud.setNode('listed', { existence: 'exists' });
  }
  const nodeInformer = new Informer<V1Node>({ transport: unusedTransport, type: NODES });
  for (const n of nodes) nodeInformer.store.upsert(n);
  const recorder = new RecordingEventRecorder();
  const registry = new Registry();
  const logLines: string[] = [];
  const managed = new Set<string>();
  const ctx = controllerContext({
    transport: unusedTransport,
    recorder,
    logger: createLogger({ write: (l) => logLines.push(l), verbosity: 4 }),
    registry,
    cloud,
    nodeInformer,
    isManagedNode: (n) => !n.metadata?.labels?.['unmanaged'],
  });
  const clock = new FakeClock(1_000_000);
  const writer = new RecordingNodeWriter();
  const controller = new CloudNodeLifecycleController(ctx, opts, { clock, writer });
  const metric = async (name: string, labels: Record<string, string> = {}) => {
    const m = (await registry.getSingleMetric(name)?.get())?.values.find((v) => Object.entries(labels).every(([k, val]) => v.labels[k] === val));
    return m?.value;
  };
  /** Runs one period, then moves the clock one period on. */
  const period = async () => {
    const report = await controller.monitorNodes();
    clock.advance(controller.options.monitorPeriodMs);
    return report;
  };
  return { cloud, nodeInformer, recorder, registry, logLines, managed, controller, clock, writer, metric, period };
}

const upstream = { ...UPSTREAM_COMPATIBLE_OPTIONS };

describe('controller: upstream scenarios (upstream-compatible options)', () => {
  test('node is not ready and does not exist: deleted, with a DeletingNode event', async () => {
    const h = harness([node('node0', 'False')], upstream, { listed: true });
    h.cloud.setNode('node0', { existence: 'not-found' });
    const report = await h.period();
    expect(report.deleted).toEqual(['node0']);
    expect(h.writer.writes).toEqual(['delete node0 uid-node0']);
    expect(h.recorder.events).toEqual([{ kind: 'Node', namespace: undefined, name: 'node0', type: 'Normal', reason: 'DeletingNode', message: 'Deleting node node0 because it does not exist in the cloud provider' }]);
    expect(await h.metric('edge_ccm_nodes_deleted_total')).toBe(1);
  });

  test('node ready condition is unknown (or missing), node does not exist: deleted', async () => {
    const h = harness([node('node0', 'Unknown'), node('node1', 'missing')], upstream, { listed: true });
    h.cloud.defaults.existence = 'not-found';
    expect((await h.period()).deleted.sort()).toEqual(['node0', 'node1']);
  });

  test('node is not ready and provider returns err: kept, nothing written', async () => {
    const h = harness([node('node0', 'False')], upstream);
    h.cloud.failWith('instanceExists', new Error('provider down'));
    const report = await h.period();
    expect(report.answers.get('node0')).toBe('unknown');
    expect(h.writer.writes).toEqual([]);
    expect(h.recorder.events).toEqual([]);
    expect(h.logLines.some((l) => l.includes('ERROR') && l.includes('provider down'))).toBe(true);
    expect(await h.metric('edge_ccm_instance_existence_answers_total', { answer: 'unknown' })).toBe(1);
  });

  test('node is ready but provider said it is deleted: kept (asked only to see the provider\'s whole answer)', async () => {
    const h = harness([node('node0', 'True')], upstream, { listed: true });
    h.cloud.defaults.existence = 'not-found';
    await h.period();
    expect(h.writer.writes).toEqual([]);
    expect(h.cloud.count('instanceExists', 'node0')).toBe(1);
  });

  test('node is not ready but still exists: not shut down -> nothing written', async () => {
    const h = harness([node('node0', 'False')], upstream);
    await h.period();
    expect(h.cloud.calls).toEqual(['instanceExists', 'instanceShutdown']);
    expect(h.writer.writes).toEqual([]);
  });

  test('node is not ready and was shutdown, but exists: shutdown taint added', async () => {
    const h = harness([node('node0', 'False')], upstream);
    h.cloud.setNode('node0', { shutdown: true });
    await h.period();
    expect(h.writer.writes).toEqual([`taint+ node0 ${SHUTDOWN_TAINT.key}:NoSchedule`]);
  });

  test('node is not ready, error checking shutdown: no taint', async () => {
    const h = harness([node('node0', 'False')], upstream);
    h.cloud.failWith('instanceShutdown', new Error('nope'));
    await h.period();
    expect(h.writer.writes).toEqual([]);
  });

  test('node is shutdown but provider says it does not exist: deleted', async () => {
    const h = harness([node('node0', 'False', { taints: [SHUTDOWN_TAINT] })], upstream, { listed: true });
    h.cloud.setNode('node0', { existence: 'not-found', shutdown: true });
    expect((await h.period()).deleted).toEqual(['node0']);
  });

  test('ready node with the shutdown taint: taint removed; without it: no write', async () => {
    const h = harness([node('node0', 'True', { taints: [SHUTDOWN_TAINT] }), node('node1', 'True')], upstream);
    await h.period();
    expect(h.writer.writes).toEqual([`taint- node0 ${SHUTDOWN_TAINT.key}`]);
  });

  test('delete failure: Warning DeletingNodeFailed', async () => {
    const h = harness([node('node0', 'False')], upstream, { listed: true });
    h.cloud.setNode('node0', { existence: 'not-found' });
    h.writer.deleteError = new Error('forbidden');
    await h.period();
    expect(h.recorder.reasons()).toEqual(['DeletingNode', 'DeletingNodeFailed']);
    expect(h.recorder.events[1]?.message).toBe('Failed deleting node node0: forbidden');
    expect(await h.metric('edge_ccm_nodes_deleted_total')).toBe(0);
  });

  test('a node Ready again or changed since its judgement (re-read before the delete) is kept, not counted, and judged again', async () => {
    const h = harness([node('node0', 'False')], upstream, { listed: true });
    h.cloud.setNode('node0', { existence: 'not-found' });
    h.writer.deleteOutcome = 'changed';
    expect((await h.period()).deleted).toEqual([]);
    expect(h.recorder.reasons()).toEqual(['DeletingNode', 'DeletingNodeCancelled']);
    expect(await h.metric('edge_ccm_nodes_deleted_total')).toBe(0);
    h.writer.deleteOutcome = 'deleted';
    expect((await h.period()).deleted).toEqual(['node0']);
  });

  test('a node re-registered under the same name (UID precondition failed) is kept and not counted', async () => {
    const h = harness([node('node0', 'False')], upstream);
    h.cloud.setNode('node0', { existence: 'not-found' });
    h.writer.deleteOutcome = 'replaced';
    expect((await h.period()).deleted).toEqual([]);
    expect(await h.metric('edge_ccm_nodes_deleted_total')).toBe(0);
  });
});

describe('controller: grace period and threshold (defaults)', () => {
  test('deleted only once both 5m since the first not-found and 3 answers in a row', async () => {
    const h = harness([node('n', 'False')], {}, { listed: true });
    h.cloud.setNode('n', { existence: 'not-found' });
    const first = await h.period();
    expect(first.held.get('n')).toBe('grace');
    h.clock.advance(5 * MINUTE); // grace over, but only 1 answer so far
    expect((await h.period()).held.get('n')).toBe('grace');
    expect((await h.period()).deleted).toEqual(['n']); // third answer, 5m+ after the first
    expect(await h.metric('edge_ccm_node_deletions_held_total', { reason: 'grace' })).toBe(2);
  });

  test('unknown breaks the run of answers but not the grace timer; exists resets both', async () => {
    const h = harness([node('n', 'False')], {}, { listed: true });
    h.cloud.setNode('n', { existence: 'not-found' });
    await h.period();
    await h.period();
    h.cloud.setNode('n', { existence: 'unknown' });
    await h.period();
    h.clock.advance(10 * MINUTE);
    h.cloud.setNode('n', { existence: 'not-found' });
    expect((await h.period()).held.get('n')).toBe('grace');
    expect((await h.period()).held.get('n')).toBe('grace');
    expect((await h.period()).deleted).toEqual(['n']); // three in a row; timer kept from the very first

    const h2 = harness([node('m', 'False')], {}, { listed: true });
    h2.cloud.setNode('m', { existence: 'not-found' });
    await h2.period();
    h2.cloud.setNode('m', { existence: 'exists' });
    await h2.period();
    h2.cloud.setNode('m', { existence: 'not-found' });
    h2.clock.advance(10 * MINUTE);
    await h2.period();
    await h2.period();
    expect((await h2.period()).held.get('m')).toBe('grace'); // timer restarted 2 periods ago
  });

  test('a provider outage (errors, then hangs) longer than the grace period deletes nothing', async () => {
    const h = harness([node('a', 'False'), node('b', 'False')], { providerTimeoutMs: 30 });
    h.cloud.failWith('instanceExists', new Error('503 Service Unavailable'));
    for (let i = 0; i < 5; i++) {
      await h.period();
      h.clock.advance(2 * MINUTE);
    }
    h.cloud.clearFailures();
    h.cloud.latencyMs = 60_000;
    for (let i = 0; i < 3; i++) {
      await h.period();
      h.clock.advance(2 * MINUTE);
    }
    expect(h.writer.writes).toEqual([]);
    expect(await h.metric('edge_ccm_instance_existence_answers_total', { answer: 'unknown' })).toBe(16);
  });

  test('the node becoming Ready forgets the streak', async () => {
    const n = node('n', 'False');
    const h = harness([n], {}, { listed: true });
    h.cloud.setNode('n', { existence: 'not-found' });
    await h.period();
    await h.period();
    h.nodeInformer.store.upsert(node('n', 'True'));
    await h.period();
    h.nodeInformer.store.upsert(n);
    h.clock.advance(10 * MINUTE);
    await h.period();
    expect((await h.period()).held.get('n')).toBe('grace');
  });
});

describe('controller: policy, protection, ownership', () => {
  const confirmAt = { gracePeriodMs: 0, notFoundThreshold: 1 };

  test('policy never: kept, held by policy, announced once in the log', async () => {
    const h = harness([node('n', 'False')], { ...confirmAt, deletionPolicy: 'never' }, { listed: true });
    h.cloud.setNode('n', { existence: 'not-found' });
    await h.period();
    await h.period();
    expect(h.writer.writes).toEqual([]);
    expect(await h.metric('edge_ccm_node_deletions_held_total', { reason: 'policy' })).toBe(2);
    expect(h.logLines.filter((l) => l.includes('deletion policy never')).length).toBe(1);
  });

  test('policy taint: quarantine taint and event, object kept; taint removed when the machine is back', async () => {
    const h = harness([node('n', 'False')], { ...confirmAt, deletionPolicy: 'taint' }, { listed: true });
    h.cloud.setNode('n', { existence: 'not-found' });
    const report = await h.period();
    expect(report.quarantined).toEqual(['n']);
    expect(h.writer.writes).toEqual([`taint+ n ${QUARANTINE_TAINT.key}:NoSchedule`]);
    expect(h.recorder.reasons()).toEqual(['NodeQuarantined']);
    h.nodeInformer.store.upsert(node('n', 'False', { taints: [QUARANTINE_TAINT] }));
    await h.period(); // already tainted: no second write
    expect(h.writer.writes.length).toBe(1);
    h.cloud.setNode('n', { existence: 'exists' });
    await h.period();
    expect(h.writer.writes[1]).toBe(`taint- n ${QUARANTINE_TAINT.key}`);
  });

  test('a quarantined node whose machine is back but shut down: the quarantine taint goes first, then the shutdown taint comes', async () => {
    // The shutdown question of such a node is asked once the pass's writes are done (one path
    // for every existing NotReady node), so both writes still happen, in this order.
    const h = harness([node('n', 'False', { taints: [QUARANTINE_TAINT] })], { ...confirmAt, deletionPolicy: 'taint' }, { listed: true });
    h.cloud.setNode('n', { existence: 'exists', shutdown: true });
    await h.period();
    expect(h.writer.writes).toEqual([`taint- n ${QUARANTINE_TAINT.key}`, `taint+ n ${SHUTDOWN_TAINT.key}:NoSchedule`]);
  });

  test('protection annotation: kept, logged, counted', async () => {
    const h = harness([node('n', 'False', { annotations: { [ANNOTATION_PROTECT_FROM_DELETION]: 'true' } })], confirmAt, { listed: true });
    h.cloud.setNode('n', { existence: 'not-found' });
    expect((await h.period()).held.get('n')).toBe('protected');
    expect(h.writer.writes).toEqual([]);
    expect(await h.metric('edge_ccm_node_deletions_held_total', { reason: 'protected' })).toBe(1);
    expect(h.logLines.some((l) => l.includes('protected from deletion'))).toBe(true);
  });

  test('nodes this CCM does not manage are never looked at', async () => {
    const foreign = node('foreign', 'False');
    foreign.metadata!.labels = { unmanaged: 'yes' };
    const h = harness([foreign, node('own', 'False')], upstream, { listed: true });
    h.cloud.defaults.existence = 'not-found';
    const report = await h.period();
    expect(report.deleted).toEqual(['own']);
    expect(h.cloud.count('instanceExists', 'foreign')).toBe(0);
  });
});

describe('controller: bulk existence', () => {
  test('one instancesExist call per period for all managed nodes, none per node', async () => {
    const nodes = [...Array.from({ length: 5 }, (_, i) => node(`down${i}`, 'False')), node('up0', 'True'), node('up1', 'True')];
    const h = harness(nodes, {}, { bulk: true });
    h.cloud.setNode('down0', { existence: 'not-found' }).setNode('down1', { error: new Error('x') });
    const report = await h.period();
    await h.period();
    expect(h.cloud.count('instancesExist')).toBe(2);
    expect(h.cloud.count('instanceExists')).toBe(0);
    expect(report.answers.size).toBe(7);
    expect(report.answers.get('down0')).toBe('not-found');
    expect(report.answers.get('down1')).toBe('unknown');
  });

  test('no managed node, no call', async () => {
    const foreign = node('foreign', 'False');
    foreign.metadata!.labels = { unmanaged: 'yes' };
    const h = harness([foreign], {}, { bulk: true });
    await h.period();
    expect(h.cloud.calls).toEqual([]);
  });
});

describe('controller: one provider deadline per pass', () => {
  /** A per-node provider that records the signal of every call, and hangs for the nodes named in `hang`. */
  function signalRecorder(hang: Set<string> = new Set()) {
    const signals: AbortSignal[] = [];
    const calls: string[] = [];
    const answer = <T>(method: string, n: V1Node, value: T, signal?: AbortSignal) => {
      signals.push(signal!);
      calls.push(`${method} ${n.metadata?.name}`);
      return hang.has(n.metadata?.name ?? '') ? new Promise<T>(() => {}) : Promise.resolve(value);
    };
    const instances = {
      instanceExists: (n: V1Node, signal?: AbortSignal) => answer('exists', n, 'exists' as Existence, signal),
      instanceShutdown: (n: V1Node, signal?: AbortSignal) => answer('shutdown', n, false as boolean | undefined, signal),
      instanceMetadata: async () => null,
    };
    return { instances, signals, calls };
  }
  function controllerWith(instances: ReturnType<typeof signalRecorder>['instances'], nodes: V1Node[], opts: LifecycleOptionsInput = {}) {
    const h = harness(nodes, opts);
    const ctx = { ...(h.controller as unknown as { ctx: ControllerContext }).ctx, cloud: { providerName: 'recorder', instances } };
    return new CloudNodeLifecycleController(ctx, opts, { clock: h.clock, writer: h.writer });
  }

  test('every existence and shutdown question of a pass shares one signal; the next pass has another', async () => {
    const rec = signalRecorder();
    const controller = controllerWith(rec.instances, Array.from({ length: 25 }, (_, i) => node(`n${i}`, 'False')));
    await controller.monitorNodes();
    expect(rec.calls.length).toBe(50); // 25 existence + 25 shutdown questions
    expect(new Set(rec.signals).size).toBe(1);
    const first = rec.signals[0]!;
    expect(first.aborted).toBe(false); // the pass ended before its deadline: nothing aborted
    await controller.monitorNodes();
    expect(rec.calls.length).toBe(100);
    expect(new Set(rec.signals).size).toBe(2);
  });

  test('once the pass deadline passes, the questions left are unknown and not sent', async () => {
    // n0..n9 hang: the ten workers wait on them until the pass's deadline; n10..n29 are never asked.
    const hang = new Set(Array.from({ length: 10 }, (_, i) => `n${i}`));
    const rec = signalRecorder(hang);
    const controller = controllerWith(rec.instances, Array.from({ length: 30 }, (_, i) => node(`n${i}`, 'False')), { providerTimeoutMs: 30 });
    const report = await controller.monitorNodes();
    expect([...report.answers.values()].every((a) => a === 'unknown')).toBe(true);
    expect(rec.calls.filter((c) => c.startsWith('exists')).length).toBe(10);
    expect(rec.calls.filter((c) => c.startsWith('shutdown')).length).toBe(0);
    expect(rec.signals[0]!.aborted).toBe(true);
  });
});

describe('controller: circuit breaker', () => {
  // The shrink rule off: these scenarios are about the breaker alone.
  const confirmAt = { gracePeriodMs: 0, notFoundThreshold: 1, shrinkMaxShare: 1 };
  const fleet = (n: number) => Array.from({ length: n }, (_, i) => node(`n${i}`, 'False'));

  test('trips when more than 20% are gone: nothing deleted, events, gauge, error log; clears when machines return', async () => {
    const h = harness(fleet(10), confirmAt);
    for (const name of ['n0', 'n1', 'n2']) h.cloud.setNode(name, { existence: 'not-found' });
    const tripped = await h.period();
    expect(tripped.breaker).toMatchObject({ open: true, allowed: 2, gone: 3, population: 10 });
    expect(tripped.deleted).toEqual([]);
    expect(h.writer.writes.filter((w) => w.startsWith('delete'))).toEqual([]);
    expect(h.recorder.events.map((e) => `${e.type} ${e.reason} ${e.name}`).sort()).toEqual(['Warning NodeDeletionHeld n0', 'Warning NodeDeletionHeld n1', 'Warning NodeDeletionHeld n2']);
    expect(h.recorder.events[0]?.message).toContain(`${ANNOTATION_ACKNOWLEDGE_DELETION}=true`);
    expect(await h.metric('edge_ccm_node_deletion_breaker_open')).toBe(1);
    expect(await h.metric('edge_ccm_node_deletions_held_total', { reason: 'breaker' })).toBe(3);
    expect(h.logLines.filter((l) => l.includes('ERROR') && l.includes('circuit breaker open')).length).toBe(1);

    // Held while the condition lasts (one error line only).
    h.clock.advance(60 * MINUTE);
    expect((await h.period()).deleted).toEqual([]);
    expect(h.logLines.filter((l) => l.includes('circuit breaker open')).length).toBe(1);

    // One machine is back: 2 gone of 10 is within the limit, the breaker closes and both go.
    h.cloud.setNode('n2', { existence: 'exists' });
    const cleared = await h.period();
    expect(cleared.breaker.open).toBe(false);
    expect(cleared.deleted.sort()).toEqual(['n0', 'n1']);
    expect(await h.metric('edge_ccm_node_deletion_breaker_open')).toBe(0);
    expect(h.logLines.some((l) => l.includes('circuit breaker closed'))).toBe(true);
  });

  test('an acknowledged node is deleted while the breaker holds the others', async () => {
    const nodes = fleet(4);
    nodes[1]!.metadata!.annotations = { [ANNOTATION_ACKNOWLEDGE_DELETION]: 'true' };
    const h = harness(nodes, confirmAt, { listed: true });
    h.cloud.defaults.existence = 'not-found'; // 4 of 5 gone: an outage, most likely
    const report = await h.period();
    expect(report.breaker.open).toBe(true);
    expect(report.deleted).toEqual(['n1']);
    expect([...report.held.entries()].filter(([, r]) => r === 'breaker').map(([n]) => n).sort()).toEqual(['n0', 'n2', 'n3']);
    // The acknowledged deletion still counts: the others stay held.
    h.nodeInformer.store.delete(nodes[1]!);
    const next = await h.period();
    expect(next.breaker).toMatchObject({ open: true, gone: 4, population: 5 });
    expect(next.deleted).toEqual([]);
  });

  test('breakerAcknowledged lets the whole batch through', async () => {
    const h = harness(fleet(4), { ...confirmAt, breakerAcknowledged: true }, { listed: true });
    h.cloud.defaults.existence = 'not-found';
    expect((await h.period()).deleted.length).toBe(4);
  });

  test('deletions within the window count: a slow drip trips too, and clears once the window passed', async () => {
    const h = harness(fleet(10), confirmAt);
    h.cloud.setNode('n0', { existence: 'not-found' }).setNode('n1', { existence: 'not-found' });
    expect((await h.period()).deleted.sort()).toEqual(['n0', 'n1']);
    // The informer has not caught up: the deleted nodes are neither judged nor counted twice.
    expect((await h.period()).breaker).toMatchObject({ open: false, gone: 2 });
    h.nodeInformer.store.delete(node('n0', 'False'));
    h.nodeInformer.store.delete(node('n1', 'False'));
    h.cloud.setNode('n2', { existence: 'not-found' });
    h.clock.advance(MINUTE);
    expect((await h.period()).breaker).toMatchObject({ open: true, gone: 3, population: 10 });
    h.clock.advance(10 * MINUTE);
    expect((await h.period()).deleted).toEqual(['n2']);
  });

  test('small clusters: one node may go; 2 gone of 3 trips', async () => {
    // (The last listed machine is never judged gone: that is the empty-answer rule.)
    const one = harness(fleet(1), confirmAt, { listed: true });
    one.cloud.defaults.existence = 'not-found';
    expect((await one.period()).deleted).toEqual(['n0']);

    const two = harness(fleet(2), confirmAt, { listed: true });
    two.cloud.defaults.existence = 'not-found';
    expect((await two.period()).breaker).toMatchObject({ open: true, allowed: 1, gone: 2 });
    const twoOneGone = harness(fleet(2), confirmAt);
    twoOneGone.cloud.setNode('n1', { existence: 'not-found' });
    expect((await twoOneGone.period()).deleted).toEqual(['n1']);
  });

  test('an absolute maxCount caps a large share', async () => {
    const h = harness(fleet(20), { ...confirmAt, breaker: { maxShare: 0.5, maxCount: 2 } });
    for (const name of ['n0', 'n1', 'n2']) h.cloud.setNode(name, { existence: 'not-found' });
    expect((await h.period()).breaker).toMatchObject({ open: true, allowed: 2, gone: 3 });
  });
});

describe('controller: empty or shrunken provider answers', () => {
  const MIN = MINUTE;
  /** n nodes with providerIDs of one scheme; the named ones NotReady. */
  const cluster = (n: number, notReady: string[], scheme = 'proxmox') => Array.from({ length: n }, (_, i) => {
    const name = `w${i}`;
    const nd = node(name, notReady.includes(name) ? 'False' : 'True');
    nd.spec!.providerID = `${scheme}://fra1/${100 + i}`;
    return nd;
  });
  const distrustEvents = (h: ReturnType<typeof harness>) => h.recorder.events.filter((e) => e.reason === 'ProviderAnswerDistrusted');

  for (const [label, opts] of [['defaults', {}], ['upstream-compatible', upstream], ['breaker acknowledged', { breakerAcknowledged: true }]] as const) {
    test(`the reported case (${label}): 10 nodes, one NotReady, every machine unlisted -> nothing deleted, Warning event, metric`, async () => {
      const h = harness(cluster(10, ['w0']), opts, { bulk: true });
      await h.period(); // all listed
      h.cloud.defaults.existence = 'not-found';
      for (let i = 0; i < 20; i++) {
        const report = await h.period();
        h.clock.advance(MIN);
        expect(report.deleted).toEqual([]);
        expect(report.answers.get('w0')).toBe('unknown');
        expect(report.distrusted.get('w0')).toBe('empty');
      }
      expect(h.writer.writes).toEqual([]);
      const events = distrustEvents(h);
      expect(events.length).toBeGreaterThan(0);
      expect(events.every((e) => e.type === 'Warning' && e.name === 'w0')).toBe(true);
      expect(events[0]?.message).toBe('Not judging node w0 gone: the cloud provider\'s answer listed none of the 10 managed nodes with providerID scheme proxmox://; ' +
        'an empty answer is an outage or lost permissions, never evidence that every machine is gone');
      expect(await h.metric('edge_ccm_provider_answer_distrusted', { reason: 'empty' })).toBe(1);
      expect(await h.metric('edge_ccm_provider_answers_distrusted_total', { reason: 'empty' })).toBe(200);
      expect(h.logLines.filter((l) => l.includes('ERROR') && l.includes('listed none of the managed nodes')).length).toBe(1);

      // The others are listed again, w0's machine is not: now that is believed, and w0 goes.
      h.cloud.defaults.existence = 'exists';
      h.cloud.setNode('w0', { existence: 'not-found' });
      let deleted: string[] = [];
      for (let i = 0; i < 10 && deleted.length === 0; i++) {
        deleted = (await h.period()).deleted;
        h.clock.advance(MIN);
      }
      expect(deleted).toEqual(['w0']);
      expect(await h.metric('edge_ccm_provider_answer_distrusted', { reason: 'empty' })).toBe(0);
    });
  }

  test('every node asked, Ready ones included (one bulk call; node by node without one): their answers make the snapshot', async () => {
    const bulk = harness(cluster(5, ['w0']), {}, { bulk: true });
    const report = await bulk.period();
    expect(bulk.cloud.count('instancesExist')).toBe(1);
    expect(report.answers.size).toBe(5);
    const single = harness(cluster(5, ['w0']));
    await single.period();
    expect(single.cloud.count('instanceExists')).toBe(5);
  });

  test('a shrunken answer: the missing ones unknown until confirmed over the grace period, then the usual grace, breaker and all', async () => {
    const h = harness(cluster(10, ['w0', 'w1', 'w2', 'w3', 'w4', 'w5']), { breakerAcknowledged: true }, { bulk: true });
    await h.period();
    for (const n of ['w0', 'w1', 'w2', 'w3', 'w4', 'w5']) h.cloud.setNode(n, { existence: 'not-found' });
    const first = await h.period();
    expect(first.distrusted.get('w0')).toBe('shrunk');
    expect(first.held.size).toBe(0); // unknown, not even a grace timer
    expect(distrustEvents(h)[0]?.message).toBe('Not judging node w0 gone yet: the cloud provider\'s answer lost 6 of the 10 machines with providerID scheme proxmox:// ' +
      'it listed before, more than the share 0.5 allowed; it is believed once consecutive answers confirm the smaller list for 5m0s');
    expect(await h.metric('edge_ccm_provider_answer_distrusted', { reason: 'shrunk' })).toBe(1);
    h.clock.advance(5 * MIN);
    expect((await h.period()).distrusted.get('w0')).toBe('shrunk'); // 5m, but only 2 reads
    const confirmed = await h.period(); // 3 reads over 5m: believed; the per-node grace starts now
    expect(confirmed.distrusted.size).toBe(0);
    expect(confirmed.held.get('w0')).toBe('grace');
    expect(await h.metric('edge_ccm_provider_answer_distrusted', { reason: 'shrunk' })).toBe(0);
    h.clock.advance(5 * MIN);
    await h.period();
    expect((await h.period()).deleted.sort()).toEqual(['w0', 'w1', 'w2', 'w3', 'w4', 'w5']);
  });

  test('a shrunken answer under the share is believed at once (then grace and breaker as before)', async () => {
    const h = harness(cluster(10, ['w0']), {}, { bulk: true });
    await h.period();
    h.cloud.setNode('w0', { existence: 'not-found' });
    const report = await h.period();
    expect(report.distrusted.size).toBe(0);
    expect(report.held.get('w0')).toBe('grace');
  });
});

describe('controller: construction', () => {
  test('a provider without instances is refused, as upstream', () => {
    const h = harness([]);
    const ctx = { ...(h.controller as unknown as { ctx: ControllerContext }).ctx, cloud: new FakeCloud({ instances: false }) };
    expect(() => new CloudNodeLifecycleController(ctx)).toThrow(/does not support instances/);
  });
  test('invalid options are refused', () => {
    const h = harness([]);
    const ctx = (h.controller as unknown as { ctx: ControllerContext }).ctx;
    expect(() => new CloudNodeLifecycleController(ctx, { notFoundThreshold: 0 })).toThrow(/threshold/);
  });
  test('name', () => {
    expect(harness([]).controller.name).toBe('cloud-node-lifecycle-controller');
  });
});
