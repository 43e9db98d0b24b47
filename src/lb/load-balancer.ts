import type { V1LoadBalancerStatus, V1Node, V1Service } from '@kubernetes/client-node';
import { RetryAfterError, defaultLoadBalancerName, type AddressPoolStatus, type LoadBalancer, type LoadBalancerResult } from '../cloud/types.ts';
import { loadBalancerStatusEqual, serviceKey, wantsLoadBalancer } from '../kube/service-helpers.ts';
import type { ProviderContext } from '../cloud/types.ts';
import type { KubeTransport } from '../kube/transport.ts';
import type { EventRecorder } from '../kube/event-recorder.ts';
import { ResourceClient, SERVICES } from '../kube/resources.ts';
import type { Logger } from '../log.ts';
import { formatIP, parseIP, type IP } from '../net/ip.ts';
import { rangesContain } from './ranges.ts';
import { AddressAllocator, type Assignment, type NotShared } from './allocator.ts';
import type { Compatibility } from './compatibility.ts';
import type { LoadBalancerConfig } from './config-model.ts';
import { NodeAddressPools } from './node-addresses.ts';
import { type AddressRequest, type SharingTerms, ALLOW_SHARED_IP_ANNOTATION, AllocationError, addressRequest, sharingTerms } from './requests.ts';
import { Backoff, type BackoffBounds } from '../util/backoff.ts';
import { sleep } from '../util/time.ts';
import { errorMessage } from '../util/errors.ts';
import { compareCodeUnits } from '../util/compare.ts';

/** Seconds the controller waits before retrying a service while the allocator is not rebuilt. */
const REBUILD_RETRY_SECONDS = 2;

/** A service with a sharing key got an address of its own, and why (Normal: the service works). */
export const ADDRESS_NOT_SHARED_REASON = 'AddressNotShared';

/**
 * Load balancers as addresses only, for any provider that serves address pools: it assigns from
 * the pools and reports the addresses in the service status; announcing them (ARP, BGP) is left to
 * edge-ccm's L2 speaker (announce: l2), its BGP speaker, kube-vip, MetalLB's speaker or the
 * network. Range pools do not depend on the nodes; node-address pools (node-addresses.ts) hand out
 * the nodes' own addresses, which updateLoadBalancer keeps following.
 *
 * No database: the record is each Service's status.loadBalancer.ingress. rebuild() reads it back
 * from every service before the first ensure or delete is answered, so no address is handed
 * out twice after a restart or a change of leader.
 */
export class PoolLoadBalancer implements LoadBalancer {
  /** The allocator is this process's memory: two processes would hand out one address twice. */
  readonly exclusive = { refresh: (signal: AbortSignal) => this.refresh(signal) };
  private rebuilt = false;
  /**
   * Services whose status claimed addresses another (older) service holds at the last rebuild,
   * and those holders: the AddressPool's Conflict condition, until the claimant is synced.
   */
  private readonly conflicts = new Map<string, { addresses: IP[]; holders: string[] }>();
  /** Where the services are read from: set at the provider's start (rebuildFromServices). */
  private source?: { transport: KubeTransport; retry: RebuildRetry; logger: Logger };
  /** Counts refreshes, so one that finishes after a later one started does not apply its older list. */
  private generation = 0;
  private events?: EventRecorder;
  /** Services of node-address pools: their addresses are the nodes', outside the allocator. */
  private readonly nodePools = new NodeAddressPools(() => this.allocator.configuredPools());

  constructor(
    private readonly allocator: AddressAllocator,
    private readonly classes: () => readonly string[],
    private readonly logger: Logger,
    /** loadBalancer.compatibility, read live (a reload may change it). */
    private readonly compatibility: () => readonly Compatibility[] = () => [],
  ) {}

  /**
   * A provider's address core from its `loadBalancer` section: the allocator over the pools at
   * start, and the load balancer reading the classes and compatibility in force (`current`, the
   * provider's last good configuration).
   */
  static forConfig(initial: LoadBalancerConfig, current: () => LoadBalancerConfig, logger: Logger): { allocator: AddressAllocator; loadBalancer: PoolLoadBalancer } {
    const allocator = new AddressAllocator(initial.pools, initial);
    return { allocator, loadBalancer: new PoolLoadBalancer(allocator, () => current().classes, logger, () => current().compatibility ?? []) };
  }

