import type { V1Node, V1Service } from '@kubernetes/client-node';
import type { EventSubject } from '../../kube/event-recorder.ts';

/** Upstream's event reasons and messages, which operators' alerts and runbooks match on. */
export const SERVICE_EVENTS = {
  ensuring: { type: 'Normal', reason: 'EnsuringLoadBalancer', message: 'Ensuring load balancer' },
  ensured: { type: 'Normal', reason: 'EnsuredLoadBalancer', message: 'Ensured load balancer' },
  noNodes: { type: 'Warning', reason: 'UnAvailableLoadBalancer', message: 'There are no available nodes for LoadBalancer' },
  deleting: { type: 'Normal', reason: 'DeletingLoadBalancer', message: 'Deleting load balancer' },
  deleted: { type: 'Normal', reason: 'DeletedLoadBalancer', message: 'Deleted load balancer' },
  updated: { type: 'Normal', reason: 'UpdatedLoadBalancer', message: 'Updated load balancer with new hosts' },
} as const;

export const SYNC_FAILED_REASON = 'SyncLoadBalancerFailed';
export const UPDATE_FAILED_REASON = 'UpdateLoadBalancerFailed';
export const DELETE_FAILED_REASON = 'DeleteLoadBalancerFailed';

export const syncFailedMessage = (error: string): string => `Error syncing load balancer: ${error}`;
export const deleteFailedMessage = (error: string): string => `Error deleting load balancer: ${error}`;

/** Upstream's message, node names printed as Go prints a []string. */
export function updateFailedMessage(hosts: readonly V1Node[], error: string): string {
  return `Error updating load balancer with new hosts [${loggableNodeNames(hosts).join(' ')}] ` +
    `[node names limited, total number of nodes: ${hosts.length}], error: ${error}`;
}

const MAX_NODE_NAMES = 20;

/** The names of the first 20 nodes, sorted, then "<N more>" for the rest (upstream loggableNodeNames). */
export function loggableNodeNames(nodes: readonly V1Node[]): string[] {
  const names = [...new Set(nodes.slice(0, MAX_NODE_NAMES).map((n) => n.metadata?.name ?? ''))].sort();
  if (nodes.length > MAX_NODE_NAMES) names.push(`<${nodes.length - MAX_NODE_NAMES} more>`);
  return names;
}

/** Informer list items carry no kind; events need it to name the object. */
export function serviceSubject(service: V1Service): EventSubject {
  return { apiVersion: 'v1', kind: 'Service', metadata: service.metadata };
}
