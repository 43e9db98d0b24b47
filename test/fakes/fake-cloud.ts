import type { V1LoadBalancerIngress, V1LoadBalancerStatus, V1Node, V1Service } from '@kubernetes/client-node';
import {
  defaultLoadBalancerName,
  type AddressPoolStatus,
  type BgpSource,
  type CloudProvider,
  type Existence,
  type InstanceMetadata,
  type Instances,
  type LoadBalancer,
  type LoadBalancerResult,
  type ProviderContext,
  type Route,
  type Routes,
} from '../../src/cloud/types.ts';
import type { SpeakerConfig } from '../../src/net/bgp/speaker.ts';
import { sleep } from '../../src/util/time.ts';

/**
 * A test double of the provider interface, after k8s.io/cloud-provider/fake: configurable answers
 * per node, injected latency and errors, a record of every call, an in-memory load-balancer map
 * and route table. Each capability can be left out, to build a provider that lacks it.
 *
 * Errors: `failWith(method, error, opts)` makes a method throw (any Error, including
 * RetryAfterError and ImplementedElsewhereError from src/cloud/types.ts), for every call or for
 * the next `times` calls, optionally only for one target (node or service name).
 */

export type FakeMethod =
  | 'instanceExists'
  | 'instanceShutdown'
  | 'instanceMetadata'
  | 'instancesExist'
  | 'getLoadBalancer'
  | 'ensureLoadBalancer'
  | 'updateLoadBalancer'
  | 'ensureLoadBalancerDeleted'
  | 'listRoutes'
  | 'createRoute'
  | 'deleteRoute'
  | 'initialize'
  | 'close';

/** What the fake answers for one node. Unset fields fall back to `defaults`. */
export interface FakeNodeAnswer {
  /** null: the provider has no metadata for the node. A function is called with the node. */
  metadata?: InstanceMetadata | null | ((node: V1Node) => InstanceMetadata | null);
  existence?: Existence;
  /** undefined answers "cannot tell". */
  shutdown?: boolean | undefined;
  /** Thrown by every instances method for this node. */
  error?: Error;
}

export interface FakeCall {
  method: FakeMethod;
  /** Node name, service "namespace/name", route name or cluster name. */
  target?: string;
}

export interface FakeBalancer {
  name: string;
  clusterName: string;
  service: V1Service;
  nodeNames: string[];
  status: V1LoadBalancerStatus;
}

export interface FakeLoadBalancerCall {
  service: V1Service;
  nodeNames: string[];
}

export interface FakeCloudOptions {
  providerName?: string;
  /** Capabilities; each defaults to true. */
  instances?: boolean;
  loadBalancer?: boolean;
  routes?: boolean;
  /** Whether instances offers the optional bulk instancesExist. Default false. */
  bulkExistence?: boolean;
  /** Delay of every call, in milliseconds. */
  latencyMs?: number;
  /** The IP ensureLoadBalancer hands out as ingress. Default 192.0.2.10. */
  ingressIP?: string;
  /** Extra load-balancer classes the provider owns. */
  loadBalancerClasses?: string[];
  /** How many calls `calls`/`callLog` keep (the oldest go first). Default 10000. */
  callLogLimit?: number;
  /** A BGP speaker configuration: the app runs the speaker while leading, announcing nothing. */
  bgp?: SpeakerConfig;
}

interface Failure {
  error: Error;
  target?: string;
  remaining: number;
}

export class FakeCloud implements CloudProvider {
  readonly providerName: string;
  readonly instances?: Instances;
  readonly loadBalancer?: LoadBalancer;
  readonly routes?: Routes;
  readonly bgp?: BgpSource;

  /** Answer for nodes without their own entry in `nodes`. */
  defaults: Required<Pick<FakeNodeAnswer, 'existence'>> & FakeNodeAnswer = { existence: 'exists', shutdown: false, metadata: null };
  /** Per-node answers, by node name. */
  readonly nodes = new Map<string, FakeNodeAnswer>();
  latencyMs: number;
  ingressIP: string;
  /**
   * Overrides the status ensureLoadBalancer returns (and stores); undefined from it makes
   * ensureLoadBalancer return no status, as a broken provider would.
   */
  ensureStatus?: (service: V1Service) => V1LoadBalancerStatus | undefined;
  /** Set by initialize(). */
  providerContext?: ProviderContext;

