import type { V1Node, V1Service } from '@kubernetes/client-node';
import { objectKey } from '../../kube/informer/index.ts';
import { ResourceClient, SERVICES } from '../../kube/resources.ts';
import { nodeEligibleForLoadBalancer, wantsLoadBalancer } from '../../kube/service-helpers.ts';
import { ItemExponentialFailureRateLimiter, WorkQueue } from '../../kube/workqueue/index.ts';
import type { Clock } from '../../util/time.ts';
import type { CloudProvider } from '../../cloud/types.ts';
import type { Controller, ControllerContext } from '../types.ts';
import { LoadBalancerSync, retryAfterSeconds } from './load-balancer-sync.ts';
import { KUBE_VIP_FIELD_MANAGER } from './kube-vip.ts';
import { ServiceControllerMetrics } from './metrics.ts';
import { errorMessage } from '../../util/errors.ts';
import { needsCleanup, needsUpdate, nodeAddressesChanged, shouldSyncUpdatedNode } from './predicates.ts';
import { SERVICE_LB_CONTROLLER } from '../../names.ts';

/**
 * The service load-balancer controller (upstream controllers/service): keeps a cloud load
 * balancer, with the service's finalizer and ingress status, for every Service that wants one,
 * and points each at the eligible nodes.
 *
 * Service events queue the service's key when something its load balancer depends on changed;
 * node events queue one node-sync pass over every load balancer. `workers` service workers run,
 * plus one node-sync worker that updates up to `workers` load balancers at once.
 */

export interface ServiceControllerOptions {
  /** --concurrent-service-syncs. */
  workers: number;
  /** --kube-vip-annotation: also write the ingress IPs as kube-vip's annotation (needs `patch` on services). */
  kubeVipAnnotation?: boolean;
  /** Time source for the queues' delays (tests). */
  clock?: Clock;
  /** Why no load balancer may be ensured now (see LoadBalancerSyncDeps.ensureBlocked). */
  ensureBlocked?: () => string | undefined;
}

// Per-item retry delay: 5s doubling to 300s (upstream minRetryDelay / maxRetryDelay).
export const MIN_RETRY_DELAY_MS = 5_000;
export const MAX_RETRY_DELAY_MS = 300_000;

/** The node queue's only key: see registerHandlers. */
export const NODE_SYNC_KEY = 'node-sync';

/** What the service controller uses of the app's context: the provider's load balancer and change notice, both informers, its writes, events and metrics. */
export type ServiceControllerContext = Pick<ControllerContext, 'transport' | 'recorder' | 'logger' | 'registry' | 'clusterName' | 'nodeInformer' | 'serviceInformer' | 'endpointNodes' | 'isManagedNode' | 'workQueueMetrics'> & { cloud: Pick<CloudProvider, 'loadBalancer' | 'onChange'> };

/** Its name in logs, health checks and metrics: src/names.ts, the one list of names. */
export { SERVICE_LB_CONTROLLER };

export class ServiceController implements Controller {
  readonly name = SERVICE_LB_CONTROLLER;
  readonly serviceQueue: WorkQueue<string>;
  /** Node names; one key or many, a pass syncs every load balancer, so bursts of node events coalesce. */
  readonly nodeQueue: WorkQueue<string>;
  readonly sync: LoadBalancerSync;
  /** The provider's classes, read live: the static provider's can change with a config reload. */
  private readonly ownedClasses: () => readonly string[];
  private readonly workers: number;

