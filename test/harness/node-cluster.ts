import type { CoreV1Event, V1Node } from '@kubernetes/client-node';
import type { Registry } from 'prom-client';
import type { CloudProvider } from '../../src/cloud/types.ts';
import type { ControllerContext } from '../../src/controllers/types.ts';
import { EventBroadcaster } from '../../src/kube/events.ts';
import { Informer } from '../../src/kube/informer/index.ts';
import { EVENTS, NODES, ResourceClient } from '../../src/kube/resources.ts';
import type { KubeTransport } from '../../src/kube/transport.ts';
import type { Logger } from '../../src/log.ts';
import { controllerContext } from '../fakes/controller-context.ts';
import { sharedControlPlane } from './control-plane.ts';
import { transportFor } from './kubeconfig.ts';

/** What a controller test against the shared control plane's nodes starts with. */
export interface NodeTestCluster {
  transport: KubeTransport;
  nodes: ResourceClient<V1Node>;
  events: ResourceClient<CoreV1Event>;
  /** Running and synced. */
  nodeInformer: Informer<V1Node>;
  broadcaster: EventBroadcaster;
  /**
   * A controller's context on this cluster, its events recorded as `component`, managing exactly
   * the nodes `names` (the control plane is shared with other test files: only those are ours).
   */
  context(component: string, cloud: CloudProvider, names: string[], registry: Registry): ControllerContext;
  /** Stops the informer and the broadcaster and deletes every node named PREFIX... */
  stop(): Promise<void>;
}

/**
 * The shared control plane with an admin client for nodes and events, a synced node informer and
 * an event broadcaster. The control plane is shared with other test files, so each file names
 * its nodes with its own `prefix`: stop() deletes those only.
 */
export async function startNodeTestCluster(prefix: string, logger: Logger): Promise<NodeTestCluster> {
  const cp = await sharedControlPlane();
  const transport = transportFor(cp.adminKubeconfig);
  const nodes = new ResourceClient<V1Node>(transport, NODES);
  const nodeInformer = new Informer<V1Node>({ transport, type: NODES, logger });
  const broadcaster = new EventBroadcaster({ transport, logger });
  const stopInformer = new AbortController();
  const informerRun = nodeInformer.run(stopInformer.signal);
  const stop = async () => {
    stopInformer.abort();
    await informerRun.catch(() => {});
    await broadcaster.close(1_000);
    const ours = (await nodes.list()).items.filter((n) => n.metadata?.name?.startsWith(prefix));
    await Promise.allSettled(ours.map((n) => nodes.delete(n.metadata!.name!)));
  };
  if (!(await nodeInformer.waitForSync(AbortSignal.timeout(60_000)))) {
    await stop();
    throw new Error('the node informer did not sync within 60 s');
  }
  const context = (component: string, cloud: CloudProvider, names: string[], registry: Registry) => {
    const managed = new Set(names);
    return controllerContext({
      transport, recorder: broadcaster.recorder(component), logger, registry, cloud, clusterName: 'it', nodeInformer,
      isManagedNode: (n) => managed.has(n.metadata?.name ?? ''),
    });
  };
  return { transport, nodes, events: new ResourceClient<CoreV1Event>(transport, EVENTS), nodeInformer, broadcaster, context, stop };
}