  /** Load balancers by name, as ensureLoadBalancer left them. */
  readonly balancers = new Map<string, FakeBalancer>();
  readonly ensureCalls: FakeLoadBalancerCall[] = [];
  readonly updateCalls: FakeLoadBalancerCall[] = [];
  readonly deleteCalls: V1Service[] = [];
  /** Every createRoute call with its name hint (the route controller passes the node UID). */
  readonly createRouteCalls: { clusterName: string; nameHint: string; route: Route }[] = [];
  /** Routes by `${clusterName}/${route.name}`. */
  readonly routeTable = new Map<string, { clusterName: string; route: Route }>();

  /** Calls under way now, and the most there ever were at once (to check a concurrency limit). */
  inFlight = 0;
  maxInFlight = 0;

  /** What the load balancer's poolStatus answers (the AddressPool objects; src/status). */
  pools: AddressPoolStatus[] = [];

  private readonly log: FakeCall[] = [];
  private lbClasses: string[] | undefined;
  private readonly changeListeners = new Set<() => void>();
  private readonly counts = new Map<FakeMethod, number>();
  private readonly failures = new Map<FakeMethod, Failure[]>();
  private readonly callLogLimit: number;

  constructor(opts: FakeCloudOptions = {}) {
    this.providerName = opts.providerName ?? 'fake';
    this.latencyMs = opts.latencyMs ?? 0;
    this.ingressIP = opts.ingressIP ?? '192.0.2.10';
    this.callLogLimit = opts.callLogLimit ?? 10_000;
    if (opts.instances ?? true) this.instances = this.buildInstances(opts.bulkExistence ?? false);
    this.lbClasses = opts.loadBalancerClasses;
    if (opts.loadBalancer ?? true) this.loadBalancer = this.buildLoadBalancer();
    if (opts.routes ?? true) this.routes = this.buildRoutes();
    const bgp = opts.bgp;
    if (bgp) this.bgp = { speakerConfig: () => bgp, announcements: () => ({ table: [], clashes: [] }), routesSynced: true, onRoutesChange: () => () => {} };
  }

  // --- configuration ---

  /** The provider interface's change notice (a real provider's config reload). */
  onChange(listener: () => void): () => void {
    this.changeListeners.add(listener);
    return () => this.changeListeners.delete(listener);
  }

  /** Tells onChange listeners, as a provider's config reload would. */
  notifyChange(): void {
    for (const listener of this.changeListeners) listener();
  }

  /** How many onChange listeners are subscribed (to check unsubscription). */
  get changeListenerCount(): number {
    return this.changeListeners.size;
  }

  /** Changes the owned load-balancer classes and tells onChange listeners, as a config reload would. */
  setLoadBalancerClasses(classes: string[] | undefined): void {
    this.lbClasses = classes;
    this.notifyChange();
  }

  /** Sets (merges into) the answer for one node. */
  setNode(name: string, answer: FakeNodeAnswer): this {
    this.nodes.set(name, { ...this.nodes.get(name), ...answer });
    return this;
  }

  /** Makes `method` throw `error`: always, or for the next `times` calls; only for `target` if given. */
  failWith(method: FakeMethod, error: Error, opts: { times?: number; target?: string } = {}): this {
    const list = this.failures.get(method) ?? [];
    list.push({ error, target: opts.target, remaining: opts.times ?? Infinity });
    this.failures.set(method, list);
    return this;
  }

  clearFailures(method?: FakeMethod): void {
    if (method) this.failures.delete(method);
    else this.failures.clear();
  }

  /** Adds a route as if it existed in the cloud already (not recorded as a call). */
  addRoute(clusterName: string, route: Route): void {
    this.routeTable.set(`${clusterName}/${route.name}`, { clusterName, route: structuredClone(route) });
  }

  // --- inspection ---

