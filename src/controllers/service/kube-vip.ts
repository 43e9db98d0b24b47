import type { V1LoadBalancerStatus, V1Service } from '@kubernetes/client-node';
import { KUBE_VIP_ANNOTATION, KUBE_VIP_OWNED_ANNOTATION } from '../../kube/service-helpers.ts';
import { ipFamilyOf } from '../../net/ip.ts';

/**
 * --kube-vip-annotation: the addresses a load balancer was given, also written where kube-vip
 * looks for the addresses to announce (by ARP or BGP), so edge-ccm assigns and an existing
 * kube-vip advertises.
 *
 * Only annotations edge-ccm wrote are ever changed or removed: a second annotation marks them
 * ours, so a kube-vip annotation a user set on a service edge-ccm does not load-balance is never
 * touched. On a service edge-ccm does load-balance, the assigned addresses win over whatever the
 * annotation said (kube-vip would otherwise announce addresses the status does not report).
 */

/**
 * The field manager of these writes, apart from edge-ccm's own: the admission policy in
 * deploy/kubernetes/rbac-kube-vip.yaml lets edge-ccm write a Service only under this name and
 * only these two annotations, and managedFields show plainly which annotation writes were ours.
 */
export const KUBE_VIP_FIELD_MANAGER = 'edge-ccm-kube-vip';

/** A JSON merge patch body (RFC 7386): null deletes a key. */
export type MergePatch = Record<string, unknown>;

/**
 * The ingress IPs as kube-vip reads them: IPv4 first, then IPv6, each family in status order,
 * without duplicates, comma separated. Hostname-only ingress points have nothing to announce.
 */
export function kubeVipAddresses(status: V1LoadBalancerStatus | undefined): string {
  const ips = [...new Set((status?.ingress ?? []).map((i) => i.ip).filter((ip): ip is string => !!ip))];
  const family = (ip: string) => ipFamilyOf(ip) ?? 6;
  // Array.prototype.sort is stable: the order within a family is kept.
  return ips.sort((a, b) => family(a) - family(b)).join(',');
}

/**
 * What to write so the service's annotations match the load balancer's status (`{}` once it is
 * deleted): the addresses and our mark, or, when there is nothing to announce, the removal of an
 * annotation only if it is ours. Undefined when the annotations already say so.
 */
export function kubeVipAnnotationPatch(service: V1Service, status: V1LoadBalancerStatus): MergePatch | undefined {
  const annotations = service.metadata?.annotations ?? {};
  const ours = annotations[KUBE_VIP_OWNED_ANNOTATION] === 'true';
  const addresses = kubeVipAddresses(status);
  let change: Record<string, string | null>;
  if (addresses) {
    if (ours && annotations[KUBE_VIP_ANNOTATION] === addresses) return undefined;
    change = { [KUBE_VIP_ANNOTATION]: addresses, [KUBE_VIP_OWNED_ANNOTATION]: 'true' };
  } else {
    if (!ours) return undefined;
    change = { [KUBE_VIP_ANNOTATION]: null, [KUBE_VIP_OWNED_ANNOTATION]: null };
  }
  return { metadata: { annotations: change } };
}
