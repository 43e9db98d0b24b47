/**
 * CPU of one lifecycle pass and one node status pass over N NotReady, initialised nodes, in
 * process, with the bench fake's answers (existence in one bulk call, shutdown and metadata per
 * node; shutdown as a shared promise, as the static provider answers from its inventory) and no API writes: what edge-ccm spends every 5 s at idle per controller, apart from
 * the API server. For finding the idle cost; not part of scripts/bench's figures.
 * With --interval-ms, the passes are that far apart (as in the running process, where each pass
 * finds a cold cache and the garbage of the last one), and the CPU counted includes the waits.
 * Also prints what a pass allocates (objects by type).
 * --only=visit measures the least any per-period pass over the nodes costs here: one loop over the
 * store reading each node's name, UID, provider ID and Ready condition, nothing asked or decided.
 * Usage: bun bench/lifecycle-pass-cost.ts [--nodes=5000] [--passes=40] [--interval-ms=5000] [--only=lifecycle|status|visit]
 */
import type { V1Node } from '@kubernetes/client-node';
import { heapStats } from 'bun:jsc';
import { Registry } from 'prom-client';
import { CloudNodeLifecycleController } from '../src/controllers/nodelifecycle/index.ts';
import { CloudNodeController } from '../src/controllers/node/index.ts';
import { HeldConditionWriter } from '../src/controllers/nodelifecycle/held-condition.ts';
import { FAKE_EXISTENCE } from './fake-instances.ts';
import { HandFedInformer, controllerContext } from '../test/fakes/controller-context.ts';
import type { CloudProvider } from '../src/cloud/types.ts';
import { numberOption as opt } from './args.ts';

const argv = process.argv.slice(2);
const count = opt('nodes', 5000);
const passes = opt('passes', 40);
const intervalMs = opt('interval-ms', 0);
const only = argv.find((a) => a.startsWith('--only='))?.slice('--only='.length);

const cloud: CloudProvider = {
  providerName: 'fake',
  instances: {
    ...FAKE_EXISTENCE,
    instanceMetadata: async (node) => ({
      providerID: `fake://${node.metadata?.name}`, instanceType: 'bench.small', zone: 'zone-a', region: 'region-a',
      nodeAddresses: [{ type: 'ExternalIP', address: '203.0.113.10' }, { type: 'Hostname', address: node.metadata?.name ?? '' }],
    }),
  },
};
const informer = new HandFedInformer<V1Node>();
for (let i = 0; i < count; i++) {
  const name = `bench-node-${String(i).padStart(5, '0')}`;
  informer.set({
    metadata: { name, uid: `uid-${i}`, resourceVersion: '1', labels: { 'node.kubernetes.io/instance-type': 'bench.small', 'topology.kubernetes.io/zone': 'zone-a', 'topology.kubernetes.io/region': 'region-a' } },
    // The taint the API server's TaintNodesByCondition admission gives every node created
    // without a Ready condition: what the nodes of bench/idle-cost.ts and scripts/bench carry.
    spec: { providerID: `fake://${name}`, taints: [{ key: 'node.kubernetes.io/not-ready', effect: 'NoSchedule' }] },
    status: { addresses: [{ type: 'ExternalIP', address: '203.0.113.10' }, { type: 'Hostname', address: name }] },
  });
}
const ctx = controllerContext({ cloud, nodeInformer: informer.asInformer(), registry: new Registry() });
// As the app makes it: with the DeletionHeld condition writer (which writes nothing here: no node is held).
const lifecycle = new CloudNodeLifecycleController(ctx, {}, { heldConditions: new HeldConditionWriter(ctx.transport) });
const nodes = new CloudNodeController(ctx, { workers: 1, nodeStatusUpdateFrequencyMs: 5000 });

async function measure(name: string, pass: () => Promise<unknown>): Promise<void> {
  for (let i = 0; i < 5; i++) await pass(); // warm up
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  for (let i = 0; i < passes; i++) {
    await pass();
    if (intervalMs) await Bun.sleep(intervalMs);
  }
  const cpu = process.cpuUsage(cpu0);
  const ms = (cpu.user + cpu.system) / 1000 / passes;
  console.log(`${name}: ${ms.toFixed(2)} ms CPU per pass over ${count} nodes (${((ms * 1000) / count).toFixed(2)} us per node), wall ${((performance.now() - t0) / passes).toFixed(2)} ms; at one pass per 5 s: ${((ms * 12) / 1000).toFixed(2)} CPU-s per 60 s`);
  // What a pass allocates (the garbage GC then has to deal with, and at idle the main reason the
  // process collects at all): the objects on the heap after a pass that were not there after a
  // full collection before it, by type (fewer than 50 of a type left out).
  Bun.gc(true);
  const before = heapStats().objectTypeCounts;
  await pass();
  const made = Object.entries(heapStats().objectTypeCounts).map(([type, n]) => [type, n - (before[type] ?? 0)] as const).filter(([, n]) => n >= 50);
  console.log(`${name}: allocates ${made.map(([type, n]) => `${n} ${type}`).join(', ') || 'fewer than 50 objects of any type'} per pass`);
}

/** The floor: visiting every node once, reading what any pass must (see the usage above). */
async function visit(): Promise<number> {
  let notReady = 0;
  for (const n of informer.asInformer().store.list()) {
    if (!n.metadata?.name || !n.metadata.uid || !n.spec?.providerID) continue;
    const ready = n.status?.conditions?.find((c) => c.type === 'Ready');
    if (ready?.status !== 'True') notReady++;
  }
  return notReady;
}

if (only === 'visit') await measure('visit every node', visit);
else {
  if (only !== 'status') await measure('lifecycle pass', () => lifecycle.monitorNodes());
  if (only !== 'lifecycle') await measure('node status pass', () => nodes.updateNodeStatus());
}
