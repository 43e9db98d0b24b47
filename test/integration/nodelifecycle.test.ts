import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import type { CoreV1Event, V1Node, V1Taint } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import {
  ANNOTATION_ACKNOWLEDGE_DELETION,
  ApiLifecycleWriter,
  CloudNodeLifecycleController,
  type LifecycleOptionsInput,
  type LifecycleWriter,
  SHUTDOWN_TAINT,
} from '../../src/controllers/nodelifecycle/index.ts';
import { nodeName } from '../../src/kube/node-helpers.ts';
import type { KubeTransport } from '../../src/kube/transport.ts';
import { createLogger } from '../../src/log.ts';
import { FakeCloud } from '../fakes/fake-cloud.ts';
import { startNodeTestCluster, type NodeTestCluster } from '../harness/node-cluster.ts';
import { eventually } from '../harness/eventually.ts';
import { nodeExists, setReady } from '../harness/nodes.ts';

// The lifecycle controller against a real API server: nodes are created NotReady (no kubelet
// runs, so their status stays as written) and the fake provider plays outages and removals.

const PREFIX = `nlc-${process.pid}-`;
const GRACE_MS = 1_500;
const OPTIONS: LifecycleOptionsInput = { monitorPeriodMs: 300, gracePeriodMs: GRACE_MS, notFoundThreshold: 2, providerTimeoutMs: 200 };

let cluster: NodeTestCluster | undefined;
let transport: KubeTransport, nodes: NodeTestCluster['nodes'], events: NodeTestCluster['events'];
let nodeInformer: NodeTestCluster['nodeInformer'], broadcaster: NodeTestCluster['broadcaster'];
const logger = createLogger({ write: () => {} });

beforeAll(async () => {
  cluster = await startNodeTestCluster(PREFIX, logger);
  ({ transport, nodes, events, nodeInformer, broadcaster } = cluster);
}, 240_000);

afterAll(() => cluster?.stop());


/** Creates NotReady nodes (Ready=False, as a node whose kubelet stopped) and waits for the informer to see them. */
async function createNotReadyNodes(scenario: string, count: number, taints?: V1Taint[]): Promise<string[]> {
  const names = Array.from({ length: count }, (_, i) => `${PREFIX}${scenario}-${i}`);
  for (const name of names) {
    await nodes.create({ apiVersion: 'v1', kind: 'Node', metadata: { name, labels: { 'kubernetes.io/hostname': name } }, spec: { taints } });
    await setReady(nodes, name, 'False');
  }
  await eventually('the informer to see the NotReady nodes', () =>
    names.every((n) => nodeInformer.store.get(n)?.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'False')));
  return names;
}



/** Taint keys, without the not-ready taint the API server's TaintNodesByCondition admission adds to new nodes. */
async function taintKeys(name: string): Promise<string[]> {
  return ((await nodes.get(name)).spec?.taints ?? []).map((t) => t.key).filter((k) => k !== 'node.kubernetes.io/not-ready');
}

async function eventsFor(name: string, reason: string): Promise<CoreV1Event[]> {
  await broadcaster.flush();
  const list = await events.list({ namespace: 'default', query: { fieldSelector: `involvedObject.name=${name},reason=${reason}` } });
  return list.items;
}

/** Runs a controller that manages exactly these nodes until the returned stop() is called. */
function startController(cloud: FakeCloud, names: string[], opts: LifecycleOptionsInput = OPTIONS, writer?: LifecycleWriter) {
  const registry = new Registry();
  const ctx = cluster!.context('cloud-node-lifecycle-controller', cloud, names, registry);
  const controller = new CloudNodeLifecycleController(ctx, opts, { writer });
  const abort = new AbortController();
  const run = controller.run(abort.signal);
  const metric = async (name: string) => (await registry.getSingleMetric(name)?.get())?.values[0]?.value;
  return {
    controller,
    metric,
    stop: async () => {
      abort.abort();
      await run;
    },
  };
}

