import type { V1Node, V1Taint } from '@kubernetes/client-node';
import { TAINT_NODE_SHUTDOWN } from '../../kube/node-helpers.ts';

/** The annotations and taints this controller reads and writes; all of ours live under node.edge-ccm.io/. */

/** `"true"` on a Node: never delete or quarantine it, whatever the provider says. */
export const ANNOTATION_PROTECT_FROM_DELETION = 'node.edge-ccm.io/protect-from-deletion';
/** `"true"` on a Node: an operator confirms it is really gone, so the deletion breaker lets it through. */
export const ANNOTATION_ACKNOWLEDGE_DELETION = 'node.edge-ccm.io/acknowledge-deletion';
/** Quarantine taint of deletion policy `taint`: the machine is gone but the Node object is kept. */
export const TAINT_INSTANCE_NOT_FOUND = 'node.edge-ccm.io/instance-not-found';

/** Upstream's ShutdownTaint. */
export const SHUTDOWN_TAINT: Readonly<V1Taint> = Object.freeze({ key: TAINT_NODE_SHUTDOWN, effect: 'NoSchedule' });
export const QUARANTINE_TAINT: Readonly<V1Taint> = Object.freeze({ key: TAINT_INSTANCE_NOT_FOUND, effect: 'NoSchedule' });

export function annotationIsTrue(node: V1Node, key: string): boolean {
  return node.metadata?.annotations?.[key]?.trim().toLowerCase() === 'true';
}

export const isProtected = (node: V1Node): boolean => annotationIsTrue(node, ANNOTATION_PROTECT_FROM_DELETION);
export const isDeletionAcknowledged = (node: V1Node): boolean => annotationIsTrue(node, ANNOTATION_ACKNOWLEDGE_DELETION);
