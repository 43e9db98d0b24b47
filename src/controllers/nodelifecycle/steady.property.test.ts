import { expect, test } from 'bun:test';
import fc from 'fast-check';
import type { V1Node, V1NodeCondition, V1Taint } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import type { CloudProvider, Existence } from '../../cloud/types.ts';
import { Informer } from '../../kube/informer/index.ts';
import { NODES } from '../../kube/resources.ts';
import type { KubeTransport } from '../../kube/transport.ts';
import { createLogger } from '../../log.ts';
import { FakeClock } from '../../../test/fakes/fake-clock.ts';
import { RecordingEventRecorder } from '../../../test/fakes/event-recorder.ts';
import { controllerContext } from '../../../test/fakes/controller-context.ts';
import { CloudNodeLifecycleController, type DeleteOutcome, type LifecycleWriter } from './index.ts';
import { DELETION_HELD_CONDITION, HeldConditionWriter } from './held-condition.ts';
import { QUARANTINE_TAINT, SHUTDOWN_TAINT } from './keys.ts';
import { ProviderSnapshots } from './snapshot.ts';
import { SteadyPass } from './steady.ts';

/**
 * The steady pass's shortcut (steady.ts) changes nothing anyone can see: two controllers, one
 * with it and one judging every node every pass, each in its own world (its node store, its
 * writes applied to it as the informer would deliver them), get the same random script of node
 * changes, provider answers, outages, failed writes, time and passes; after every pass their
 * writes, events, log lines, metrics and reports are the same.
 */

const NAMES = ['n0', 'n1', 'n2', 'n3', 'n4', 'n5'];
type Answer = Existence | 'error';

const unusedTransport: KubeTransport = new Proxy({} as KubeTransport, {
  get: () => () => {
    throw new Error('no API calls here');
  },
});

/** What the provider answers and whether writes fail: the same for both worlds. */
interface Outside {
  answers: Map<string, Answer>;
  shutdown: Map<string, boolean | undefined>;
  /** The whole bulk call fails. */
  down: boolean;
  writesFail: boolean;
}

type Step =
  | { kind: 'pass' }
  | { kind: 'time'; ms: number }
  | { kind: 'ready'; node: number; ready: boolean }
  | { kind: 'taint'; node: number; which: 'shutdown' | 'quarantine'; on: boolean }
  | { kind: 'protect'; node: number; on: boolean }
  | { kind: 'held-condition'; node: number }
  | { kind: 'remove'; node: number }
  | { kind: 'answer'; node: number; answer: Answer }
  | { kind: 'shutdown'; node: number; value: boolean | undefined }
  | { kind: 'down'; on: boolean }
  | { kind: 'writes-fail'; on: boolean };

const stepArb: fc.Arbitrary<Step> = fc.oneof(
  { weight: 6, arbitrary: fc.constant<Step>({ kind: 'pass' }) },
  { weight: 2, arbitrary: fc.integer({ min: 1, max: 120_000 }).map<Step>((ms) => ({ kind: 'time', ms })) },
  ...([
    fc.record({ kind: fc.constant('ready' as const), node: fc.nat(5), ready: fc.boolean() }),
    fc.record({ kind: fc.constant('taint' as const), node: fc.nat(5), which: fc.constantFrom('shutdown' as const, 'quarantine' as const), on: fc.boolean() }),
    fc.record({ kind: fc.constant('protect' as const), node: fc.nat(5), on: fc.boolean() }),
    fc.record({ kind: fc.constant('held-condition' as const), node: fc.nat(5) }),
    fc.record({ kind: fc.constant('remove' as const), node: fc.nat(5) }),
    fc.record({ kind: fc.constant('answer' as const), node: fc.nat(5), answer: fc.constantFrom<Answer>('exists', 'exists', 'not-found', 'unknown', 'error') }),
    fc.record({ kind: fc.constant('shutdown' as const), node: fc.nat(5), value: fc.constantFrom(true, false, false, undefined) }),
    fc.record({ kind: fc.constant('down' as const), on: fc.boolean() }),
    fc.record({ kind: fc.constant('writes-fail' as const), on: fc.boolean() }),
  ] as fc.Arbitrary<Step>[]).map((arbitrary) => ({ weight: 1, arbitrary })),
);

