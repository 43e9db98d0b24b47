import type { V1LoadBalancerStatus, V1Node, V1Service } from '@kubernetes/client-node';
import { ImplementedElsewhereError, RetryAfterError, type LoadBalancer } from '../../cloud/types.ts';
import type { EndpointNodes } from '../../kube/endpoint-slices.ts';
import { isNotFound } from '../../kube/errors.ts';
import { nodeName } from '../../kube/node-helpers.ts';
import type { EventRecorder } from '../../kube/event-recorder.ts';
import { hasLBFinalizer, nodeEligibleForLoadBalancer, serviceKey, wantsLoadBalancer } from '../../kube/service-helpers.ts';
import type { Logger } from '../../log.ts';
import {
  DELETE_FAILED_REASON,
  SERVICE_EVENTS,
  SYNC_FAILED_REASON,
  UPDATE_FAILED_REASON,
  deleteFailedMessage,
  loggableNodeNames,
  serviceSubject,
  syncFailedMessage,
  updateFailedMessage,
} from './events.ts';
import type { ServiceControllerMetrics } from './metrics.ts';
import { kubeVipAnnotationPatch, type MergePatch } from './kube-vip.ts';
import { addFinalizerPatch, loadBalancerStatusPatch, removeFinalizerPatch, type StrategicPatch } from './patches.ts';
import { addressStatePatch, assignedState, failedState, heldAfterFailure, mergePatches } from './address-condition.ts';
import { errorMessage } from '../../util/errors.ts';
import { forEachLimited } from '../../util/parallel.ts';
import { hasForeignLoadBalancerClass, needsCleanup, nodeAddressesEqual, nodesSufficientlyEqual } from './predicates.ts';

/**
 * What the service controller does for one service key and for one node change, without the
 * queues around it (upstream syncService, syncLoadBalancerIfNeeded and syncNodes).
 *
 * State, as upstream: the last service state each key was synced with (so node syncs and
 * deletions of services without finalizer know the service), and the node set each load
 * balancer was last given (so a node sync skips load balancers whose nodes did not change).
 */

export interface LoadBalancerSyncDeps {
  balancer: LoadBalancer;
  clusterName: string;
  /** Classes the provider owns besides "no class" (beyond upstream). */
  /** Read on every use: a provider may change the classes it owns while running (static config reload). */
  ownedClasses: () => readonly string[];
  recorder: EventRecorder;
  logger: Logger;
  metrics: ServiceControllerMetrics;
  /** The informer's current object for a key, or undefined when it is gone. */
  getService(key: string): V1Service | undefined;
  /** Every node this process manages, eligible or not (the informer's store, filtered). */
  listNodes(): V1Node[];
  /** The nodes with ready endpoints, for the services whose load balancer wants only those (LoadBalancer.endpointNodesOnly). */
  endpointNodes?: Pick<EndpointNodes, 'want' | 'hasSynced' | 'nodesOf'>;
  /** Sends a strategic merge patch to services/NAME/status. */
  patchServiceStatus(service: V1Service, patch: StrategicPatch, signal?: AbortSignal): Promise<void>;
  /** Sends a JSON merge patch to services/NAME (only the kube-vip annotation is written this way). */
  patchService(service: V1Service, patch: MergePatch, signal?: AbortSignal): Promise<void>;
  /** --kube-vip-annotation: mirror the ingress IPs into kube-vip's annotation (beyond upstream). */
  kubeVipAnnotation?: boolean;
  /** Why no load balancer may be ensured now (another edge-ccm decides; see LoadBalancer.exclusive); undefined: go ahead. */
  ensureBlocked?: () => string | undefined;
  /** For the AddressAssigned condition's lastTransitionTime (tests); default: the system clock. */
  now?: () => Date;
}

/** How soon a service waiting for the first list of EndpointSlices is tried again. */
export const ENDPOINTS_SYNC_RETRY_SECONDS = 1;

/** How soon a service whose ensure was refused (ensureBlocked) is tried again. */
export const ENSURE_BLOCKED_RETRY_SECONDS = 10;

/** What a sync did: ensured a load balancer, deleted one, or left a foreign service alone. */
export type LoadBalancerOperation = 'ensure' | 'delete' | 'skip';

/**
 * The "retry after N seconds" a provider asked for, anywhere in the error's cause chain.
 * Beyond upstream, which only honours it from ensureLoadBalancer: the contract says any.
 */