describe('cloud node lifecycle controller against a real API server', () => {
  test('a provider outage (errors, hangs, unknown) longer than the grace period deletes nothing', async () => {
    const names = await createNotReadyNodes('outage', 4);
    const cloud = new FakeCloud();
    cloud.failWith('instanceExists', new Error('503 Service Unavailable'));
    const c = startController(cloud, names);
    try {
      const phase = (calls: number) => eventually(`${calls} provider calls`, () => cloud.count('instanceExists') >= calls);
      const started = performance.now();
      await phase(4 * 4); // four periods of errors
      cloud.clearFailures();
      cloud.latencyMs = 60_000; // hangs past the 200ms timeout
      await phase(8 * 4);
      cloud.latencyMs = 0;
      cloud.defaults.existence = 'unknown';
      await phase(12 * 4);
      // Longer than the grace period in all, with every node NotReady the whole time.
      await eventually('the grace period to pass twice', () => performance.now() - started > 2 * GRACE_MS);
      await phase(cloud.count('instanceExists') + 4);
      for (const name of names) expect(await nodeExists(nodes, name)).toBe(true);
      expect(await c.metric('edge_ccm_nodes_deleted_total')).toBe(0);
    } finally {
      await c.stop();
    }
  }, 120_000);

  test('a machine really removed is deleted after the grace period, with a DeletingNode event; the others stay', async () => {
    const names = await createNotReadyNodes('removed', 4);
    const gone = names[2]!;
    const cloud = new FakeCloud();
    cloud.setNode(gone, { existence: 'not-found' });
    const started = performance.now();
    const c = startController(cloud, names);
    try {
      await eventually(`${gone} to be deleted`, async () => !(await nodeExists(nodes, gone)));
      expect(performance.now() - started).toBeGreaterThanOrEqual(GRACE_MS);
      expect(cloud.count('instanceExists', gone)).toBeGreaterThanOrEqual(2);
      for (const name of names.filter((n) => n !== gone)) expect(await nodeExists(nodes, name)).toBe(true);
      const deleting = await eventsFor(gone, 'DeletingNode');
      expect(deleting.map((e) => [e.type, e.message])).toEqual([['Normal', `Deleting node ${gone} because it does not exist in the cloud provider`]]);
      expect(await c.metric('edge_ccm_nodes_deleted_total')).toBe(1);
    } finally {
      await c.stop();
    }
  }, 120_000);

  test('half the nodes vanishing at once trips the breaker: nothing deleted, Warning events; an acknowledged node then goes', async () => {
    const names = await createNotReadyNodes('breaker', 4);
    const [a, b] = [names[0]!, names[1]!];
    const cloud = new FakeCloud();
    cloud.setNode(a, { existence: 'not-found' }).setNode(b, { existence: 'not-found' });
    const c = startController(cloud, names);
    try {
      const held = await eventually('NodeDeletionHeld events', async () => {
        const found = [...(await eventsFor(a, 'NodeDeletionHeld')), ...(await eventsFor(b, 'NodeDeletionHeld'))];
        return found.length === 2 ? found : undefined;
      });
      expect(held.every((e) => e.type === 'Warning' && e.message?.includes('2 of 4 managed nodes'))).toBe(true);
      expect(await c.metric('edge_ccm_node_deletion_breaker_open')).toBe(1);
      // Several more periods: still nothing deleted.
      const calls = cloud.count('instanceExists');
      await eventually('more periods', () => cloud.count('instanceExists') >= calls + 5 * 4);
      for (const name of names) expect(await nodeExists(nodes, name)).toBe(true);

      // The operator confirms one machine is really gone.
      await nodes.patch(a, 'merge', { metadata: { annotations: { [ANNOTATION_ACKNOWLEDGE_DELETION]: 'true' } } });
      await eventually(`${a} to be deleted`, async () => !(await nodeExists(nodes, a)));
      expect(await nodeExists(nodes, b)).toBe(true);
    } finally {
      await c.stop();
    }
  }, 120_000);

  test('shutdown taint added to a NotReady shut-down node and removed once it is Ready; foreign taints kept', async () => {
    const foreign: V1Taint = { key: 'example.com/foreign', value: 'x', effect: 'NoExecute' };
    const [name] = await createNotReadyNodes('shutdown', 1, [foreign]);
    const cloud = new FakeCloud();
    cloud.setNode(name!, { shutdown: true });
    const c = startController(cloud, [name!]);
    try {
      await eventually('the shutdown taint', async () => (await nodes.get(name!)).spec?.taints?.some((t) => t.key === SHUTDOWN_TAINT.key));
      expect(await taintKeys(name!)).toEqual([foreign.key, SHUTDOWN_TAINT.key]);
      await setReady(nodes, name!, 'True');
      await eventually('the shutdown taint to go', async () => !(await nodes.get(name!)).spec?.taints?.some((t) => t.key === SHUTDOWN_TAINT.key));
      expect(await taintKeys(name!)).toEqual([foreign.key]);
    } finally {
      await c.stop();
    }
  }, 120_000);
});