  /** Read live by the service controller, which resyncs the changed classes' services on a reload. */
  get loadBalancerClasses(): readonly string[] {
    return this.classes();
  }

  /** Node-address pools hand out the nodes' addresses: their changes must reach updateLoadBalancer. */
  get followsNodeAddresses(): boolean {
    return this.allocator.configuredPools().some((p) => p.nodeAddresses);
  }

  /** externalTrafficPolicy: Local on a node-address pool: the addresses are those of the nodes with a ready endpoint. */
  endpointNodesOnly(service: V1Service): boolean {
    return service.spec?.externalTrafficPolicy === 'Local' && !!this.nodePoolOf(service);
  }

  get isRebuilt(): boolean {
    return this.rebuilt;
  }

  /** Reads the services from `transport` for every refresh from now on. */
  connect(transport: KubeTransport, retry: RebuildRetry, logger: Logger): void {
    this.source = { transport, retry, logger };
  }

  /**
   * Rebuilds the allocator from every service (GET /api/v1/services, paged), retrying until it
   * succeeds or the signal aborts: until then ensure and delete answer "retry after" rather than
   * risk handing out a held address. Nothing before connect (the provider's start rebuilds).
   */
  async refresh(signal: AbortSignal): Promise<void> {
    if (!this.source) return;
    const generation = ++this.generation;
    this.rebuilt = false;
    const services = await listServicesRetrying(this.source, signal);
    if (generation === this.generation) this.rebuild(services);
  }

  /**
   * Forgets every assignment until the next refresh (a refresh under way is not applied): at the
   * end of a leadership term, whose memory another leader may outdate. Until then ensure and
   * delete answer "retry after", and the pools show nothing in use, as on a standby.
   */
  forget(): void {
    this.generation++;
    this.rebuilt = false;
    this.allocator.clear();
    this.conflicts.clear();
    this.nodePools.clear();
  }

  /** Where to report what a service should know about its addresses (the provider context's recorder). */
  reportEventsTo(recorder: EventRecorder | undefined): void {
    this.events = recorder;
  }

  /**
   * Forgets every assignment and records what the services' status says they hold, oldest
   * service first; an address two services claim stays with the older one.
   */
  rebuild(services: readonly V1Service[]): void {
    this.allocator.clear();
    this.conflicts.clear();
    this.nodePools.clear();
    const ours = services
      .filter((s) => wantsLoadBalancer(s, this.classes()))
      .sort((a, b) => compareCodeUnits(creation(a), creation(b)) || compareCodeUnits(serviceKey(a), serviceKey(b)));
    let recorded = 0;
    for (const service of ours) {
      const addresses = (service.status?.loadBalancer?.ingress ?? []).map((i) => parseIP(i.ip ?? '')).filter((ip): ip is IP => !!ip);
      if (!addresses.length) continue;
      const nodePool = this.nodePoolOf(service);
      if (nodePool) {
        this.nodePools.record(nodePool.req, nodePool.pool, service.status!.loadBalancer!);
        recorded++;
        continue;
      }
      const terms = recordedTerms(service, this.compatibility());
      const refused = this.allocator.record(terms, addresses);
      if (refused.length) {
        this.conflicts.set(terms.key, { addresses: refused, holders: [...new Set(refused.flatMap((ip) => this.allocator.holdersOf(ip)))] });
        this.logger.warn('service status claims addresses another service holds; they will be reassigned', { service: terms.key, addresses: refused.map(formatIP).join(',') });
      }
      recorded++;
    }
    this.rebuilt = true;
    this.logger.info('load-balancer addresses rebuilt from service status', { services: recorded });
  }

  async getLoadBalancer(_clusterName: string, service: V1Service): Promise<LoadBalancerResult> {
    const onNodes = this.nodePools.statusOf(serviceKey(service));
    if (onNodes) return { exists: true, status: onNodes };
    const assignment = this.allocator.assignmentOf(serviceKey(service));
    return assignment ? { exists: true, status: statusOf(assignment) } : { exists: false, status: {} };
  }

  /** The pool of each address the service holds, in status order (see LoadBalancer.assignedPools). */
  assignedPools(service: V1Service): string[] | undefined {
    const onNodes = this.nodePools.statusOf(serviceKey(service));
    if (onNodes) return (onNodes.ingress ?? []).map(() => this.nodePools.poolOf(serviceKey(service))!);
    const assignment = this.allocator.assignmentOf(serviceKey(service));
    return assignment?.addresses.map((ip) => this.allocator.poolOf(ip)?.name ?? '');
  }

