import type { V1Node, V1Service } from '@kubernetes/client-node';
import type { Registry } from 'prom-client';
import type { CloudProvider } from '../cloud/types.ts';
import type { EndpointNodes } from '../kube/endpoint-slices.ts';
import type { EventRecorder } from '../kube/event-recorder.ts';
import type { Informer } from '../kube/informer/index.ts';
import type { WorkQueueMetrics } from '../kube/workqueue/index.ts';
import type { KubeTransport } from '../kube/transport.ts';
import type { Logger } from '../log.ts';

/** What the app hands every controller: shared clients, informers and the ownership decision. */
export interface ControllerContext {
  transport: KubeTransport;          // for writes
  /**
   * edge-ccm's own account, for edge-ccm's own objects (the node IPAM record), whatever
   * --use-service-account-credentials makes `transport`; absent: `transport`.
   */
  ownTransport?: KubeTransport;
  recorder: EventRecorder;
  logger: Logger;
  registry: Registry;                // prom-client, for the controller's metrics (create metrics once per registry)
  cloud: CloudProvider;
  clusterName: string;
  nodeInformer: Informer<V1Node>;    // shared informers, started by the app
  serviceInformer: Informer<V1Service>;
  /** The nodes with ready endpoints per service (EndpointSlices), watched once someone calls want(). */
  endpointNodes?: EndpointNodes;
  isManagedNode(node: V1Node): boolean;   // node ownership decision (one module decides; default: all nodes)
  /** One per registry (metric names register once); the queues report workqueue_* through it. */
  workQueueMetrics?: WorkQueueMetrics;
}

export interface Controller {
  readonly name: string;
  run(signal: AbortSignal): Promise<void>;
  healthCheck?(): void;
}
