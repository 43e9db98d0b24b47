import type { V1Node } from '@kubernetes/client-node';
import { stripManagedFields } from './informer/index.ts';

/**
 * The fields of a Node no controller or provider here reads, dropped as the shared informer
 * stores each node: a kubelet's status lists every image on the machine (often tens of KiB per
 * node), the volumes, the capacity and the daemon endpoints; metadata.managedFields is dropped too.
 * What stays is what is read: metadata (names, labels, annotations, uid, resourceVersion,
 * deletionTimestamp), spec (providerID, taints, podCIDR(s), unschedulable), status.addresses,
 * status.conditions (Ready) and status.nodeInfo (Proxmox matches by systemUUID).
 * src/kube/node-fields.test.ts fails when source code reads a dropped field.
 */
export const DROPPED_NODE_STATUS_FIELDS = [
  'images', 'volumesAttached', 'volumesInUse', 'daemonEndpoints', 'config', 'capacity', 'allocatable', 'runtimeHandlers', 'features',
] as const;

export function stripUnreadNodeFields(node: V1Node): V1Node {
  stripManagedFields(node);
  const status = node.status as Record<string, unknown> | undefined;
  if (status) for (const field of DROPPED_NODE_STATUS_FIELDS) delete status[field];
  return node;
}