  /** The pools and their holders (see LoadBalancer.poolStatus); nothing until rebuilt, when the holders are not known yet. */
  poolStatus(): AddressPoolStatus[] {
    if (!this.rebuilt) return [];
    return this.allocator.details().map((pool) => {
      const pc = this.allocator.configuredPools().find((p) => p.name === pool.name);
      const conflicts = [...this.conflicts].flatMap(([service, c]) => {
        const mine = c.addresses.filter((ip) => pc && rangesContain(pc.ranges, ip));
        return mine.length ? [`service ${service}'s status claims ${mine.map(formatIP).join(', ')}, held by service ${c.holders.join(', ')}: it gets another address on its next sync`] : [];
      });
      return conflicts.length ? { ...pool, conflicts } : pool;
    });
  }

  getLoadBalancerName(_clusterName: string, service: V1Service): string {
    return defaultLoadBalancerName(service);
  }

  async ensureLoadBalancer(_clusterName: string, service: V1Service, nodes: V1Node[]): Promise<V1LoadBalancerStatus> {
    this.requireRebuilt();
    // No await between here and the return: assignments are decided in call order, one at a time.
    const req = addressRequest(service, this.compatibility());
    const nodePool = this.nodePools.poolFor(req);
    if (nodePool) {
      // Local: the nodes with an endpoint (endpointNodesOnly); none yet is no error, the status follows them.
      const status = this.nodePools.assign(req, nodePool, nodes, !this.endpointNodesOnly(service));
      this.allocator.release(req.key);
      return status;
    }
    this.nodePools.release(req.key);
    let assignment: ReturnType<AddressAllocator['assign']>;
    try {
      assignment = this.allocator.assign(req);
    } catch (e) {
      // Refused: the status must say what the service holds now. It may have given an address up
      // (allocator.assign), or its status may claim one a rebuild left with an older holder:
      // a status left as it was would keep claiming it (the soak's seed 3651965050, issue 29).
      if (e instanceof AllocationError) {
        const held = this.allocator.assignmentOf(req.key);
        e.holds = held ? statusOf(held) : { ingress: [] };
        this.conflicts.delete(req.key);
      }
      throw e;
    }
    this.conflicts.delete(req.key);
    for (const n of assignment.notShared) {
      this.events?.event({ apiVersion: 'v1', kind: 'Service', metadata: service.metadata }, 'Normal', ADDRESS_NOT_SHARED_REASON, notSharedMessage(service, n));
    }
    return statusOf(assignment);
  }

  /**
   * Range pools: nothing (the address does not depend on the nodes). Node-address pools: the
   * service's addresses follow the node set, so a changed set is written to its status here (the
   * service controller writes status only when it ensures).
   */
  async updateLoadBalancer(_clusterName: string, service: V1Service, nodes: V1Node[], signal?: AbortSignal): Promise<void> {
    this.requireRebuilt();
    if (!this.nodePools.holds(serviceKey(service))) return;
    const nodePool = this.nodePoolOf(service);
    if (!nodePool) return; // the pools changed: the service's next sync moves it
    // Written unless both what was last handed out and the service's status already say it: the
    // service given here is the service controller's copy from its last service sync, whose status
    // may be older than this provider's last write (a change back to it would then be skipped).
    const before = this.nodePools.statusOf(serviceKey(service));
    const status = this.nodePools.assign(nodePool.req, nodePool.pool, nodes, false);
    const unchanged = loadBalancerStatusEqual(before, status) && loadBalancerStatusEqual(service.status?.loadBalancer, status);
    if (unchanged || !this.source) return;
    const services = new ResourceClient<V1Service>(this.source.transport, SERVICES);
    // The ingress list is atomic: the whole new list replaces the old (as the service controller's own status patch).
    await services.patch(service.metadata!.name!, 'strategic', { status: { loadBalancer: { ingress: status.ingress?.length ? status.ingress : null } } }, { namespace: service.metadata?.namespace, subresource: 'status', signal });
    this.logger.info('node-address pool: service addresses follow the nodes', { service: serviceKey(service), addresses: (status.ingress ?? []).map((i) => i.ip).join(',') });
  }