function nodeOf(name: string, ready: boolean): V1Node {
  return {
    metadata: { name, uid: `uid-${name}`, resourceVersion: '1' },
    spec: { providerID: `static://${name}` },
    status: { conditions: [{ type: 'Ready', status: ready ? 'True' : 'False' }] },
  };
}

/** One controller and what it acts on; its writes land in its own store, as the informer would bring them back. */
class World {
  readonly store = new Informer<V1Node>({ transport: unusedTransport, type: NODES });
  readonly recorder = new RecordingEventRecorder();
  readonly registry = new Registry();
  readonly clock = new FakeClock(1_000_000);
  readonly lines: string[] = [];
  readonly writes: string[] = [];
  readonly controller: CloudNodeLifecycleController;

  constructor(private readonly outside: Outside, steadyShortcut: boolean) {
    for (const name of NAMES) this.store.store.upsert(nodeOf(name, false));
    const provider: CloudProvider = {
      providerName: 'static',
      instances: {
        instanceExists: async () => 'unknown',
        instancesExist: async (nodes) => {
          if (outside.down) throw new Error('provider API down');
          return nodes.map((n) => {
            const answer = outside.answers.get(n.metadata!.name!) ?? 'exists';
            return answer === 'error' ? 'unknown' : answer;
          });
        },
        instanceShutdown: async (n) => outside.shutdown.get(n.metadata!.name!),
        instanceMetadata: async () => null,
      },
    };
    const ctx = controllerContext({
      transport: unusedTransport,
      recorder: this.recorder,
      // Each line without its time stamp (the two worlds write a millisecond apart).
      logger: createLogger({ write: (line) => this.lines.push(line.replace(/^\S+ /, '')), verbosity: 4 }),
      registry: this.registry,
      cloud: provider,
      nodeInformer: this.store,
      isManagedNode: () => true,
    });
    const world = this;
    const heldConditions = {
      async write(node: V1Node, patch: { status: { conditions: (V1NodeCondition & { $patch?: string })[] } }) {
        world.write(`condition ${node.metadata!.name}`, node, (n) => {
          const [change] = patch.status.conditions;
          const kept = (n.status?.conditions ?? []).filter((c) => c.type !== DELETION_HELD_CONDITION);
          n.status = { ...n.status, conditions: change!.$patch === 'delete' ? kept : [...kept, change!] };
        });
      },
    } as unknown as HeldConditionWriter;
    const writer: LifecycleWriter = {
      addTaint: async (node: V1Node, taint: V1Taint) => world.write(`taint ${node.metadata!.name} ${taint.key}`, node, (n) => {
        n.spec = { ...n.spec, taints: [...(n.spec?.taints ?? []).filter((t) => t.key !== taint.key), taint] };
      }),
      removeTaints: async (node: V1Node, keys: readonly string[]) => world.write(`untaint ${node.metadata!.name} ${keys.join(',')}`, node, (n) => {
        n.spec = { ...n.spec, taints: (n.spec?.taints ?? []).filter((t) => !keys.includes(t.key)) };
      }),
      deleteNode: async (node: V1Node): Promise<DeleteOutcome> => {
        world.write(`delete ${node.metadata!.name}`, node, () => {});
        world.store.store.delete(node);
        return 'deleted';
      },
    };
    this.controller = new CloudNodeLifecycleController(ctx, {
      monitorPeriodMs: 1000, gracePeriodMs: 30_000, notFoundThreshold: 2, deletionPolicy: 'delete', shrinkMaxShare: 0.3,
      breaker: { maxShare: 0.34, windowMs: 10 * 60_000 },
    }, { clock: this.clock, writer, heldConditions, steadyShortcut });
  }

  /** Records a write; unless writes fail, the node's new object replaces the cached one (as a watch event would). */
  private write(what: string, node: V1Node, change: (copy: V1Node) => void): boolean {
    this.writes.push(what);
    if (this.outside.writesFail) throw new Error('API refuses the write');
    const copy = structuredClone(node);
    change(copy);
    copy.metadata!.resourceVersion = String(Number(copy.metadata!.resourceVersion) + 1);
    if (this.store.store.get(node.metadata!.name!)) this.store.store.upsert(copy);
    return true;
  }

  /** A change made by someone else (the kubelet, an operator): a new object in the cache. */
  change(name: string, change: (copy: V1Node) => void): void {
    const current = this.store.store.get(name);
    const copy = current ? structuredClone(current) : nodeOf(name, false);
    change(copy);
    this.store.store.upsert(copy);
  }

