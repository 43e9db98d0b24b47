import type { V1Node, V1NodeAddress, V1Service, V1LoadBalancerStatus } from '@kubernetes/client-node';
import type { Registry } from 'prom-client';
import type { EventRecorder } from '../kube/event-recorder.ts';
import type { KubeTransport } from '../kube/transport.ts';
import type { Logger } from '../log.ts';
import type { Announcement, SpeakerConfig } from '../net/bgp/speaker.ts';
import type { NodeRuleEffects } from './node-rules.ts';

/**
 * The provider contract: the TypeScript mirror of k8s.io/cloud-provider's cloud.go (InstancesV2,
 * LoadBalancer, Routes). Types only; providers implement it, controllers call it.
 *
 * Beyond upstream: existence is three-valued. A provider that cannot tell (API down, timeout,
 * parse failure) answers `unknown` instead of throwing, and nothing ever acts on `unknown`.
 */

export type Existence = 'exists' | 'not-found' | 'unknown';

export interface InstanceMetadata {
  providerID: string;
  instanceType: string;
  nodeAddresses: V1NodeAddress[];
  zone: string;
  region: string;
  additionalLabels?: Record<string, string>;
  /**
   * Beyond upstream: the labels, annotations and taints the node rules of the provider's config
   * give this machine (src/cloud/node-rules.ts). Undefined: the provider has no rules, and the
   * node controller neither applies nor removes anything; empty: whatever rules applied before
   * is removed.
   */
  ruleEffects?: NodeRuleEffects;
  /**
   * Beyond upstream: the pod CIDRs the inventory pins for this machine (one per family), which
   * node IPAM's CloudAllocator gives its Node; undefined: none pinned. Checked against
   * --cluster-cidr by the controller (the provider does not know the flag).
   */
  podCIDRs?: string[];
}

export interface Instances {
  /** Whether the node's machine exists. Never throws for "cannot tell": answers unknown. */
  instanceExists(node: V1Node, signal?: AbortSignal): Promise<Existence>;
  /** Whether the machine is shut down; undefined when unknown. */
  instanceShutdown(node: V1Node, signal?: AbortSignal): Promise<boolean | undefined>;
  /** Metadata for initialisation; null when the provider has none for this node (not an error). */
  instanceMetadata(node: V1Node, signal?: AbortSignal): Promise<InstanceMetadata | null>;
  /**
   * Optional bulk answer (beyond upstream): existence of many nodes in one call, so the lifecycle
   * controller makes one provider call per period instead of one per NotReady node. The i-th
   * answer is about nodes[i], one answer per node: a list, not a map by name, since it is asked
   * about every managed node every period (a map of 5,000 answers is about 0.9 MB of garbage each
   * time, a list 40 kB, and the controller compares lists by position with the last period's).
   */
  instancesExist?(nodes: readonly V1Node[], signal?: AbortSignal): Promise<Existence[]>;
}

/**
 * Why a bulk existence answer cannot be matched to `count` nodes by position ("bulk answer has 3
 * answers for 2 nodes; taken as unknown"), or undefined when it can: the one rule the lifecycle
 * controller and the several-providers composite both apply before reading answers by position.
 */
export function unmatchedBulkAnswer(reply: unknown, count: number): string | undefined {
  if (!Array.isArray(reply)) return `bulk answer is not a list for ${count} nodes; taken as unknown`;
  if (reply.length !== count) return `bulk answer has ${reply.length} answers for ${count} nodes; taken as unknown`;
  return undefined;
}

export interface LoadBalancerResult {
  status: V1LoadBalancerStatus;
  exists: boolean;
}

