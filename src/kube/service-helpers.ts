import { parseGoBool } from '../util/strconv.ts';
import type { V1LoadBalancerIngress, V1LoadBalancerStatus, V1Node, V1Service } from '@kubernetes/client-node';

/**
 * What upstream shares about Services in cloud-provider's service/helpers: the clean-up
 * finalizer, status equality, which services want a load balancer from this provider (the
 * service controller and a provider rebuilding its addresses both ask), and which nodes may back
 * one (the service controller and the announcers). The service controller's own predicates are
 * src/controllers/service/predicates.ts. Pure functions over plain JSON objects.
 */

/** Keeps a Service until its load balancer is gone (upstream LoadBalancerCleanupFinalizer). */
export const LB_CLEANUP_FINALIZER = 'service.kubernetes.io/load-balancer-cleanup';
/** A node carrying this label (unless it parses as false) is kept out of load balancers. */
export const EXCLUDE_FROM_LB_LABEL = 'node.kubernetes.io/exclude-from-external-load-balancers';
/** The Cluster Autoscaler's taint on a node it is about to delete. */
export const TO_BE_DELETED_TAINT = 'ToBeDeletedByClusterAutoscaler';

/** namespace/name: the one key of a service (work queue, allocator, logs). */
export function serviceKey(service: V1Service): string {
  return `${service.metadata?.namespace ?? ''}/${service.metadata?.name ?? ''}`;
}

/** The addresses kube-vip announces for a service, comma separated (written with --kube-vip-annotation). */
export const KUBE_VIP_ANNOTATION = 'kube-vip.io/loadbalancerIPs';
/** Marks a kube-vip annotation as written by edge-ccm: only ours is ever removed, and it is no user's address request. */
export const KUBE_VIP_OWNED_ANNOTATION = 'edge-ccm.io/kube-vip-annotation';

export function hasLBFinalizer(service: V1Service): boolean {
  return service.metadata?.finalizers?.includes(LB_CLEANUP_FINALIZER) ?? false;
}

/**
 * Whether the service wants a load balancer from this provider: type LoadBalancer and no
 * loadBalancerClass, or (beyond upstream) a class the provider owns.
 */
export function wantsLoadBalancer(service: V1Service, ownedClasses: readonly string[] = []): boolean {
  if (service.spec?.type !== 'LoadBalancer') return false;
  const cls = service.spec.loadBalancerClass;
  return cls === undefined || cls === null || ownedClasses.includes(cls);
}

/**
 * Upstream LoadBalancerStatusEqual: only the ingress points count. Beyond upstream, an IP
 * ingress without ipMode equals one with "VIP": the API server fills that default in, so a
 * provider that leaves ipMode out would otherwise get its unchanged status rewritten every sync.
 */
export function loadBalancerStatusEqual(a: V1LoadBalancerStatus | undefined, b: V1LoadBalancerStatus | undefined): boolean {
  return semanticEqual(a?.ingress?.map(withDefaultIPMode), b?.ingress?.map(withDefaultIPMode));
}

function withDefaultIPMode(ingress: V1LoadBalancerIngress): V1LoadBalancerIngress {
  return ingress.ip && !ingress.ipMode ? { ...ingress, ipMode: 'VIP' } : ingress;
}

/**
 * Deep equality for API objects as Go's semantic equality sees them after a JSON round trip:
 * a missing field, null, an empty list and an empty map are all "unset".
 */
export function semanticEqual(a: unknown, b: unknown): boolean {
  const ea = isUnset(a);
  const eb = isUnset(b);
  if (ea || eb) return ea && eb;
  if (Array.isArray(a) || Array.isArray(b)) {
    if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false;
    return a.every((v, i) => semanticEqual(v, b[i]));
  }
  if (typeof a === 'object' && typeof b === 'object') {
    const ao = a as Record<string, unknown>;
    const bo = b as Record<string, unknown>;
    const keys = new Set([...Object.keys(ao), ...Object.keys(bo)]);
    for (const k of keys) if (!semanticEqual(ao[k], bo[k])) return false;
    return true;
  }
  return a === b;
}

function isUnset(v: unknown): boolean {
  if (v === undefined || v === null) return true;
  if (Array.isArray(v)) return v.length === 0;
  if (typeof v === 'object') return Object.values(v).every((x) => x === undefined);
  return false;
}

// ---- Nodes behind load balancers (the service controller and the announcers ask) ----

/** Not labelled for exclusion: the label is absent or parses as false (any other value excludes, even ""). */
export function nodeIncludedInLoadBalancers(node: V1Node): boolean {
  const value = node.metadata?.labels?.[EXCLUDE_FROM_LB_LABEL];
  if (value === undefined) return true;
  return parseGoBool(value) === false;
}

export function nodeNotDeleted(node: V1Node): boolean {
  return !node.metadata?.deletionTimestamp;
}

/** Not tainted for deletion by the Cluster Autoscaler (other taints do not matter). */
export function nodeNotTaintedForDeletion(node: V1Node): boolean {
  return !(node.spec?.taints ?? []).some((t) => t.key === TO_BE_DELETED_TAINT);
}

/**
 * Whether a node may back a load balancer (upstream stableNodeSetPredicates). Readiness is
 * deliberately not a criterion: a flapping node must not churn every load balancer.
 */
export function nodeEligibleForLoadBalancer(node: V1Node): boolean {
  return nodeNotDeleted(node) && nodeIncludedInLoadBalancers(node) && nodeNotTaintedForDeletion(node);
}