  remove(name: string): void {
    const current = this.store.store.get(name);
    if (current) this.store.store.delete(current);
  }

  async pass(): Promise<unknown> {
    const report = await this.controller.monitorNodes();
    return {
      answers: Object.fromEntries(report.answers),
      distrusted: Object.fromEntries(report.distrusted),
      held: Object.fromEntries(report.held),
      quarantined: report.quarantined,
      deleted: report.deleted,
      breaker: { ...report.breaker, deletable: report.breaker.deletable.map((n) => n.metadata!.name), held: report.breaker.held.map((n) => n.metadata!.name) },
    };
  }
}

function apply(step: Step, outside: Outside, worlds: World[]): void {
  const name = 'node' in step ? NAMES[step.node]! : '';
  const each = (change: (copy: V1Node) => void) => worlds.forEach((w) => w.change(name, change));
  switch (step.kind) {
    case 'time':
      worlds.forEach((w) => w.clock.advance(step.ms));
      break;
    case 'ready':
      each((n) => (n.status = { ...n.status, conditions: [...(n.status?.conditions ?? []).filter((c) => c.type !== 'Ready'), { type: 'Ready', status: step.ready ? 'True' : 'False' }] }));
      break;
    case 'taint': {
      const taint = step.which === 'shutdown' ? SHUTDOWN_TAINT : QUARANTINE_TAINT;
      each((n) => (n.spec = { ...n.spec, taints: [...(n.spec?.taints ?? []).filter((t) => t.key !== taint.key), ...(step.on ? [taint] : [])] }));
      break;
    }
    case 'protect':
      each((n) => (n.metadata = { ...n.metadata, annotations: step.on ? { 'node.edge-ccm.io/protect-from-deletion': 'true' } : {} }));
      break;
    case 'held-condition':
      // A condition left by an earlier run (or another writer): the controller removes it if nothing holds the node.
      each((n) => (n.status = { ...n.status, conditions: [...(n.status?.conditions ?? []), { type: DELETION_HELD_CONDITION, status: 'True', reason: 'GracePeriod', message: 'old' }] }));
      break;
    case 'remove':
      worlds.forEach((w) => w.remove(name));
      break;
    case 'answer':
      outside.answers.set(name, step.answer);
      break;
    case 'shutdown':
      outside.shutdown.set(name, step.value);
      break;
    case 'down':
      outside.down = step.on;
      break;
    case 'writes-fail':
      outside.writesFail = step.on;
      break;
  }
}

/** Counts the snapshot judgements (one per full pass) until restored. */
function countJudgements(): { readonly count: number; restore(): void } {
  const judge = ProviderSnapshots.prototype.judge;
  let count = 0;
  ProviderSnapshots.prototype.judge = function (...args) {
    count++;
    return judge.apply(this, args);
  };
  return {
    get count() {
      return count;
    },
    restore: () => void (ProviderSnapshots.prototype.judge = judge),
  };
}

test('a controller taking the steady shortcut writes, tells and reports exactly what one judging every node every pass does', async () => {
  // Counted, so that the property is known to have run the shortcut, not only the full pass.
  let skipped = 0;
  const repeated = SteadyPass.prototype.repeated;
  SteadyPass.prototype.repeated = function (...args) {
    const quiet = repeated.apply(this, args);
    if (quiet) skipped++;
    return quiet;
  };
  try {
    await fc.assert(fc.asyncProperty(fc.array(stepArb, { minLength: 1, maxLength: 40 }), async (steps) => {
      const outside: Outside = { answers: new Map(), shutdown: new Map(), down: false, writesFail: false };
      const [fast, full] = [new World(outside, true), new World(outside, false)] as const;
      for (const step of [...steps, { kind: 'pass' } as const]) {
        if (step.kind !== 'pass') {
          apply(step, outside, [fast, full]);
          continue;
        }
        const [a, b] = [await fast.pass(), await full.pass()];
        expect(a).toEqual(b);
        expect(fast.writes).toEqual(full.writes);
        expect(fast.recorder.events).toEqual(full.recorder.events);
        expect(fast.lines).toEqual(full.lines);
        expect(await fast.registry.metrics()).toEqual(await full.registry.metrics());
      }
    }), { numRuns: 300 });
  } finally {
    SteadyPass.prototype.repeated = repeated;
  }
  expect(skipped).toBeGreaterThan(100);
});

