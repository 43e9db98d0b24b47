import { describe, expect, test } from 'bun:test';
import type { V1Node, V1Taint } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import { Informer } from '../../kube/informer/index.ts';
import { NODES } from '../../kube/resources.ts';
import type { KubeTransport } from '../../kube/transport.ts';
import { silentLogger } from '../../log.ts';
import { BreakerLink } from './breaker-link.ts';
import { FakeClock } from '../../../test/fakes/fake-clock.ts';
import { FakeCloud } from '../../../test/fakes/fake-cloud.ts';
import { RecordingEventRecorder } from '../../../test/fakes/event-recorder.ts';
import { controllerContext } from '../../../test/fakes/controller-context.ts';
import { CloudNodeLifecycleController } from './controller.ts';
import { DELETION_HELD_CONDITION, HeldConditionWriter } from './held-condition.ts';
import type { LifecycleOptionsInput } from './options.ts';
import type { DeleteOutcome, LifecycleWriter } from './writer.ts';

/**
 * The lifecycle controller's edge-ccm.io/DeletionHeld condition, one reason per way a node is
 * kept (grace period, protection, policy, breaker, a distrusted provider answer), and the
 * breaker acknowledgment through the EdgeCCMStatus object (BreakerLink).
 */

const unusedTransport: KubeTransport = new Proxy({} as KubeTransport, {
  get: () => () => {
    throw new Error('no API calls here');
  },
});

class RecordingHeldWriter extends HeldConditionWriter {
  readonly patches = new Map<string, Record<string, unknown>>();
  constructor() {
    super(unusedTransport);
  }
  override async write(node: V1Node, patch: Record<string, unknown>): Promise<void> {
    this.patches.set(node.metadata!.name!, patch);
  }
}

class Writes implements LifecycleWriter {
  deleted: string[] = [];
  async addTaint(): Promise<boolean> {
    return true;
  }
  async removeTaints(): Promise<boolean> {
    return true;
  }
  async deleteNode(node: V1Node): Promise<DeleteOutcome> {
    this.deleted.push(node.metadata!.name!);
    return 'deleted';
  }
}

function node(name: string, ready: boolean, extra: { annotations?: Record<string, string>; taints?: V1Taint[] } = {}): V1Node {
  return {
    metadata: { name, uid: `uid-${name}`, resourceVersion: '1', annotations: extra.annotations },
    spec: { providerID: `fake://${name}`, taints: extra.taints },
    status: { conditions: [{ type: 'Ready', status: ready ? 'True' : 'False' }] },
  };
}

function harness(nodes: V1Node[], opts: LifecycleOptionsInput, link?: BreakerLink) {
  const cloud = new FakeCloud({});
  const nodeInformer = new Informer<V1Node>({ transport: unusedTransport, type: NODES });
  for (const n of nodes) nodeInformer.store.upsert(n);
  const ctx = controllerContext({
    transport: unusedTransport, recorder: new RecordingEventRecorder(), logger: silentLogger, registry: new Registry(), cloud, nodeInformer, isManagedNode: () => true,
  });
  const held = new RecordingHeldWriter();
  const writes = new Writes();
  const clock = new FakeClock(1_000_000);
  const controller = new CloudNodeLifecycleController(ctx, opts, { clock, writer: writes, heldConditions: held, breakerLink: link, statusObject: 'ccm' });
  return { cloud, held, writes, controller, clock };
}

const reasonOf = (patch: Record<string, unknown> | undefined) =>
  (patch as { status?: { conditions?: { type: string; reason?: string; message?: string; $patch?: string }[] } } | undefined)?.status?.conditions?.[0];