export interface LoadBalancer {
  getLoadBalancer(clusterName: string, service: V1Service, signal?: AbortSignal): Promise<LoadBalancerResult>;
  getLoadBalancerName(clusterName: string, service: V1Service): string;
  ensureLoadBalancer(clusterName: string, service: V1Service, nodes: V1Node[], signal?: AbortSignal): Promise<V1LoadBalancerStatus | undefined>;
  updateLoadBalancer(clusterName: string, service: V1Service, nodes: V1Node[], signal?: AbortSignal): Promise<void>;
  ensureLoadBalancerDeleted(clusterName: string, service: V1Service, signal?: AbortSignal): Promise<void>;
  /** Classes this provider owns besides the default (class unset); beyond upstream. */
  readonly loadBalancerClasses?: readonly string[];
  /**
   * Beyond upstream: the load balancers hand out the nodes' own addresses (node-address pools),
   * so a node's address change is a change of the node set for them: it triggers a node sync and
   * an updateLoadBalancer, as a node joining does. Read on every node event.
   */
  readonly followsNodeAddresses?: boolean;
  /**
   * Beyond upstream: the service's load balancer is to be given only the nodes with a ready
   * endpoint of the service (e.g. a node-address pool's service with externalTrafficPolicy:
   * Local, whose addresses are those nodes'). The service controller then passes those nodes,
   * read from EndpointSlices, and syncs the service again whenever they change.
   */
  endpointNodesOnly?(service: V1Service): boolean;
  /**
   * Beyond upstream: ensure decides from what this process remembers (e.g. an address allocator),
   * so only one edge-ccm may ensure at a time, and `refresh` re-reads that memory from the
   * cluster after another edge-ccm may have decided. Leader election gives both (each new leader
   * starts the provider afresh); without it (--leader-elect=false) the app holds the Lease anyway,
   * the service controller ensures nothing while another edge-ccm holds it, and the app calls
   * refresh whenever this process gets the Lease.
   */
  readonly exclusive?: { refresh(signal: AbortSignal): Promise<void> };
  /**
   * Beyond upstream: a load balancer that hands out addresses from pools names the pool of each
   * address it gave the service (in the order of its status' ingress), or undefined when it holds
   * none. Its presence makes the service controller keep the edge-ccm.io/AddressAssigned
   * condition and the edge-ccm.io/assigned-pool annotation on each service; its ensure then
   * throws AddressAssignmentError for a service it cannot address.
   */
  assignedPools?(service: V1Service): string[] | undefined;
  /**
   * Beyond upstream: the pools in force and who holds what, for the AddressPool objects that
   * show them with kubectl (src/status). Read on every publication pass; cheap.
   */
  poolStatus?(): AddressPoolStatus[];
}

/** One pool as the AddressPool object shows it. */
export interface AddressPoolStatus {
  name: string;
  /** The pool's addresses after exclusions, as ranges or single addresses. */
  addresses: string[];
  families: { family: 'IPv4' | 'IPv6'; total: bigint; used: number; /** Reserved or held after a release, not in use. */ kept: number }[];
  /** namespace/name of each service holding addresses of the pool, with those addresses. */
  services: { service: string; addresses: string[] }[];
  /** Addresses of the pool two services' statuses claim (found at the rebuild), one sentence each. */
  conflicts?: string[];
}

export interface Route {
  name: string;
  targetNode: string;
  targetNodeAddresses: V1NodeAddress[];
  destinationCIDR: string;
  blackhole: boolean;
  /** The provider records targetNodeAddresses, so an address change means delete and re-create. */
  enableNodeAddresses?: boolean;
}

export interface Routes {
  listRoutes(clusterName: string, signal?: AbortSignal): Promise<Route[]>;
  createRoute(clusterName: string, nameHint: string, route: Route, signal?: AbortSignal): Promise<void>;
  deleteRoute(clusterName: string, route: Route, signal?: AbortSignal): Promise<void>;
  /**
   * Beyond upstream: told by the route controller after each round, once every route it wanted
   * was created or failed (a BGP table waits for the first round before it is announced, so a
   * new leader never ends a graceful restart with half the routes).
   */
  synced?(): void;
}

/** The cluster as the BGP announcer sees it (the app's informers), for BgpSource.announcements. */
export interface BgpClusterView {
  services: readonly V1Service[];
  /** Nodes that may back a load balancer: managed by this process and eligible as the service controller judges. */
  eligibleNodes: readonly V1Node[];
  /** namespace/name of a service -> names of the nodes with a ready endpoint of it (EndpointSlices). */
  readyEndpointNodes: ReadonlyMap<string, ReadonlySet<string>>;
}

/**
 * Beyond upstream: what a provider announces over BGP. The app runs the speaker (src/net/bgp)
 * while it leads, with this configuration, and announces this table; both are read again
 * after the provider's onChange.
 */
export interface BgpSource {
  /** The speaker's configuration in force; undefined: no BGP. */
  speakerConfig(): SpeakerConfig | undefined;
  /** The table to announce for this view of the cluster, and the prefixes left out because two kinds claimed them. */
  announcements(view: BgpClusterView): { table: Announcement[]; clashes: string[] };
  /** Whether the route controller has finished a round since this process started (see Routes.synced). */
  readonly routesSynced: boolean;
  /** Called when the pod CIDR routes changed. Returns the unsubscribe function. */
  onRoutesChange(listener: () => void): () => void;
}

/** What the app hands a provider at start (upstream: Initialize(clientBuilder, stop)). */
export interface ProviderContext {
  transport: KubeTransport;
  logger: Logger;
  signal: AbortSignal;
  /** For the provider's own metrics (cloudprovider_<name>_*, pool usage). */
  registry?: Registry;
  /**
   * For events about the objects the provider serves (e.g. why a Service got the address it
   * got), as upstream providers record through their own recorder; source `<provider>-cloud-provider`.
   */
  recorder?: EventRecorder;
}

/**
 * Beyond upstream, several providers in one process (src/cloud/composite-provider.ts): one of
 * them, as the controllers that judge nodes per provider see it.
 */