export function retryAfterSeconds(error: unknown): number | undefined {
  for (let e: unknown = error, depth = 0; e && depth < 10; e = (e as { cause?: unknown }).cause, depth++) {
    if (e instanceof RetryAfterError) return e.seconds;
  }
  return undefined;
}

/** An error with upstream's wording that keeps the provider's error as its cause. */
function wrap(context: string, cause: unknown): Error {
  return new Error(`${context}: ${errorMessage(cause)}`, { cause });
}

export class LoadBalancerSync {
  private readonly serviceCache = new Map<string, V1Service>();
  private readonly lastSyncedNodes = new Map<string, V1Node[]>();
  /** The last answer of eligibleNodes(), handed out again while the nodes are the same objects. */
  private lastEligible: V1Node[] = [];

  constructor(private readonly deps: LoadBalancerSyncDeps) {}

  /** Syncs one service key; throws to ask for a retry. */
  async syncService(key: string, signal?: AbortSignal): Promise<void> {
    const started = performance.now();
    try {
      const service = this.deps.getService(key);
      if (!service) await this.processServiceDeletion(key, signal);
      else await this.processServiceCreateOrUpdate(service, key, signal);
    } finally {
      this.deps.logger.debug(4, 'Finished syncing service', { service: key, seconds: (performance.now() - started) / 1000 });
    }
  }

  /**
   * Updates the hosts of every cached load balancer whose eligible node set changed since its
   * last sync, `workers` at a time. Returns the keys of services to retry through the service queue.
   */
  async syncNodes(workers: number, signal?: AbortSignal): Promise<Set<string>> {
    const started = performance.now();
    try {
      const services = [...this.serviceCache.values()];
      this.deps.logger.debug(2, 'Syncing backends for all LB services', { services: services.length });
      const retry = await this.updateLoadBalancerHosts(services, workers, signal);
      this.deps.logger.debug(2, 'Updated load balancers to direct traffic to the updated set of nodes', {
        updated: services.length - retry.size,
        total: services.length,
      });
      return retry;
    } finally {
      this.deps.metrics.nodeSyncLatency.observe((performance.now() - started) / 1000);
    }
  }

  /** Node sync for the given services; the keys of those that failed. */
  async updateLoadBalancerHosts(services: readonly (V1Service | undefined)[], workers: number, signal?: AbortSignal): Promise<Set<string>> {
    const retry = new Set<string>();
    await forEachLimited(services, workers, async (service) => {
      if (service && (await this.nodeSyncService(service, signal))) retry.add(serviceKey(service));
    });
    return retry;
  }

  /**
   * The eligible nodes a load balancer should send traffic to now. The same nodes give the same
   * array, so the lists kept per service (lastSyncedNodes) share one: a list of its own per service
   * held services x nodes references (5000 x 5000: about 190 MiB). Callers must not change it.
   */
  eligibleNodes(): V1Node[] {
    const nodes = this.deps.listNodes().filter(nodeEligibleForLoadBalancer);
    const last = this.lastEligible;
    if (nodes.length === last.length && nodes.every((n, i) => n === last[i])) return last;
    this.lastEligible = nodes;
    return nodes;
  }

  /**
   * The nodes the service's load balancer is given: the eligible ones; when the load balancer
   * wants only those with a ready endpoint of the service (endpointNodesOnly), those among them.
   */
  nodesFor(service: V1Service): V1Node[] {
    const nodes = this.eligibleNodes();
    if (!this.deps.balancer.endpointNodesOnly?.(service)) return nodes;
    const endpoints = this.deps.endpointNodes;
    if (!endpoints) throw new Error('the load balancer needs the nodes with ready endpoints of the service, and no EndpointSlice informer runs');
    endpoints.want();
    // Never decide from an empty store: that would take every address away until the list arrives.
    if (!endpoints.hasSynced()) throw new RetryAfterError(ENDPOINTS_SYNC_RETRY_SECONDS, 'waiting for the first list of EndpointSlices (externalTrafficPolicy: Local)');
    const ready = endpoints.nodesOf(serviceKey(service));
    return nodes.filter((n) => ready.has(nodeName(n)));
  }