describe('DeletionHeld', () => {
  test('grace period, protection and policy each say why; a Ready node says nothing', async () => {
    const h = harness([node('ok', true), node('other', true), node('waiting', false), node('kept', false, { annotations: { 'node.edge-ccm.io/protect-from-deletion': 'true' } })], { gracePeriodMs: 60_000 });
    h.cloud.setNode('waiting', { existence: 'not-found' });
    h.cloud.setNode('kept', { existence: 'not-found' });
    await h.controller.monitorNodes();
    expect(reasonOf(h.held.patches.get('waiting'))).toMatchObject({ type: DELETION_HELD_CONDITION, reason: 'GracePeriod' });
    expect(reasonOf(h.held.patches.get('waiting'))!.message).toContain('deleted once not found for 1m0s and 3 answers in a row');
    expect(h.held.patches.has('ok')).toBe(false);
    h.clock.advance(120_000);
    await h.controller.monitorNodes();
    await h.controller.monitorNodes();
    h.clock.advance(120_000);
    await h.controller.monitorNodes();
    expect(reasonOf(h.held.patches.get('kept'))).toMatchObject({ reason: 'Protected' });

    const never = harness([node('ok', true), node('gone', false)], { gracePeriodMs: 0, notFoundThreshold: 1, deletionPolicy: 'never' });
    never.cloud.setNode('gone', { existence: 'not-found' });
    await never.controller.monitorNodes();
    expect(reasonOf(never.held.patches.get('gone'))).toMatchObject({ reason: 'DeletionPolicy' });
    expect(reasonOf(never.held.patches.get('gone'))!.message).toContain('--node-deletion-policy=never');
  });

  test('a distrusted (empty) provider answer: every NotReady node says so, and nothing is deleted', async () => {
    const h = harness([node('a', false), node('b', true)], { gracePeriodMs: 0, notFoundThreshold: 1 });
    h.cloud.defaults.existence = 'not-found';
    await h.controller.monitorNodes();
    expect(reasonOf(h.held.patches.get('a'))).toMatchObject({ reason: 'ProviderAnswerDistrusted' });
    expect(reasonOf(h.held.patches.get('a'))!.message).toContain('listed none of its managed nodes');
    expect(h.held.patches.has('b')).toBe(false);
    expect(h.writes.deleted).toEqual([]);
  });

  test('the breaker: held nodes say why and how to acknowledge; the object\'s acknowledgment lets exactly the listed ones go, once', async () => {
    const link = new BreakerLink();
    const nodes = [node('n1', false), node('n2', false), node('n3', true), node('n4', true), node('n5', true)];
    const h = harness(nodes, { gracePeriodMs: 0, notFoundThreshold: 1 }, link);
    for (const n of ['n1', 'n2']) h.cloud.setNode(n, { existence: 'not-found' });
    await h.controller.monitorNodes();
    expect(h.writes.deleted).toEqual([]);
    expect(link.current).toMatchObject({ open: true, gone: 2, allowed: 1, population: 5, held: ['n1', 'n2'] });
    const msg = reasonOf(h.held.patches.get('n1'))!;
    expect(msg.reason).toBe('Breaker');
    expect(msg.message).toContain('kubectl annotate node n1 node.edge-ccm.io/acknowledge-deletion=true');
    expect(msg.message).toContain('kubectl annotate edgeccmstatus ccm edge-ccm.io/acknowledge-node-deletions=true');
    // The operator acknowledged what the object listed: n1 only (say n2 was not listed yet).
    link.setAcknowledgment(['n1']);
    await h.controller.monitorNodes();
    expect(h.writes.deleted).toEqual(['n1']);
    expect(link.takeUsed()).toBe(true);
    await h.controller.monitorNodes();
    expect(h.writes.deleted).toEqual(['n1']);
  });

  test('no longer held: the condition is removed', async () => {
    const h = harness([node('ok', true), node('x', false)], { gracePeriodMs: 60_000 });
    h.cloud.setNode('x', { existence: 'not-found' });
    await h.controller.monitorNodes();
    const written = reasonOf(h.held.patches.get('x'))!;
    const back = node('x', true);
    back.status!.conditions!.push({ type: DELETION_HELD_CONDITION, status: 'True', reason: written.reason!, message: written.message! });
    const again = harness([node('ok', true), back], { gracePeriodMs: 60_000 });
    await again.controller.monitorNodes();
    expect(reasonOf(again.held.patches.get('x'))).toEqual({ $patch: 'delete', type: DELETION_HELD_CONDITION });
  });
});
