/**
 * The floor: the least a node controller can do against the API server. It watches nodes and,
 * for each one carrying the uninitialized taint, makes only the writes one initialisation needs
 * (one node PATCH: taint removed, labels, providerID; one status PATCH: addresses), with the
 * same worker count and client rate limit as the CCMs. No provider calls, no events, no lease.
 * Usage: floor --kubeconfig=PATH --concurrency=N --qps=Q --burst=B   (prints "ready" once watching)
 */
import type { V1Node } from '@kubernetes/client-node';
import { BunKubeTransport } from '../src/kube/transport.ts';
import { NODES, ResourceClient } from '../src/kube/resources.ts';
import { loadKubeConfig } from '../src/app/kubeconfig.ts';

const UNINITIALIZED = 'node.cloudprovider.kubernetes.io/uninitialized';
const INGRESS_IP = '192.0.2.10';

function flag(name: string): string {
  const arg = process.argv.find((a) => a.startsWith(`--${name}=`));
  if (!arg) throw new Error(`--${name}= is required`);
  return arg.slice(name.length + 3);
}

const transport = new BunKubeTransport(loadKubeConfig({ kubeconfig: flag('kubeconfig') }), { qps: Number(flag('qps')), burst: Number(flag('burst')), userAgent: 'bench-floor' });
const nodes = new ResourceClient<V1Node>(transport, NODES);
const concurrency = Number(flag('concurrency'));

const queue: V1Node[] = [];
const queued = new Set<string>();

function enqueue(node: V1Node): void {
  const name = node.metadata?.name;
  if (!name || queued.has(name) || !node.spec?.taints?.some((t) => t.key === UNINITIALIZED)) return;
  queued.add(name);
  queue.push(node);
  idle.splice(0).forEach((wake) => wake());
}

async function initialise(node: V1Node): Promise<void> {
  const name = node.metadata?.name ?? '';
  await nodes.patch(name, 'merge', {
    metadata: { labels: { 'node.kubernetes.io/instance-type': 'bench.small', 'topology.kubernetes.io/zone': 'zone-a', 'topology.kubernetes.io/region': 'region-a' } },
    spec: { providerID: `fake://${name}`, taints: (node.spec?.taints ?? []).filter((t) => t.key !== UNINITIALIZED) },
  });
  await nodes.patch(name, 'merge', {
    status: { addresses: [{ type: 'ExternalIP', address: INGRESS_IP }, { type: 'Hostname', address: name }] },
  }, { subresource: 'status' });
}

/** Idle workers wait here until a node is queued. */
const idle: (() => void)[] = [];

async function pool(): Promise<void> {
  const run = async () => {
    for (;;) {
      const node = queue.shift();
      if (!node) {
        await new Promise<void>((resolve) => idle.push(resolve));
        continue;
      }
      try {
        await initialise(node);
      } catch (e) {
        console.error(`node ${node.metadata?.name}: ${(e as Error).message}`);
        queued.delete(node.metadata?.name ?? '');
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, run));
}

const controller = new AbortController();
process.on('SIGTERM', () => {
  controller.abort();
  process.exit(0);
});

const list = await nodes.list();
for (const node of list.items) enqueue(node);
void pool();
console.log('ready');
// A watch the API server ends (under load it closes watchers that fall behind) is followed by a
// fresh list and a new watch, as any controller does (run 5 saw the floor stall with 5632 of its
// 10,000 writes done when it did not); enqueue() skips the nodes already queued.
let resourceVersion = list.metadata.resourceVersion;
while (!controller.signal.aborted) {
  try {
    for await (const event of transport.watch<V1Node>(nodes.collectionPath(), { watch: true, resourceVersion, allowWatchBookmarks: true }, controller.signal)) {
      if (event.type === 'ADDED' || event.type === 'MODIFIED') enqueue(event.object);
    }
  } catch (e) {
    if (controller.signal.aborted) break;
    console.error(`watch ended: ${(e as Error).message}`);
  }
  const again = await nodes.list();
  for (const node of again.items) enqueue(node);
  resourceVersion = again.metadata.resourceVersion;
}