export interface ProviderPartition {
  /** Its --cloud-provider name, for metrics, health checks, logs and events. */
  name: string;
  /** Its platform: the scheme of its nodes' providerIDs. */
  platform: string;
  instances?: Instances;
}

export interface CloudProvider {
  readonly providerName: string;
  /**
   * Beyond upstream (KEP-5778's platform): the scheme of the providerIDs this provider gives its
   * nodes, e.g. `static` for `static://rack1/m1`. Required to run with other providers.
   */
  readonly platform?: string;
  /**
   * Beyond upstream: the provider serves only some platforms (several providers in one process):
   * whether a node may be read, labelled, tainted or deleted here at all. A node of a platform
   * nobody here serves is not, whatever the ownership flags say. Absent: every node (as upstream).
   */
  servesNode?(node: V1Node): boolean;
  /** Beyond upstream: the providers behind this one, in the configured order (several providers in one process). */
  readonly partitions?: readonly ProviderPartition[];
  /**
   * The partition that answers for this node: by its providerID's scheme, else by its
   * `cloudprovider.kubernetes.io/platform` annotation; undefined while that is not known (a node
   * without either is judged by none: never deleted).
   */
  partitionOf?(node: V1Node): ProviderPartition | undefined;
  /**
   * Beyond upstream: named checks the app serves on /healthz (not /livez: a provider's outage is
   * no reason to restart the process), e.g. one per provider behind a composite.
   */
  healthChecks?(): readonly { name: string; check: () => void }[];
  initialize?(ctx: ProviderContext): Promise<void> | void;
  readonly instances?: Instances;
  readonly loadBalancer?: LoadBalancer;
  readonly routes?: Routes;
  /** Beyond upstream: routes and load-balancer addresses announced over BGP (see BgpSource). */
  readonly bgp?: BgpSource;
  /** Releases watchers and timers; called on shutdown. */
  close?(): Promise<void> | void;
  /**
   * Beyond upstream: the provider's answers may have changed (e.g. its configuration was
   * reloaded), so controllers should resync soon instead of waiting for their period. Returns a
   * function that removes the listener.
   */
  onChange?(listener: () => void): () => void;
  /**
   * Beyond upstream: the provider wants the cloud labels of initialised nodes kept in line with
   * its metadata (as --node-label-resync does), because its answers change while nodes live.
   */
  readonly relabelNodes?: boolean;
  /**
   * Called when an edit of the provider's config file was rejected (the last good one stays in
   * force), with the problems as text; the app records a Warning event. Returns an unsubscribe.
   */
  onConfigRejected?(listener: (problems: string) => void): () => void;
  /**
   * Called with warnings about the configuration in force, which still loaded (e.g. reason
   * InsecureSecretFile: a secret file its group or others can read), as text: at once for the
   * configuration in force, then after each reload that has some; the app records a Warning
   * event with that reason. Never carries a secret. Returns an unsubscribe.
   */
  onConfigWarning?(listener: (reason: string, problems: string) => void): () => void;
}

/** Thrown by a load balancer to say "implemented elsewhere": the controller skips quietly. */
export class ImplementedElsewhereError extends Error {
  constructor(message = 'load balancer implemented elsewhere') {
    super(message);
    this.name = 'ImplementedElsewhereError';
  }
}

/** Why a service has no address, as the reason of its edge-ccm.io/AddressAssigned condition. */
export type AddressConditionReason =
  | 'PoolExhausted'
  | 'RequestedAddressNotInPool'
  | 'RequestedAddressInUse'
  | 'SharingRefused'
  | 'NoEligiblePool'
  | 'InvalidRequest';

/**
 * Thrown by a load balancer that cannot give a service an address (beyond upstream): the message
 * says why and what to change; the controller records it as the service's condition and event.
 */
export class AddressAssignmentError extends Error {
  /**
   * What the service holds after the refusal, when the load balancer knows it: the controller
   * writes it as the service's status, so a status never claims an address the service gave up
   * (or, after a rebuild, never got back). Undefined: the status stays as it is.
   */
  holds?: V1LoadBalancerStatus;

  constructor(message: string, readonly reason: AddressConditionReason) {
    super(message);
    this.name = 'AddressAssignmentError';
  }
}

/** Thrown to requeue after exactly `seconds` instead of the exponential backoff. */
export class RetryAfterError extends Error {
  constructor(readonly seconds: number, message = `retry after ${seconds}s`) {
    super(message);
    this.name = 'RetryAfterError';
  }
}

/** Upstream's DefaultLoadBalancerName: "a" + UID without dashes, cut to 32 characters. */
export function defaultLoadBalancerName(service: V1Service): string {
  return ('a' + (service.metadata?.uid ?? '').replaceAll('-', '')).slice(0, 32);
}
