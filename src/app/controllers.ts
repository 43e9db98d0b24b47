import type { V1Node, V1Service } from '@kubernetes/client-node';
import type { Registry } from 'prom-client';
import type { CloudProvider } from '../cloud/types.ts';
import { CloudNodeController } from '../controllers/node/index.ts';
import { CloudNodeLifecycleController, type LifecycleOptions } from '../controllers/nodelifecycle/index.ts';
import { RouteController } from '../controllers/route/controller.ts';
import { NodeIPAMController, type NodeIPAMOptions } from '../controllers/nodeipam/index.ts';
import { ServiceController } from '../controllers/service/index.ts';
import { CsrApprovalController } from '../controllers/csr/controller.ts';
import { CLOUD_NODE_CONTROLLER, CLOUD_NODE_LIFECYCLE_CONTROLLER, NODE_CSR_APPROVAL_CONTROLLER, NODE_IPAM_CONTROLLER, NODE_ROUTE_CONTROLLER, SERVICE_LB_CONTROLLER, STATUS_PUBLISHER, type ControllerName } from '../names.ts';
import type { Controller, ControllerContext } from '../controllers/types.ts';
import { EndpointNodes } from '../kube/endpoint-slices.ts';
import type { EventRecorder } from '../kube/event-recorder.ts';
import { Informer, stripManagedFields } from '../kube/informer/index.ts';
import type { RetryWait } from '../kube/api-server-return.ts';
import { stripUnreadNodeFields } from '../kube/node-fields.ts';
import { workQueueMetricsFor } from '../kube/workqueue/index.ts';
import { NODES, SERVICES } from '../kube/resources.ts';
import type { KubeTransport } from '../kube/transport.ts';
import type { Logger } from '../log.ts';
import type { Prefix } from '../net/ip.ts';
import { HeldConditionWriter } from '../controllers/nodelifecycle/held-condition.ts';
import { BreakerLink } from '../controllers/nodelifecycle/breaker-link.ts';
import { StatusPublisher } from '../status/publisher.ts';

/**
 * The controllers, in one table: to add one, add its folder under src/controllers, its name in
 * src/names.ts (upstream's names and aliases, which --controllers reads) and a row here, in the
 * same order (a test holds them together). The event sources are upstream's (event queries carry
 * over), so are the service accounts (--use-service-account-credentials, as upstream's controller
 * client names).
 */
export interface ControllerSpec {
  /** Its name in --controllers, logs, health checks and metrics (src/names.ts). */
  readonly name: ControllerName;
  /** The source component of its events. */
  readonly eventSource: string;
  /**
   * The kube-system service account it acts as with --use-service-account-credentials; absent:
   * edge-ccm's own account always (a controller beyond upstream has no bootstrapped role).
   */
  readonly serviceAccount?: string;
  /** Why it cannot run with this provider and these settings (logged once); undefined: it can. */
  unavailable(cloud: CloudProvider, settings: ControllerSelection): string | undefined;
  /** The controller, from its part of the context and its settings. */
  start(ctx: ControllerContext, settings: ControllerSettings): Controller;
}