  /** Method names of the recorded calls, oldest first (capped at callLogLimit). */
  get calls(): FakeMethod[] {
    return this.log.map((c) => c.method);
  }

  /** Recorded calls with their targets, oldest first (capped at callLogLimit). */
  get callLog(): readonly FakeCall[] {
    return this.log;
  }

  /** How many times `method` was called (never capped); for one target when given. */
  count(method: FakeMethod, target?: string): number {
    if (target === undefined) return this.counts.get(method) ?? 0;
    return this.log.filter((c) => c.method === method && c.target === target).length;
  }

  clearCalls(): void {
    this.log.length = 0;
    this.counts.clear();
    this.maxInFlight = this.inFlight;
    this.ensureCalls.length = 0;
    this.updateCalls.length = 0;
    this.deleteCalls.length = 0;
  }

  // --- provider lifecycle ---

  /** initialize() does not return until its start is cancelled (a provider whose API is unreachable at start). */
  initializeHangs = false;
  /** initialize() returns only once its start is cancelled, as if it finished anyway (a provider that ignores the signal). */
  initializeOutlivesCancel = false;

  async initialize(ctx: ProviderContext): Promise<void> {
    await this.call('initialize');
    this.providerContext = ctx;
    if (this.initializeHangs) {
      await new Promise<void>((_, reject) => {
        if (ctx.signal.aborted) reject(ctx.signal.reason);
        ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason), { once: true });
      });
    }
    if (this.initializeOutlivesCancel) {
      await new Promise<void>((resolve) => {
        if (ctx.signal.aborted) resolve();
        ctx.signal.addEventListener('abort', () => resolve(), { once: true });
      });
    }
  }

  async close(): Promise<void> {
    await this.call('close');
  }

  // --- internals ---

  /** Records the call, waits the latency, then throws an injected failure if one applies. */
  private async call(method: FakeMethod, target?: string, signal?: AbortSignal): Promise<void> {
    this.counts.set(method, (this.counts.get(method) ?? 0) + 1);
    this.log.push(target === undefined ? { method } : { method, target });
    if (this.log.length > this.callLogLimit) this.log.shift();
    this.inFlight++;
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    try {
      if (this.latencyMs > 0) await sleep(this.latencyMs, signal);
    } finally {
      this.inFlight--;
    }
    const failure = this.failures.get(method)?.find((f) => f.remaining > 0 && (f.target === undefined || f.target === target));
    if (failure) {
      failure.remaining--;
      throw failure.error;
    }
  }

  private answerFor(node: V1Node): FakeNodeAnswer {
    return { ...this.defaults, ...this.nodes.get(node.metadata?.name ?? '') };
  }

  private async nodeCall(method: FakeMethod, node: V1Node, signal?: AbortSignal): Promise<FakeNodeAnswer> {
    await this.call(method, node.metadata?.name, signal);
    const answer = this.answerFor(node);
    if (answer.error) throw answer.error;
    return answer;
  }

  private buildInstances(bulk: boolean): Instances {
    const instances: Instances = {
      instanceExists: async (node, signal) => (await this.nodeCall('instanceExists', node, signal)).existence ?? 'exists',
      instanceShutdown: async (node, signal) => (await this.nodeCall('instanceShutdown', node, signal)).shutdown,
      instanceMetadata: async (node, signal) => {
        const { metadata } = await this.nodeCall('instanceMetadata', node, signal);
        const value = typeof metadata === 'function' ? metadata(node) : metadata;
        return value ? structuredClone(value) : null;
      },
    };
    if (bulk) {
      instances.instancesExist = async (nodes, signal) => {
        await this.call('instancesExist', undefined, signal);
        return nodes.map((n) => (this.answerFor(n).error ? 'unknown' : this.answerFor(n).existence ?? 'exists'));
      };
    }
    return instances;
  }

  private buildLoadBalancer(): LoadBalancer {
    const key = (svc: V1Service) => `${svc.metadata?.namespace ?? ''}/${svc.metadata?.name ?? ''}`;
    const names = (nodes: V1Node[]) => nodes.map((n) => n.metadata?.name ?? '');
    const fake = this;
    return {
      get loadBalancerClasses() {
        return fake.lbClasses;
      },
      poolStatus: () => structuredClone(fake.pools),
      getLoadBalancerName: (_cluster, svc) => defaultLoadBalancerName(svc),
      getLoadBalancer: async (_clusterName, svc, signal): Promise<LoadBalancerResult> => {
        await this.call('getLoadBalancer', key(svc), signal);
        const lb = this.balancers.get(defaultLoadBalancerName(svc));
        return lb ? { exists: true, status: structuredClone(lb.status) } : { exists: false, status: {} };
      },
      ensureLoadBalancer: async (clusterName, svc, nodes, signal) => {
        this.ensureCalls.push({ service: structuredClone(svc), nodeNames: names(nodes) });
        await this.call('ensureLoadBalancer', key(svc), signal);
        const status = this.ensureStatus ? this.ensureStatus(svc) : this.defaultStatus(svc);
        const name = defaultLoadBalancerName(svc);
        this.balancers.set(name, { name, clusterName, service: structuredClone(svc), nodeNames: names(nodes), status: status ?? {} });
        return status && structuredClone(status);
      },
      updateLoadBalancer: async (_clusterName, svc, nodes, signal) => {
        this.updateCalls.push({ service: structuredClone(svc), nodeNames: names(nodes) });
        await this.call('updateLoadBalancer', key(svc), signal);
        const lb = this.balancers.get(defaultLoadBalancerName(svc));
        if (lb) lb.nodeNames = names(nodes);
      },
      ensureLoadBalancerDeleted: async (_clusterName, svc, signal) => {
        this.deleteCalls.push(structuredClone(svc));
        await this.call('ensureLoadBalancerDeleted', key(svc), signal);
        this.balancers.delete(defaultLoadBalancerName(svc));
      },
    };
  }

  /** As upstream's fake: one ingress with the configured IP and the service's ports. */
  private defaultStatus(svc: V1Service): V1LoadBalancerStatus {
    const ingress: V1LoadBalancerIngress = { ip: this.ingressIP };
    const ports = svc.spec?.ports?.map((p) => ({ port: p.port, protocol: p.protocol ?? 'TCP' }));
    if (ports?.length) ingress.ports = ports;
    return { ingress: [ingress] };
  }

  private buildRoutes(): Routes {
    return {
      listRoutes: async (clusterName, signal) => {
        await this.call('listRoutes', clusterName, signal);
        return [...this.routeTable.values()].filter((r) => r.clusterName === clusterName).map((r) => structuredClone(r.route));
      },
      createRoute: async (clusterName, nameHint, route, signal) => {
        // As upstream's fake: the name is derived from cluster, node and CIDR; the hint is ignored.
        this.createRouteCalls.push({ clusterName, nameHint, route: structuredClone(route) });
        const name = `${clusterName}-${route.targetNode}-${route.destinationCIDR}`;
        await this.call('createRoute', name, signal);
        const id = `${clusterName}/${name}`;
        if (this.routeTable.has(id)) throw new Error(`route "${name}" already exists`);
        this.routeTable.set(id, { clusterName, route: { ...structuredClone(route), name } });
      },
      deleteRoute: async (clusterName, route, signal) => {
        await this.call('deleteRoute', route.name, signal);
        const id = [...this.routeTable.entries()].find(
          ([, r]) => r.clusterName === clusterName && r.route.destinationCIDR === route.destinationCIDR && r.route.targetNode === route.targetNode,
        )?.[0];
        if (id === undefined) throw new Error(`no route found for node ${route.targetNode} with destinationCIDR ${route.destinationCIDR}`);
        this.routeTable.delete(id);
      },
    };
  }
}

/** Metadata for tests: a providerID `fake://NAME`, no addresses, no zone or region, unless given. */
export function fakeMetadata(name: string, overrides: Partial<InstanceMetadata> = {}): InstanceMetadata {
  return { providerID: `fake://${name}`, instanceType: '', nodeAddresses: [], zone: '', region: '', ...overrides };
}
