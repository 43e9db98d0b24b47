import type { V1Node, V1Service } from '@kubernetes/client-node';
import type { KubeTransport } from '../src/kube/transport.ts';
import { NODES, ResourceClient, SERVICES } from '../src/kube/resources.ts';
import { Informer } from '../src/kube/informer/informer.ts';
import { createLogger } from '../src/log.ts';

// Warnings of the bench's own watch (a resumed or relisted watch) go to stderr with the progress.
const watcherLogger = createLogger({}, { component: 'bench-watcher' });
import { FAKE_INGRESS_IP } from './sides.ts';

/** The objects the bench creates, and a watch that timestamps when each is done. */

export const UNINITIALIZED = 'node.cloudprovider.kubernetes.io/uninitialized';
export const LB_FINALIZER = 'service.kubernetes.io/load-balancer-cleanup';
export const NAMESPACE = 'default';

export type Kind = 'nodes' | 'services';

export const objectName = (kind: Kind, i: number) => `bench-${kind === 'nodes' ? 'node' : 'svc'}-${String(i).padStart(5, '0')}`;

/** A node as a kubelet with --cloud-provider=external registers it. */
export function uninitialisedNode(name: string): V1Node {
  return { metadata: { name }, spec: { taints: [{ key: UNINITIALIZED, value: 'true', effect: 'NoSchedule' }] } };
}

/** A node as the CCM leaves it (for the steady state and as service backends). */
export function initialisedNode(name: string): V1Node {
  return {
    metadata: { name, labels: { 'node.kubernetes.io/instance-type': 'bench.small', 'topology.kubernetes.io/zone': 'zone-a', 'topology.kubernetes.io/region': 'region-a' } },
    spec: { providerID: `fake://${name}` },
  };
}

export function loadBalancerService(name: string, withFinalizer = false): V1Service {
  return {
    metadata: { name, namespace: NAMESPACE, ...(withFinalizer ? { finalizers: [LB_FINALIZER] } : {}) },
    // No node ports: 5000 services would exhaust the default node-port range.
    spec: { type: 'LoadBalancer', allocateLoadBalancerNodePorts: false, ports: [{ name: 'http', port: 80, targetPort: 8080, protocol: 'TCP' }] },
  };
}

export function isDone(kind: Kind, obj: V1Node | V1Service): boolean {
  if (kind === 'nodes') return !(obj as V1Node).spec?.taints?.some((t) => t.key === UNINITIALIZED);
  return ((obj as V1Service).status?.loadBalancer?.ingress?.length ?? 0) > 0;
}

/** Creates objects with a bounded number of requests in flight (the admin client has no rate limit). */
export async function createAll<T>(count: number, create: (i: number) => Promise<T>, inFlight = 32): Promise<void> {
  let next = 0;
  await Promise.all(Array.from({ length: inFlight }, async () => {
    while (next < count) await create(next++);
  }));
}

/**
 * Records, per object name, when the watch first saw it and when it first saw it done. Built on
 * the project's informer, so a watch the API server or the network ends is resumed (or relisted)
 * rather than silently leaving the run waiting for its timeout (a bare watch once did).
 */
export class DoneWatcher {
  readonly seenAt = new Map<string, number>();
  readonly doneAt = new Map<string, number>();
  private readonly abort = new AbortController();
  private running?: Promise<void>;

  constructor(private readonly api: KubeTransport, readonly kind: Kind) {}

  async start(): Promise<void> {
    const informer = this.kind === 'nodes'
      ? new Informer<V1Node>({ transport: this.api, type: NODES, logger: watcherLogger })
      : new Informer<V1Service>({ transport: this.api, type: SERVICES, namespace: NAMESPACE, logger: watcherLogger });
    const record = (obj: V1Node | V1Service) => {
      const name = obj.metadata?.name ?? '';
      if (!name.startsWith('bench-')) return;
      const now = Date.now();
      if (!this.seenAt.has(name)) this.seenAt.set(name, now);
      if (!this.doneAt.has(name) && isDone(this.kind, obj)) this.doneAt.set(name, now);
    };
    (informer as Informer<V1Node | V1Service>).addHandlers({ onAdd: record, onUpdate: (_old, obj) => record(obj) });
    this.running = informer.run(this.abort.signal);
    if (!(await informer.waitForSync(this.abort.signal))) throw new Error('the bench watcher did not sync');
    // Objects that exist before the run (backend nodes of the services run) are not part of it.
    this.seenAt.clear();
    this.doneAt.clear();
  }

  /** Waits until `count` objects are done, or the deadline; returns whether all were. */
  async waitFor(count: number, timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while (this.doneAt.size < count) {
      if (Date.now() > deadline) return false;
      await Bun.sleep(100);
    }
    return true;
  }

  /** Per-object latency, seen to done, in ms. */
  latencies(): number[] {
    const out: number[] = [];
    for (const [name, done] of this.doneAt) out.push(done - (this.seenAt.get(name) ?? done));
    return out.sort((a, b) => a - b);
  }

  async stop(): Promise<void> {
    this.abort.abort();
    await this.running?.catch(() => undefined);
  }
}

export function percentile(sorted: number[], p: number): number {
  if (!sorted.length) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? NaN;
}

/** Creates initialised nodes and LoadBalancer services that already have their finalizer and ingress. */
export async function prepareSteadyState(api: KubeTransport, nodeCount: number, serviceCount: number): Promise<void> {
  const nodes = new ResourceClient<V1Node>(api, NODES);
  const services = new ResourceClient<V1Service>(api, SERVICES);
  await createAll(nodeCount, async (i) => {
    const name = objectName('nodes', i);
    await nodes.create(initialisedNode(name));
    await nodes.patch(name, 'merge', { status: { addresses: [{ type: 'ExternalIP', address: FAKE_INGRESS_IP }, { type: 'Hostname', address: name }] } }, { subresource: 'status' });
  });
  await createAll(serviceCount, async (i) => {
    const name = objectName('services', i);
    await services.create(loadBalancerService(name, true));
    // What both fakes answer (IP and the service's ports), so a side that starts finds nothing to write.
    await services.patch(name, 'merge', { status: { loadBalancer: { ingress: [{ ip: FAKE_INGRESS_IP, ports: [{ port: 80, protocol: 'TCP' }] }] } } }, { namespace: NAMESPACE, subresource: 'status' });
  });
}