test('a pass repeating a quiet one judges nothing; a changed node, answer or outage brings the judgement back', async () => {
  const outside: Outside = { answers: new Map(), shutdown: new Map(), down: false, writesFail: false };
  const world = new World(outside, true);
  const judgements = countJudgements();
  try {
    const judgedBy = async (before: () => void) => {
      before();
      const from = judgements.count;
      await world.pass();
      return judgements.count - from;
    };
    expect(await judgedBy(() => {})).toBe(1); // the first pass
    expect(await judgedBy(() => {})).toBe(0); // a repeat of a quiet pass
    expect(await judgedBy(() => world.change('n1', (n) => (n.metadata!.labels = { changed: 'yes' })))).toBe(1);
    expect(await judgedBy(() => {})).toBe(0);
    expect(await judgedBy(() => outside.answers.set('n2', 'unknown'))).toBe(1);
    // Not quiet (a NotReady node nobody can tell about): judged again, every pass.
    expect(await judgedBy(() => {})).toBe(1);
    expect(await judgedBy(() => outside.answers.set('n2', 'exists'))).toBe(1);
    expect(await judgedBy(() => {})).toBe(0);
    // A shutdown answer is asked every pass, steady or not: the taint follows at once.
    outside.shutdown.set('n3', true);
    expect(await judgedBy(() => {})).toBe(0);
    expect(world.writes).toEqual([`taint n3 ${SHUTDOWN_TAINT.key}`]);
    expect(await judgedBy(() => {})).toBe(1); // n3 changed (tainted)
    expect(await judgedBy(() => world.remove('n4'))).toBe(1);
    // A write that failed leaves the node as it was: the pass was not quiet, the next one tries again.
    outside.writesFail = true;
    world.writes.length = 0;
    expect(await judgedBy(() => world.change('n1', (n) => (n.status!.conditions = [{ type: 'Ready', status: 'True' }])))).toBe(1);
    expect(await judgedBy(() => {})).toBe(0);
    expect(await judgedBy(() => world.change('n1', (n) => (n.spec!.taints = [QUARANTINE_TAINT])))).toBe(1);
    expect(await judgedBy(() => {})).toBe(1);
    expect(world.writes.filter((w) => w.includes(' n1 '))).toEqual([`untaint n1 ${QUARANTINE_TAINT.key}`, `untaint n1 ${QUARANTINE_TAINT.key}`]);
    // So is a DeletionHeld condition left over whose removal failed.
    expect(await judgedBy(() => world.change('n2', (n) => n.status!.conditions!.push({ type: DELETION_HELD_CONDITION, status: 'True', reason: 'GracePeriod', message: 'old' })))).toBe(1);
    expect(await judgedBy(() => {})).toBe(1);
    expect(world.writes.filter((w) => w === 'condition n2')).toEqual(['condition n2', 'condition n2']);
    outside.writesFail = false;
    expect(await judgedBy(() => (outside.down = true))).toBe(1);
  } finally {
    judgements.restore();
  }
});

test('a provider handing back one list it changes in place is judged again when an answer changes', async () => {
  const answers: Existence[] = ['exists', 'exists'];
  const store = new Informer<V1Node>({ transport: unusedTransport, type: NODES });
  for (const n of [nodeOf('a', false), nodeOf('b', false)]) store.store.upsert(n);
  const cloud: CloudProvider = {
    providerName: 'static',
    instances: { instanceExists: async () => 'unknown', instancesExist: async () => answers, instanceShutdown: async () => false, instanceMetadata: async () => null },
  };
  const ctx = controllerContext({ transport: unusedTransport, recorder: new RecordingEventRecorder(), registry: new Registry(), cloud, nodeInformer: store, isManagedNode: () => true });
  const controller = new CloudNodeLifecycleController(ctx, { gracePeriodMs: 0, notFoundThreshold: 1, deletionPolicy: 'never' }, { clock: new FakeClock(1_000_000) });
  const judgements = countJudgements();
  try {
    await controller.monitorNodes();
    await controller.monitorNodes();
    expect(judgements.count).toBe(1);
    answers[1] = 'not-found';
    const report = await controller.monitorNodes();
    expect(judgements.count).toBe(2);
    expect([...report.held]).toEqual([['b', 'policy']]);
  } finally {
    judgements.restore();
  }
});