  async ensureLoadBalancerDeleted(_clusterName: string, service: V1Service): Promise<void> {
    // A release before the rebuild would be undone by it (the service still carries its status).
    this.requireRebuilt();
    this.nodePools.release(serviceKey(service));
    this.conflicts.delete(serviceKey(service));
    if (this.allocator.release(serviceKey(service))) this.logger.debug(2, 'released load-balancer addresses', { service: serviceKey(service) });
  }

  /** The node-address pool the service takes its addresses from, with its request; undefined: a range pool's (or a bad annotation, which its ensure reports). */
  private nodePoolOf(service: V1Service): { req: AddressRequest; pool: NonNullable<ReturnType<NodeAddressPools['poolFor']>> } | undefined {
    let req: AddressRequest;
    try {
      req = addressRequest(service, this.compatibility());
    } catch {
      return undefined;
    }
    const pool = this.nodePools.poolFor(req);
    return pool && { req, pool };
  }

  private requireRebuilt(): void {
    if (!this.rebuilt) throw new RetryAfterError(REBUILD_RETRY_SECONDS, 'load-balancer addresses are not rebuilt from the cluster\'s services yet');
  }
}

function notSharedMessage(service: V1Service, n: NotShared): string {
  const key = service.metadata?.annotations?.[ALLOW_SHARED_IP_ANNOTATION]?.trim();
  return `not sharing ${formatIP(n.address)} (${ALLOW_SHARED_IP_ANNOTATION}: ${key}) with service ${n.holder}: ${n.reason}; assigned ${formatIP(n.instead)} instead`;
}

function statusOf(a: Assignment): V1LoadBalancerStatus {
  return { ingress: a.addresses.map((ip) => ({ ip: formatIP(ip) })) };
}

/** The sharing terms a rebuild records: ours alone when the compatible annotations disagree (the next ensure reports that). */
function recordedTerms(service: V1Service, compatibility: readonly Compatibility[]): SharingTerms {
  try {
    return sharingTerms(service, compatibility);
  } catch {
    return sharingTerms(service);
  }
}

function creation(s: V1Service): string {
  const t = s.metadata?.creationTimestamp as unknown;
  return t instanceof Date ? t.toISOString() : typeof t === 'string' ? t : '';
}

/** Backoff bounds when listing services for the rebuild fails. */
export type RebuildRetry = BackoffBounds;

export const DEFAULT_REBUILD_RETRY: RebuildRetry = { initialMs: 1000, maxMs: 30_000 };

/**
 * At the provider's start (each leadership term): connects the load balancer to the cluster and
 * rebuilds its allocator from every service (see refresh); forgets it all when the term ends
 * (ctx.signal), so the next term starts from the cluster again. For any provider that uses these pools.
 */
export async function rebuildFromServices(
  loadBalancer: PoolLoadBalancer,
  ctx: Pick<ProviderContext, 'transport' | 'signal'>,
  retry: RebuildRetry,
  logger: Logger,
): Promise<void> {
  loadBalancer.connect(ctx.transport, retry, logger);
  ctx.signal.addEventListener('abort', () => loadBalancer.forget(), { once: true });
  await loadBalancer.refresh(ctx.signal);
}

/** Every service, paged; a failed list is retried with backoff until it succeeds or the signal aborts. */
async function listServicesRetrying(source: { transport: KubeTransport; retry: RebuildRetry; logger: Logger }, signal: AbortSignal): Promise<V1Service[]> {
  const services = new ResourceClient<V1Service>(source.transport, SERVICES);
  const backoff = Backoff.doubling(source.retry);
  for (;;) {
    try {
      return await listAll(services, signal);
    } catch (e) {
      if (signal.aborted) throw e;
      const delay = backoff.next();
      source.logger.warn('cannot list services to rebuild load-balancer addresses; retrying', { error: errorMessage(e), retryMs: delay });
      await sleep(delay, signal);
    }
  }
}

async function listAll(client: ResourceClient<V1Service>, signal: AbortSignal): Promise<V1Service[]> {
  const items: V1Service[] = [];
  let cont: string | undefined;
  do {
    const page = await client.list({ query: { limit: 500, continue: cont }, signal });
    items.push(...page.items);
    cont = page.metadata?.continue || undefined;
  } while (cont);
  return items;
}