export const CONTROLLERS = [
  {
    name: CLOUD_NODE_CONTROLLER,
    eventSource: 'cloud-node-controller',
    serviceAccount: 'node-controller',
    unavailable: (cloud) => (cloud.instances ? undefined : `provider ${cloud.providerName} has no instances`),
    start: (ctx, s) => new CloudNodeController(ctx, {
      workers: s.concurrentNodeSyncs,
      statusWorkers: s.concurrentNodeStatusUpdates ?? s.concurrentNodeSyncs,
      nodeStatusUpdateFrequencyMs: s.nodeStatusUpdateFrequencyMs,
      relabelNodes: s.nodeLabelResync || ctx.cloud.relabelNodes === true,
    }),
  },
  {
    name: CLOUD_NODE_LIFECYCLE_CONTROLLER,
    eventSource: 'cloud-node-lifecycle-controller',
    serviceAccount: 'node-controller',
    unavailable: (cloud) => (cloud.instances ? undefined : `provider ${cloud.providerName} has no instances`),
    start: (ctx, s) => new CloudNodeLifecycleController(ctx, s.lifecycle, {
      breakerLink: s.breakerLink,
      statusObject: s.statusObject,
      heldConditions: new HeldConditionWriter(ctx.transport),
    }),
  },
  {
    name: SERVICE_LB_CONTROLLER,
    eventSource: 'service-controller',
    serviceAccount: 'service-controller',
    unavailable: (cloud) => (cloud.loadBalancer ? undefined : `provider ${cloud.providerName} has no load balancers`),
    start: (ctx, s) => new ServiceController(ctx, { workers: s.concurrentServiceSyncs, kubeVipAnnotation: s.kubeVipAnnotation, ensureBlocked: s.ensureBlocked }),
  },
  {
    name: NODE_ROUTE_CONTROLLER,
    eventSource: 'route_controller',
    serviceAccount: 'route-controller',
    // The one place that says whether routes run (settings.ts requires --cluster-cidr then).
    unavailable: (cloud, s) => (!s.configureCloudRoutes ? '--configure-cloud-routes=false' : cloud.routes ? undefined : `provider ${cloud.providerName} has no routes`),
    start: (ctx, s) => new RouteController(ctx, { clusterCIDRs: s.clusterCIDRs, reconciliationPeriodMs: s.routeReconciliationPeriodMs, watchBased: s.watchBasedRoutes }),
  },
  {
    name: NODE_IPAM_CONTROLLER,
    eventSource: 'node-ipam-controller',
    // Upstream's nodeipam controller acts as node-controller (its ClientBuilder name): patching nodes is in that role.
    serviceAccount: 'node-controller',
    // As upstream's startNodeIpamController: named in --controllers and --allocate-node-cidrs.
    unavailable: (cloud, s) => (!s.nodeIPAM ? '--allocate-node-cidrs=false' : s.nodeIPAM.allocatorType === 'CloudAllocator' && !cloud.instances ? `--cidr-allocator-type=CloudAllocator: provider ${cloud.providerName} has no instances` : undefined),
    start: (ctx, s) => new NodeIPAMController(ctx, s.nodeIPAM!),
  },
  {
    name: NODE_CSR_APPROVAL_CONTROLLER,
    eventSource: 'node-csr-approval',
    // No serviceAccount: its opt-in ClusterRole (rbac-node-csr-approval.yaml) is bound to edge-ccm's own account.
    // The SANs are checked against the provider's addresses of the machine.
    unavailable: (cloud) => (cloud.instances ? undefined : `provider ${cloud.providerName} has no instances`),
    start: (ctx) => new CsrApprovalController(ctx),
  },
] as const satisfies readonly ControllerSpec[];

export type { ControllerName };

/** The controllers that run: enabled by --controllers, and able to with this provider and settings. */
export function runnableControllers(cloud: CloudProvider, settings: ControllerSelection): { run: ControllerSpec[]; skipped: { name: string; why: string }[] } {
  const run: ControllerSpec[] = [];
  const skipped: { name: string; why: string }[] = [];
  for (const spec of CONTROLLERS) {
    if (!settings.enabled.has(spec.name)) continue;
    const why = spec.unavailable(cloud, settings);
    if (why === undefined) run.push(spec);
    else skipped.push({ name: spec.name, why });
  }
  return { run, skipped };
}

/** Which controllers are asked for, and the one flag that can keep one from running. */
export type ControllerSelection = Pick<ControllerSettings, 'enabled' | 'configureCloudRoutes' | 'nodeIPAM'>;