  /** Ensures or deletes the service's load balancer and writes its finalizer and status. */
  async syncLoadBalancerIfNeeded(service: V1Service, key: string, signal?: AbortSignal): Promise<LoadBalancerOperation> {
    const ownedClasses = this.deps.ownedClasses();
    // Another controller's class, never ours: not even a provider call (beyond upstream, which would
    // look the load balancer up). With our finalizer it is still cleaned up below.
    if (hasForeignLoadBalancerClass(service, ownedClasses) && !hasLBFinalizer(service)) return 'skip';
    const previous = service.status?.loadBalancer;
    let next: V1LoadBalancerStatus;
    let op: LoadBalancerOperation;
    if (!wantsLoadBalancer(service, ownedClasses) || needsCleanup(service, ownedClasses)) {
      op = 'delete';
      next = {};
      await this.deleteLoadBalancer(service, key, signal);
    } else {
      op = 'ensure';
      let status: V1LoadBalancerStatus | undefined;
      try {
        status = await this.ensureLoadBalancer(service, key, signal);
      } catch (e) {
        await this.recordAddressFailure(service, key, e, signal);
        throw e;
      }
      if (!status) return op; // implemented elsewhere: nothing of ours to record
      next = status;
    }
    try {
      // The AddressAssigned condition and pool annotation ride on this one patch (see address-condition.ts).
      const patch = mergePatches(loadBalancerStatusPatch(previous, next), this.addressPatch(service, op === 'ensure' ? next : undefined));
      if (patch) {
        this.deps.logger.debug(2, 'Patching status for service', { service: key });
        await this.deps.patchServiceStatus(service, patch, signal);
      }
    } catch (e) {
      // Not found: the service went away right after its finalizer was removed; nothing to write.
      if (!isNotFound(e)) throw wrap('failed to update load balancer status', e);
    }
    if (this.deps.kubeVipAnnotation) await this.syncKubeVipAnnotation(service, key, next, signal);
    return op;
  }

  /**
   * The condition and pool annotation for a provider that assigns from pools: the addresses now
   * held (`status`), or none (undefined: both removed). Undefined for other providers.
   */
  private addressPatch(service: V1Service, status: V1LoadBalancerStatus | undefined): StrategicPatch | undefined {
    const balancer = this.deps.balancer;
    if (!balancer.assignedPools) return undefined;
    const state = status ? assignedState(status, balancer.assignedPools(service) ?? []) : undefined;
    return addressStatePatch(service, state, this.deps.now?.() ?? new Date());
  }

  /**
   * An ensure that failed because the service cannot be addressed: the condition says why (the
   * Warning event says it too, but expires), and the ingress says what the service still holds
   * when the load balancer says so (an address given up must leave the status: it is the
   * allocator's record). Only what changed, in one patch; a failed write is logged, and the
   * ensure's own error is what the caller sees.
   */
  private async recordAddressFailure(service: V1Service, key: string, error: unknown, signal?: AbortSignal): Promise<void> {
    if (!this.deps.balancer.assignedPools) return;
    const state = failedState(error);
    const holds = heldAfterFailure(error);
    const patch = state && mergePatches(holds && loadBalancerStatusPatch(service.status?.loadBalancer, holds), addressStatePatch(service, state, this.deps.now?.() ?? new Date()));
    if (!patch) return;
    try {
      await this.deps.patchServiceStatus(service, patch, signal);
    } catch (e) {
      if (!isNotFound(e)) this.deps.logger.error('failed to record the AddressAssigned condition', { service: key, error: errorMessage(e) });
    }
  }

  /**
   * Writes the ingress IPs to kube-vip's annotation, or removes ours once the load balancer is
   * gone. Our own write changes the annotations, so the informer's update queues the service once
   * more (needsUpdate compares annotations, as upstream): that sync ensures again and finds
   * nothing to write, so there is no loop. A user's edit of the annotation is put right the same way.
   */
  private async syncKubeVipAnnotation(service: V1Service, key: string, status: V1LoadBalancerStatus, signal?: AbortSignal): Promise<void> {
    const patch = kubeVipAnnotationPatch(service, status);
    if (!patch) return;
    this.deps.logger.debug(2, 'Patching kube-vip annotation for service', { service: key });
    try {
      await this.deps.patchService(service, patch, signal);
    } catch (e) {
      // Not found: the service went away right after its finalizer was removed; nothing to write.
      if (!isNotFound(e)) throw wrap('failed to update the kube-vip annotation', e);
    }
  }

