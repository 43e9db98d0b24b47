import type { V1LoadBalancerStatus, V1Service } from '@kubernetes/client-node';
import { LB_CLEANUP_FINALIZER, hasLBFinalizer, loadBalancerStatusEqual } from '../../kube/service-helpers.ts';

/**
 * The bodies of the controller's three writes, all strategic merge patches on services/NAME/status
 * (upstream PatchService). Why strategic: `metadata.finalizers` has patch strategy "merge", so a
 * patch adds or deletes our one finalizer without replacing the list, and finalizers that other
 * controllers added since our informer's snapshot survive (a JSON merge patch would overwrite the
 * whole list). Why the status subresource: the controller may change status and metadata but
 * never the user's spec, and the status endpoint ignores spec. No resourceVersion, as upstream:
 * each patch says only what we change, so concurrent writers do not conflict.
 *
 * Upstream derives the same patches by diffing the old and new objects; we write the directive
 * forms directly. One deliberate difference: when ours is the last finalizer, upstream's diff
 * sends `finalizers: null`, which would also drop a finalizer added meanwhile; we always send
 * `$deleteFromPrimitiveList`, which removes ours only.
 *
 * Each function returns undefined when there is nothing to write.
 */

export type StrategicPatch = Record<string, unknown>;

export function addFinalizerPatch(service: V1Service): StrategicPatch | undefined {
  if (hasLBFinalizer(service)) return undefined;
  return { metadata: { finalizers: [LB_CLEANUP_FINALIZER] } };
}

export function removeFinalizerPatch(service: V1Service): StrategicPatch | undefined {
  if (!hasLBFinalizer(service)) return undefined;
  return { metadata: { [`$deleteFromPrimitiveList/finalizers`]: [LB_CLEANUP_FINALIZER] } };
}

/**
 * Writes the new ingress list whole (the list is atomic: no merge key), or deletes it with null
 * when the load balancer is gone. Nothing when the ingress points did not change.
 */
export function loadBalancerStatusPatch(previous: V1LoadBalancerStatus | undefined, next: V1LoadBalancerStatus): StrategicPatch | undefined {
  if (loadBalancerStatusEqual(previous, next)) return undefined;
  const ingress = next.ingress?.length ? next.ingress : null;
  return { status: { loadBalancer: { ingress } } };
}