  constructor(
    private readonly ctx: ServiceControllerContext,
    opts: ServiceControllerOptions,
  ) {
    const balancer = ctx.cloud.loadBalancer;
    if (!balancer) throw new Error('the cloud provider does not support external load balancers');
    this.ownedClasses = () => balancer.loadBalancerClasses ?? [];
    this.workers = Math.max(1, opts.workers);
    const queueOptions = () => ({
      rateLimiter: new ItemExponentialFailureRateLimiter<string>(MIN_RETRY_DELAY_MS, MAX_RETRY_DELAY_MS),
      clock: opts.clock,
      metrics: ctx.workQueueMetrics,
    });
    this.serviceQueue = new WorkQueue<string>('service', queueOptions());
    this.nodeQueue = new WorkQueue<string>('node', queueOptions());
    const services = new ResourceClient<V1Service>(ctx.transport, SERVICES);
    this.sync = new LoadBalancerSync({
      balancer,
      clusterName: ctx.clusterName,
      ownedClasses: this.ownedClasses,
      recorder: ctx.recorder,
      logger: ctx.logger.with({ controller: this.name }),
      metrics: ServiceControllerMetrics.for(ctx.registry),
      getService: (key) => ctx.serviceInformer.store.get(key),
      listNodes: () => ctx.nodeInformer.store.list().filter((n) => ctx.isManagedNode(n)),
      endpointNodes: ctx.endpointNodes,
      // A strategic merge patch on the status subresource: see patches.ts for why.
      patchServiceStatus: async (service, patch, signal) => {
        await services.patch(service.metadata?.name ?? '', 'strategic', patch, {
          namespace: service.metadata?.namespace,
          subresource: 'status',
          signal,
        });
      },
      // A JSON merge patch on the Service itself, not its status: annotations are metadata, which
      // a status endpoint is not meant to write (custom resources' ignore it; the Service's happens
      // to keep it, which upstream relies on for the finalizer only), and the opt-in RBAC then says
      // plainly that this flag writes Services. Merge, because annotations are a plain map: the
      // patch sets or deletes (null) our keys and leaves every other one alone.
      // Needs `patch` on services: deploy/kubernetes/rbac-kube-vip.yaml, whose admission policy
      // accepts only this field manager and only the kube-vip annotations.
      patchService: async (service, patch, signal) => {
        await services.patch(service.metadata?.name ?? '', 'merge', patch, { namespace: service.metadata?.namespace, signal, fieldManager: KUBE_VIP_FIELD_MANAGER });
      },
      kubeVipAnnotation: opts.kubeVipAnnotation ?? false,
      ensureBlocked: opts.ensureBlocked,
    });
    this.registerHandlers();
  }

  async run(signal: AbortSignal): Promise<void> {
    const log = this.ctx.logger.with({ controller: this.name });
    const stop = () => {
      this.serviceQueue.shutDown();
      this.nodeQueue.shutDown();
    };
    signal.addEventListener('abort', stop, { once: true });
    const unwatchClasses = this.watchOwnedClasses();
    log.info('Starting service controller');
    // Node-address pools may have Local services: list the EndpointSlices now rather than at their first sync.
    if (this.ctx.cloud.loadBalancer?.followsNodeAddresses) this.ctx.endpointNodes?.want();
    try {
      const synced = await Promise.all([this.ctx.serviceInformer.waitForSync(signal), this.ctx.nodeInformer.waitForSync(signal)]);
      if (!synced.every(Boolean)) return;
      const serviceWorkers = Array.from({ length: this.workers }, async () => {
        while (await this.processNextServiceItem(signal));
      });
      // One node-sync worker, so only one node-sync pass runs at a time.
      const nodeWorker = (async () => {
        while (await this.processNextNodeItem(signal));
      })();
      await Promise.all([...serviceWorkers, nodeWorker]);
    } finally {
      unwatchClasses();
      stop();
      signal.removeEventListener('abort', stop);
      log.info('Shutting down service controller');
    }
  }

  /**
   * One service-worker turn: sync a key, then forget its backoff, requeue it after the
   * provider's "retry after", or requeue it with backoff. False once the queue is shut down.
   */
  async processNextServiceItem(signal?: AbortSignal): Promise<boolean> {
    const next = await this.serviceQueue.get();
    if (next.shutdown) return false;
    const key = next.item;
    try {
      await this.sync.syncService(key, signal);
      this.serviceQueue.forget(key);
    } catch (e) {
      const seconds = retryAfterSeconds(e);
      const log = this.ctx.logger.with({ controller: this.name, service: key });
      if (seconds !== undefined) {
        log.warn('error processing service (retrying after the delay the provider asked for)', { error: errorMessage(e), seconds });
        this.serviceQueue.addAfter(key, seconds * 1000);
      } else {
        if (!signal?.aborted) log.error('error processing service (retrying with exponential backoff)', { error: errorMessage(e) });
        this.serviceQueue.addRateLimited(key);
      }
    } finally {
      this.serviceQueue.done(key);
    }
    return true;
  }