  private async processServiceCreateOrUpdate(service: V1Service, key: string, signal?: AbortSignal): Promise<void> {
    const cached = this.serviceCache.get(key);
    if (cached && cached.metadata?.uid !== service.metadata?.uid) {
      // Deleted and re-created under the same name, which only a service without finalizer can do.
      await this.processLoadBalancerDelete(cached, key, signal);
    }
    // Cached even before success: deletion without finalizer needs the last known state.
    this.serviceCache.set(key, service);
    let op: LoadBalancerOperation;
    try {
      op = await this.syncLoadBalancerIfNeeded(service, key, signal);
    } catch (e) {
      this.deps.recorder.event(serviceSubject(service), 'Warning', SYNC_FAILED_REASON, syncFailedMessage(errorMessage(e)));
      throw e;
    }
    if (op !== 'ensure') this.serviceCache.delete(key);
  }

  private async processServiceDeletion(key: string, signal?: AbortSignal): Promise<void> {
    const cached = this.serviceCache.get(key);
    // Never synced, or its load balancer is already gone: nothing left to do.
    if (!cached) return;
    this.deps.logger.debug(2, 'Service has been deleted. Attempting to cleanup load balancer resources', { service: key });
    await this.processLoadBalancerDelete(cached, key, signal);
    this.serviceCache.delete(key);
  }

  /** Deletion without finalizer (the service is already gone from the API). */
  private async processLoadBalancerDelete(service: V1Service, key: string, signal?: AbortSignal): Promise<void> {
    if (!wantsLoadBalancer(service, this.deps.ownedClasses())) return;
    const subject = serviceSubject(service);
    this.deps.recorder.event(subject, ...event(SERVICE_EVENTS.deleting));
    try {
      await this.deps.balancer.ensureLoadBalancerDeleted(this.deps.clusterName, service, signal);
    } catch (e) {
      this.deps.recorder.event(subject, 'Warning', DELETE_FAILED_REASON, deleteFailedMessage(errorMessage(e)));
      throw e;
    }
    this.lastSyncedNodes.delete(key);
    this.deps.recorder.event(subject, ...event(SERVICE_EVENTS.deleted));
  }

  private async deleteLoadBalancer(service: V1Service, key: string, signal?: AbortSignal): Promise<void> {
    const { balancer, clusterName, recorder, logger } = this.deps;
    const subject = serviceSubject(service);
    let exists: boolean;
    try {
      exists = (await balancer.getLoadBalancer(clusterName, service, signal)).exists;
    } catch (e) {
      throw wrap('failed to check if load balancer exists before cleanup', e);
    }
    if (exists) {
      logger.debug(2, 'Deleting existing load balancer for service', { service: key });
      recorder.event(subject, ...event(SERVICE_EVENTS.deleting));
      try {
        await balancer.ensureLoadBalancerDeleted(clusterName, service, signal);
      } catch (e) {
        if (!(e instanceof ImplementedElsewhereError)) throw wrap('failed to delete load balancer', e);
        logger.debug(4, 'LoadBalancer implemented by a different controller, ignoring error on deletion', { service: key });
      }
    }
    this.lastSyncedNodes.delete(key);
    // Always remove the finalizer once the load balancer is gone, so the service can be deleted.
    await this.patchFinalizer(service, removeFinalizerPatch(service), 'remove', signal);
    recorder.event(subject, ...event(SERVICE_EVENTS.deleted));
  }

  /** Adds or removes the clean-up finalizer when `patch` says it must change (undefined: it is as it should be). */
  private async patchFinalizer(service: V1Service, patch: StrategicPatch | undefined, change: 'add' | 'remove', signal?: AbortSignal): Promise<void> {
    if (!patch) return;
    this.deps.logger.debug(2, change === 'add' ? 'Adding finalizer to service' : 'Removing finalizer from service', { service: serviceKey(service) });
    try {
      await this.deps.patchServiceStatus(service, patch, signal);
    } catch (e) {
      throw wrap(`failed to ${change} load balancer cleanup finalizer`, e);
    }
  }