/** What the controllers need from the command line, already parsed and validated. */
export interface ControllerSettings {
  enabled: ReadonlySet<string>;
  clusterName: string;
  concurrentNodeSyncs: number;
  /** --concurrent-node-status-updates resolved (0 there: --concurrent-node-syncs); absent: concurrentNodeSyncs. */
  concurrentNodeStatusUpdates?: number;
  concurrentServiceSyncs: number;
  nodeStatusUpdateFrequencyMs: number;
  /** --node-label-resync; the node controller also re-syncs labels when the provider asks (relabelNodes). */
  nodeLabelResync: boolean;
  /** --kube-vip-annotation. */
  kubeVipAnnotation: boolean;
  configureCloudRoutes: boolean;
  clusterCIDRs: Prefix[];
  /** --allocate-node-cidrs and the nodeipam flags, resolved; undefined: --allocate-node-cidrs=false. */
  nodeIPAM?: NodeIPAMOptions;
  routeReconciliationPeriodMs: number;
  /** The CloudControllerManagerWatchBasedRoutesReconciliation feature gate (see RouteControllerOptions.watchBased). */
  watchBasedRoutes?: boolean;
  lifecycle: LifecycleOptions;
  /** Why the service controller may not ensure load balancers now (see ReplicaGuard); undefined: it may. */
  ensureBlocked?: () => string | undefined;
  /** This instance's EdgeCCMStatus object (src/status): the leader-election Lease's name. */
  statusObject?: string;
  /** Between the lifecycle controller and the status publisher (set by buildControllers). */
  breakerLink?: BreakerLink;
}

export interface ControllerDeps {
  transport: KubeTransport;
  recorderFor(component: string): EventRecorder;
  /** A controller's own API identity (--use-service-account-credentials); default `transport`. */
  transportFor?(component: string): KubeTransport | undefined;
  logger: Logger;
  registry: Registry;
  cloud: CloudProvider;
  isManagedNode(node: V1Node): boolean;
  /** Why the service controller may not ensure load balancers now (see ReplicaGuard); undefined: it may. */
  ensureBlocked?: () => string | undefined;
  /** The shared informers' waits between list/watch attempts, cut short when the API server is back (ApiServerReturn). */
  retryWait?: RetryWait;
}

/**
 * Builds the enabled controllers whose capability the provider has (a missing capability is
 * logged once and the controller is not started), sharing one node, one service and one EndpointSlice informer.
 */
export function buildControllers(settings: ControllerSettings, deps: ControllerDeps): { informers: { nodes: Informer<V1Node>; services: Informer<V1Service>; endpoints: EndpointNodes }; controllers: Controller[] } {
  const log = deps.logger;
  const nodes = new Informer<V1Node>({ transport: deps.transport, type: NODES, transform: stripUnreadNodeFields, logger: log.with({ informer: 'nodes' }), retryWait: deps.retryWait });
  // Resynced every 30s as upstream's service informer, so pending clean-ups are retried.
  const services = new Informer<V1Service>({ transport: deps.transport, type: SERVICES, transform: stripManagedFields, resyncMs: 30_000, logger: log.with({ informer: 'services' }), retryWait: deps.retryWait });
  // Watched only once someone asks (BGP, node-address pools with externalTrafficPolicy: Local).
  const endpoints = new EndpointNodes({ transport: deps.transport, logger: log.with({ informer: 'endpointslices' }), retryWait: deps.retryWait });
  const workQueueMetrics = workQueueMetricsFor(deps.registry);
  const context = (spec: ControllerSpec): ControllerContext => ({
    transport: deps.transportFor?.(spec.name) ?? deps.transport,
    ownTransport: deps.transport,
    recorder: deps.recorderFor(spec.eventSource),
    logger: log.with({ controller: spec.name }),
    registry: deps.registry,
    cloud: deps.cloud,
    clusterName: settings.clusterName,
    nodeInformer: nodes,
    serviceInformer: services,
    endpointNodes: endpoints,
    isManagedNode: deps.isManagedNode,
    workQueueMetrics,
  });
  const { run, skipped } = runnableControllers(deps.cloud, settings);
  for (const { name, why } of skipped) log.info(`${name} not started: ${why}`, { controller: name });
  const breakerLink = new BreakerLink();
  const controllers = run.map((spec) => spec.start(context(spec), { ...settings, ensureBlocked: deps.ensureBlocked, breakerLink }));
  // Beyond upstream, always on while leading: the AddressPool and EdgeCCMStatus objects (src/status).
  controllers.push(new StatusPublisher({
    name: settings.statusObject ?? 'cloud-controller-manager',
    cloud: deps.cloud,
    transport: deps.transportFor?.(STATUS_PUBLISHER) ?? deps.transport,
    logger: log.with({ controller: STATUS_PUBLISHER }),
    breaker: breakerLink,
  }));
  return { informers: { nodes, services, endpoints }, controllers };
}