describe('ApiLifecycleWriter against a real API server', () => {
  test('a taint written from a stale copy does not lose a taint added meanwhile (conflict, re-read, retry)', async () => {
    const [name] = await createNotReadyNodes('conflict', 1);
    const writer = new ApiLifecycleWriter(transport);
    const stale = await nodes.get(name!);
    const other: V1Taint = { key: 'example.com/added-meanwhile', effect: 'NoSchedule' };
    await nodes.patch(name!, 'merge', { spec: { taints: [other] } });
    expect(await writer.addTaint(stale, SHUTDOWN_TAINT)).toBe(true);
    expect(await taintKeys(name!)).toEqual([other.key, SHUTDOWN_TAINT.key]);

    const stale2 = await nodes.get(name!);
    await nodes.patch(name!, 'merge', { metadata: { labels: { touched: 'yes' } } }); // bumps resourceVersion
    expect(await writer.removeTaints(stale2, [SHUTDOWN_TAINT.key])).toBe(true);
    expect(await taintKeys(name!)).toEqual([other.key]);
    expect(await writer.removeTaints(await nodes.get(name!), [SHUTDOWN_TAINT.key])).toBe(false);
  }, 60_000);

  test('a node that came back Ready after it was judged is not deleted; one changed since is left to the next judgement', async () => {
    const [back, changed] = await createNotReadyNodes('came-back', 2);
    const writer = new ApiLifecycleWriter(transport);
    const judged = await nodes.get(back!);
    await setReady(nodes, back!, 'True'); // the kubelet is back between the judgement and the delete
    expect(await writer.deleteNode(judged)).toBe('changed');
    expect(await nodeExists(nodes, back!)).toBe(true);

    const judged2 = await nodes.get(changed!);
    await nodes.patch(changed!, 'merge', { metadata: { labels: { touched: 'yes' } } }); // still NotReady, but not what was judged
    expect(await writer.deleteNode(judged2)).toBe('changed');
    expect(await nodeExists(nodes, changed!)).toBe(true);
    expect(await writer.deleteNode(await nodes.get(changed!))).toBe('deleted');
    expect(await nodeExists(nodes, changed!)).toBe(false);
  }, 60_000);

  test('the controller: a node turning Ready between judgement and delete stays, and is not counted as deleted', async () => {
    const names = await createNotReadyNodes('ready-race', 2);
    const [racer, listed] = [names[0]!, names[1]!];
    const cloud = new FakeCloud();
    cloud.setNode(racer, { existence: 'not-found' });
    // The kubelet posts Ready right when the controller is about to delete (after its judgement).
    class RacingWriter extends ApiLifecycleWriter {
      override async deleteNode(node: V1Node, signal?: AbortSignal) {
        await setReady(nodes, nodeName(node), 'True');
        return super.deleteNode(node, signal);
      }
    }
    const c = startController(cloud, names, { ...OPTIONS, gracePeriodMs: 0, notFoundThreshold: 1 }, new RacingWriter(transport));
    try {
      await eventually('the DeletingNode event', async () => (await eventsFor(racer, 'DeletingNode')).length > 0);
      const calls = cloud.count('instanceExists');
      await eventually('more periods', () => cloud.count('instanceExists') >= calls + 3 * 2);
      expect(await nodeExists(nodes, racer)).toBe(true);
      expect(await nodeExists(nodes, listed)).toBe(true);
      expect(await c.metric('edge_ccm_nodes_deleted_total')).toBe(0);
      expect((await eventsFor(racer, 'DeletingNodeCancelled')).map((e) => e.message)).toEqual([`Not deleting node ${racer}: it is Ready again or changed since it was judged gone`]);
    } finally {
      await c.stop();
    }
  }, 60_000);

  test('delete carries a UID precondition: a node re-registered under the same name is kept', async () => {
    const [name] = await createNotReadyNodes('reregistered', 1);
    const writer = new ApiLifecycleWriter(transport);
    const old = await nodes.get(name!);
    await nodes.delete(name!);
    await nodes.create({ apiVersion: 'v1', kind: 'Node', metadata: { name } });
    expect(await writer.deleteNode(old)).toBe('replaced');
    expect(await nodeExists(nodes, name!)).toBe(true);
    expect(await writer.addTaint(old, SHUTDOWN_TAINT)).toBe(false); // nor tainted from the old copy
    expect(await taintKeys(name!)).toEqual([]);
    expect(await writer.deleteNode(await nodes.get(name!))).toBe('deleted');
    expect(await writer.deleteNode(old)).toBe('already-gone');
  }, 60_000);
});