  /** The provider's status, or undefined when the provider says the load balancer is handled elsewhere. */
  private async ensureLoadBalancer(service: V1Service, key: string, signal?: AbortSignal): Promise<V1LoadBalancerStatus | undefined> {
    const { balancer, clusterName, recorder, logger } = this.deps;
    const subject = serviceSubject(service);
    // Before anything is written: this process is not the one that decides (a SyncLoadBalancerFailed event says why).
    const blocked = this.deps.ensureBlocked?.();
    if (blocked) throw new RetryAfterError(ENSURE_BLOCKED_RETRY_SECONDS, blocked);
    logger.debug(2, 'Ensuring load balancer for service', { service: key });
    recorder.event(subject, ...event(SERVICE_EVENTS.ensuring));
    // Always add the finalizer before creating anything, so the service cannot be deleted before its load balancer.
    await this.patchFinalizer(service, addFinalizerPatch(service), 'add', signal);
    let status: V1LoadBalancerStatus | undefined;
    try {
      const nodes = this.nodesFor(service);
      if (nodes.length === 0) recorder.event(subject, ...event(SERVICE_EVENTS.noNodes));
      this.lastSyncedNodes.set(key, nodes);
      // Providers reject protocols they do not support here, as an error.
      status = await balancer.ensureLoadBalancer(clusterName, service, nodes, signal);
    } catch (e) {
      if (e instanceof ImplementedElsewhereError) {
        logger.debug(4, 'LoadBalancer implemented by a different controller, ignoring', { service: key });
        return undefined;
      }
      throw wrap('failed to ensure load balancer', e);
    }
    if (!status) throw new Error('service status returned by ensureLoadBalancer is missing');
    recorder.event(subject, ...event(SERVICE_EVENTS.ensured));
    return status;
  }

  /** Returns true when the service should be retried. */
  private async nodeSyncService(service: V1Service, signal?: AbortSignal): Promise<boolean> {
    if (!wantsLoadBalancer(service, this.deps.ownedClasses())) return false;
    const key = serviceKey(service);
    let newNodes: V1Node[];
    try {
      newNodes = this.nodesFor(service);
    } catch (e) {
      this.deps.logger.error('failed to retrieve node list', { service: key, error: errorMessage(e) });
      this.deps.metrics.nodeSyncErrors.inc();
      return true;
    }
    const oldNodes = (this.lastSyncedNodes.get(key) ?? []).filter(nodeEligibleForLoadBalancer);
    // Stored before the update, successful or not: a failure is retried by a full service sync,
    // and storing now keeps this node sync and that service sync from both updating the hosts.
    this.lastSyncedNodes.set(key, newNodes);
    const addressesMatter = this.deps.balancer.followsNodeAddresses && !nodeAddressesEqual(oldNodes, newNodes);
    if (nodesSufficientlyEqual(oldNodes, newNodes) && !addressesMatter) return false;
    try {
      await this.updateHosts(service, newNodes, signal);
    } catch (e) {
      this.deps.logger.error('failed to update load balancer hosts', { service: key, error: errorMessage(e) });
      this.deps.metrics.nodeSyncErrors.inc();
      return true;
    }
    return false;
  }

  private async updateHosts(service: V1Service, hosts: V1Node[], signal?: AbortSignal): Promise<void> {
    const { balancer, clusterName, recorder, logger, metrics } = this.deps;
    const subject = serviceSubject(service);
    const key = serviceKey(service);
    const started = performance.now();
    metrics.loadBalancerSyncs.inc();
    try {
      logger.debug(2, 'Updating backends for load balancer', { service: key, nodes: hosts.length, names: loggableNodeNames(hosts) });
      try {
        await balancer.updateLoadBalancer(clusterName, service, hosts, signal);
      } catch (e) {
        if (e instanceof ImplementedElsewhereError) return;
        // Only an error if the load balancer still exists.
        try {
          if (!(await balancer.getLoadBalancer(clusterName, service, signal)).exists) return;
        } catch (getError) {
          logger.error('failed to check if load balancer exists', { service: key, error: errorMessage(getError) });
        }
        recorder.event(subject, 'Warning', UPDATE_FAILED_REASON, updateFailedMessage(hosts, errorMessage(e)));
        throw e;
      }
      recorder.event(subject, ...event(hosts.length === 0 ? SERVICE_EVENTS.noNodes : SERVICE_EVENTS.updated));
    } finally {
      metrics.updateLoadBalancerHostLatency.observe((performance.now() - started) / 1000);
    }
  }
}

function event(e: { type: 'Normal' | 'Warning'; reason: string; message: string }): ['Normal' | 'Warning', string, string] {
  return [e.type, e.reason, e.message];
}
