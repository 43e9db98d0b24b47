import type { V1Node, V1Service } from '@kubernetes/client-node';
import type { Registry } from 'prom-client';
import type { CloudProvider } from '../cloud/types.ts';
import { CloudNodeController } from '../controllers/node/index.ts';
import { CloudNodeLifecycleController, type LifecycleOptions } from '../controllers/nodelifecycle/index.ts';
import { RouteController } from '../controllers/route/controller.ts';
import { ServiceController } from '../controllers/service/index.ts';
import type { Controller, ControllerContext } from '../controllers/types.ts';
import type { EventRecorder } from '../kube/event-recorder.ts';
import { Informer, stripManagedFields } from '../kube/informer/index.ts';
import { WorkQueueMetrics } from '../kube/workqueue/index.ts';
import { NODES, SERVICES } from '../kube/resources.ts';
import type { KubeTransport } from '../kube/transport.ts';
import type { Logger } from '../log.ts';
import type { Prefix } from '../net/ip.ts';
import type { ControllerName } from '../options/controllers.ts';

/** Event source components as upstream's controllers name them, so event queries carry over. */
const EVENT_SOURCES: Record<string, string> = {
  'cloud-node-controller': 'cloud-node-controller',
  'cloud-node-lifecycle-controller': 'cloud-node-lifecycle-controller',
  'service-lb-controller': 'service-controller',
  'node-route-controller': 'route_controller',
};

/** What the controllers need from the command line, already parsed and validated. */
export interface ControllerSettings {
  enabled: ReadonlySet<ControllerName>;
  clusterName: string;
  concurrentNodeSyncs: number;
  concurrentServiceSyncs: number;
  nodeStatusUpdateFrequencyMs: number;
  /** --node-label-resync; the node controller also re-syncs labels when the provider asks (relabelNodes). */
  nodeLabelResync: boolean;
  /** --kube-vip-annotation. */
  kubeVipAnnotation: boolean;
  configureCloudRoutes: boolean;
  clusterCIDRs: Prefix[];
  routeReconciliationPeriodMs: number;
  lifecycle: LifecycleOptions;
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
}

/**
 * Builds the enabled controllers whose capability the provider has (a missing capability is
 * logged once and the controller is not started), sharing one node and one service informer.
 */
export function buildControllers(settings: ControllerSettings, deps: ControllerDeps): { informers: { nodes: Informer<V1Node>; services: Informer<V1Service> }; controllers: Controller[] } {
  const log = deps.logger;
  const nodes = new Informer<V1Node>({ transport: deps.transport, type: NODES, transform: stripManagedFields, logger: log.with({ informer: 'nodes' }) });
  // Resynced every 30s as upstream's service informer, so pending clean-ups are retried.
  const services = new Informer<V1Service>({ transport: deps.transport, type: SERVICES, transform: stripManagedFields, resyncMs: 30_000, logger: log.with({ informer: 'services' }) });
  const workQueueMetrics = new WorkQueueMetrics(deps.registry);
  const context = (component: string): ControllerContext => ({
    transport: deps.transportFor?.(component) ?? deps.transport,
    recorder: deps.recorderFor(EVENT_SOURCES[component] ?? component),
    logger: log.with({ controller: component }),
    registry: deps.registry,
    cloud: deps.cloud,
    clusterName: settings.clusterName,
    nodeInformer: nodes,
    serviceInformer: services,
    isManagedNode: deps.isManagedNode,
    workQueueMetrics,
  });
  const controllers: Controller[] = [];
  const want = (name: ControllerName, capable: boolean, why: string): boolean => {
    if (!settings.enabled.has(name)) return false;
    if (!capable) log.info(`${name} not started: ${why}`, { controller: name });
    return capable;
  };
  const cloud = deps.cloud;
  if (want('cloud-node-controller', !!cloud.instances, `provider ${cloud.providerName} has no instances`)) {
    controllers.push(new CloudNodeController(context('cloud-node-controller'), {
      workers: settings.concurrentNodeSyncs,
      nodeStatusUpdateFrequencyMs: settings.nodeStatusUpdateFrequencyMs,
      relabelNodes: settings.nodeLabelResync || cloud.relabelNodes === true,
    }));
  }
  if (want('cloud-node-lifecycle-controller', !!cloud.instances, `provider ${cloud.providerName} has no instances`)) {
    controllers.push(new CloudNodeLifecycleController(context('cloud-node-lifecycle-controller'), settings.lifecycle));
  }
  if (want('service-lb-controller', !!cloud.loadBalancer, `provider ${cloud.providerName} has no load balancers`)) {
    controllers.push(new ServiceController(context('service-lb-controller'), {
      workers: settings.concurrentServiceSyncs,
      kubeVipAnnotation: settings.kubeVipAnnotation,
      ensureBlocked: deps.ensureBlocked,
    }));
  }
  const routesWhy = !settings.configureCloudRoutes ? '--configure-cloud-routes=false' : `provider ${cloud.providerName} has no routes`;
  if (want('node-route-controller', settings.configureCloudRoutes && !!cloud.routes, routesWhy)) {
    controllers.push(new RouteController(context('node-route-controller'), { clusterCIDRs: settings.clusterCIDRs, reconciliationPeriodMs: settings.routeReconciliationPeriodMs }));
  }
  return { informers: { nodes, services }, controllers };
}