  /** One node-sync turn: a pass over every load balancer; failed services go to the service queue. */
  async processNextNodeItem(signal?: AbortSignal): Promise<boolean> {
    const next = await this.nodeQueue.get();
    if (next.shutdown) return false;
    try {
      for (const key of await this.sync.syncNodes(this.workers, signal)) this.serviceQueue.add(key);
    } catch (e) {
      // syncNodes reports per service; anything else must not end the only node-sync worker.
      this.ctx.logger.error('node sync failed', { controller: this.name, error: errorMessage(e) });
    } finally {
      this.nodeQueue.forget(next.item);
      this.nodeQueue.done(next.item);
    }
    return true;
  }

  /**
   * Beyond upstream: when the provider's owned classes change (a static config reload), every
   * service whose ownership changed is synced: a newly owned class gets load balancers, a class
   * no longer owned is cleaned up (address released, finalizer removed) for whoever owns it now.
   * Returns the unsubscribe function.
   */
  watchOwnedClasses(): () => void {
    let before = new Set(this.ownedClasses());
    return this.ctx.cloud.onChange?.(() => {
      const after = new Set(this.ownedClasses());
      // Added or removed: owned on one side only.
      const changed = new Set([...before, ...after].filter((cls) => before.has(cls) !== after.has(cls)));
      before = after;
      if (!changed.size) return;
      let count = 0;
      for (const service of this.ctx.serviceInformer.store.list()) {
        const cls = service.spec?.loadBalancerClass;
        if (cls && changed.has(cls)) {
          this.serviceQueue.add(objectKey(service));
          count++;
        }
      }
      this.ctx.logger.info('owned load-balancer classes changed; syncing the services of the changed classes', {
        controller: this.name, classes: [...after].join(',') || '(default only)', services: count,
      });
    }) ?? (() => {});
  }

  private registerHandlers(): void {
    const enqueueService = (service: V1Service) => this.serviceQueue.add(objectKey(service));
    this.ctx.serviceInformer.addHandlers({
      // Cleanup on add too: it repairs what a restart interrupted.
      onAdd: (service) => {
        const classes = this.ownedClasses();
        if (wantsLoadBalancer(service, classes) || needsCleanup(service, classes)) enqueueService(service);
      },
      onUpdate: (oldService, service) => {
        const classes = this.ownedClasses();
        if (needsUpdate(oldService, service, classes) || needsCleanup(service, classes)) enqueueService(service);
      },
      // No delete handler: a service with our finalizer is cleaned up when its deletion timestamp appears.
    });
    // One key for every node change, as upstream's node sync: a pass covers all load balancers
    // and every node, so any number of node events while one is queued need a single pass
    // (a key per node made a 5000-node start do 5000 full passes).
    const enqueueNode = () => this.nodeQueue.add(NODE_SYNC_KEY);
    this.ctx.nodeInformer.addHandlers({
      onAdd: enqueueNode,
      onUpdate: (oldNode, node) => {
        const managedChanged = this.ctx.isManagedNode(oldNode) !== this.ctx.isManagedNode(node);
        // Load balancers of node addresses follow every change of the set at once, a taint too.
        const addressesMatter = this.ctx.cloud.loadBalancer?.followsNodeAddresses &&
          (nodeAddressesChanged(oldNode, node) || nodeEligibleForLoadBalancer(oldNode) !== nodeEligibleForLoadBalancer(node));
        if (managedChanged || shouldSyncUpdatedNode(oldNode, node) || addressesMatter) enqueueNode();
      },
      onDelete: enqueueNode,
    });
    // Beyond upstream: a load balancer given only the nodes with ready endpoints (endpointNodesOnly) follows them.
    this.ctx.endpointNodes?.onServiceChange((key) => {
      const service = this.ctx.serviceInformer.store.get(key);
      if (service && wantsLoadBalancer(service, this.ownedClasses()) && this.ctx.cloud.loadBalancer?.endpointNodesOnly?.(service)) this.serviceQueue.add(key);
    });
  }
}
