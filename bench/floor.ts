/**
 * The floor: the least a node controller can do against the API server. It watches nodes and,
 * for each one carrying the uninitialized taint, makes only the writes one initialisation needs
 * (one node PATCH: taint removed, labels, providerID; one status PATCH: addresses), with the
 * same worker count and client rate limit as the CCMs. No provider calls, no events, no lease.
 * Usage: floor --kubeconfig=PATH --concurrency=N --qps=Q --burst=B   (prints "ready" once watching)
 *
 * With --lifecycle-pass-ms=MS --lease-renew-ms=MS --lease-name=NAME, also the least an idle
 * lifecycle controller does (the steady state's "floor-lifecycle" side): the nodes kept from the
 * list and the watch; every MS a pass over them that reads each node's Ready condition and, for a
 * NotReady one, looks for one taint (what a pass must read to decide, nothing asked, nothing
 * written); its Lease in kube-system renewed by one update every renew period.
 */
import type { V1Node } from '@kubernetes/client-node';
import type { Lease } from '../src/kube/leader-election.ts';
import { BunKubeTransport } from '../src/kube/transport.ts';
import { LEASES, NODES, ResourceClient } from '../src/kube/resources.ts';
import { loadKubeConfig } from '../src/app/kubeconfig.ts';

const UNINITIALIZED = 'node.cloudprovider.kubernetes.io/uninitialized';
const INGRESS_IP = '192.0.2.10';

function optionalFlag(name: string): string | undefined {
  return process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
}

function flag(name: string): string {
  const value = optionalFlag(name);
  if (value === undefined) throw new Error(`--${name}= is required`);
  return value;
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

const PASS_MS = optionalFlag('lifecycle-pass-ms');
/**
 * The nodes as the watch last showed them, kept only with --lifecycle-pass-ms: what any informer
 * keeps, without metadata.managedFields (as edge-ccm's informers and upstream's trim them).
 */
const known = PASS_MS === undefined ? undefined : new Map<string, V1Node>();
function keep(node: V1Node): void {
  if (node.metadata) delete node.metadata.managedFields;
  known?.set(node.metadata?.name ?? '', node);
}
/** The taint a pass looks for on a NotReady node (upstream's cloud node lifecycle manages this one). */
const SHUTDOWN = 'node.cloudprovider.kubernetes.io/shutdown';

/** One pass: each node's Ready condition, and for a NotReady node one taint. Returns how many NotReady nodes carry it. */
function lifecyclePass(nodesNow: Map<string, V1Node>): number {
  let tainted = 0;
  for (const node of nodesNow.values()) {
    let ready = false;
    const conditions = node.status?.conditions;
    if (conditions) for (const c of conditions) if (c.type === 'Ready') ready = c.status === 'True';
    if (ready) continue;
    const taints = node.spec?.taints;
    if (taints) for (const t of taints) if (t.key === SHUTDOWN) tainted += 1;
  }
  return tainted;
}

/** Takes the Lease (created when missing) and renews it every period with one update, as a leader does. */
async function holdLease(name: string, renewMs: number): Promise<void> {
  const leases = new ResourceClient<Lease>(transport, LEASES);
  const spec = () => ({ holderIdentity: 'bench-floor', leaseDurationSeconds: 15, renewTime: new Date().toISOString().replace('Z', '000Z') });
  let lease = await leases.get(name, { namespace: 'kube-system' }).catch(() => undefined)
    ?? await leases.create({ metadata: { name, namespace: 'kube-system' }, spec: spec() }, { namespace: 'kube-system' });
  const timer = setInterval(() => {
    void leases.update({ ...lease, spec: { ...lease.spec, ...spec() } }, { namespace: 'kube-system' }).then((renewed) => { lease = renewed; }, (e: Error) => {
      console.error(`lease renewal: ${e.message}`);
      // A refused update (a conflict) leaves our copy stale: read it again, or every later update is refused too.
      void leases.get(name, { namespace: 'kube-system' }).then((current) => { lease = current; }, () => {});
    });
  }, renewMs);
  controller.signal.addEventListener('abort', () => clearInterval(timer));
}

const list = await nodes.list();
for (const node of list.items) enqueue(node);
if (known) for (const node of list.items) keep(node);
void pool();
if (known) {
  await holdLease(flag('lease-name'), Number(flag('lease-renew-ms')));
  let shutDown = 0; // kept, so that the pass's result is used
  setInterval(() => { shutDown = lifecyclePass(known); }, Number(PASS_MS));
  process.on('SIGUSR1', () => console.log(`NotReady nodes with the shutdown taint: ${shutDown}`));
}
console.log('ready');
// A watch the API server ends (under load it closes watchers that fall behind) is followed by a
// fresh list and a new watch, as any controller does (run 5 saw the floor stall with 5632 of its
// 10,000 writes done when it did not); enqueue() skips the nodes already queued.
let resourceVersion = list.metadata.resourceVersion;
while (!controller.signal.aborted) {
  try {
    for await (const event of transport.watch<V1Node>(nodes.collectionPath(), { watch: true, resourceVersion, allowWatchBookmarks: true }, controller.signal)) {
      if (event.type === 'ADDED' || event.type === 'MODIFIED') enqueue(event.object);
      if (known && (event.type === 'ADDED' || event.type === 'MODIFIED')) keep(event.object);
      if (known && event.type === 'DELETED') known.delete(event.object.metadata?.name ?? '');
    }
  } catch (e) {
    if (controller.signal.aborted) break;
    console.error(`watch ended: ${(e as Error).message}`);
  }
  const again = await nodes.list();
  for (const node of again.items) enqueue(node);
  if (known) {
    known.clear();
    for (const node of again.items) keep(node);
  }
  resourceVersion = again.metadata.resourceVersion;
}
