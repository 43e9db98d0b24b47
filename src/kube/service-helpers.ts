import { parseGoBool } from '../util/strconv.ts';
import type { V1LoadBalancerIngress, V1LoadBalancerStatus, V1Node, V1Service, V1ServicePort } from '@kubernetes/client-node';

/**
 * Decisions about Services and the nodes behind their load balancers, shared by every controller
 * that needs them (upstream: cloud-provider's service/helpers and the predicates of
 * controllers/service). Pure functions over plain JSON objects.
 */

/** Keeps a Service until its load balancer is gone (upstream LoadBalancerCleanupFinalizer). */
export const LB_CLEANUP_FINALIZER = 'service.kubernetes.io/load-balancer-cleanup';
/** A node carrying this label (unless it parses as false) is kept out of load balancers. */
export const EXCLUDE_FROM_LB_LABEL = 'node.kubernetes.io/exclude-from-external-load-balancers';
/** The Cluster Autoscaler's taint on a node it is about to delete. */
export const TO_BE_DELETED_TAINT = 'ToBeDeletedByClusterAutoscaler';

// ---- Services ----

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

/** A class set to something this provider does not own: another controller's service, never touched. */
export function hasForeignLoadBalancerClass(service: V1Service, ownedClasses: readonly string[] = []): boolean {
  const cls = service.spec?.loadBalancerClass;
  return cls !== undefined && cls !== null && !ownedClasses.includes(cls);
}

/** The finalizer is present and the service is being deleted or no longer wants a load balancer. */
export function needsCleanup(service: V1Service, ownedClasses: readonly string[] = []): boolean {
  if (!hasLBFinalizer(service)) return false;
  return !!service.metadata?.deletionTimestamp || !wantsLoadBalancer(service, ownedClasses);
}

/** Whether an update changed anything the load balancer depends on (upstream needsUpdate). */
export function needsUpdate(oldService: V1Service, newService: V1Service, ownedClasses: readonly string[] = []): boolean {
  const oldWants = wantsLoadBalancer(oldService, ownedClasses);
  const newWants = wantsLoadBalancer(newService, ownedClasses);
  if (!oldWants && !newWants) return false;
  if (oldWants !== newWants) return true;
  const o = oldService.spec ?? {};
  const n = newService.spec ?? {};
  if (!semanticEqual(o.loadBalancerSourceRanges, n.loadBalancerSourceRanges)) return true;
  if (!portsEqualForLB(o.ports ?? [], n.ports ?? [])) return true;
  if ((o.sessionAffinity ?? '') !== (n.sessionAffinity ?? '')) return true;
  if (!semanticEqual(o.sessionAffinityConfig, n.sessionAffinityConfig)) return true;
  if ((o.loadBalancerIP ?? '') !== (n.loadBalancerIP ?? '')) return true;
  if (!semanticEqual(o.externalIPs, n.externalIPs)) return true;
  if (!semanticEqual(oldService.metadata?.annotations, newService.metadata?.annotations)) return true;
  if ((oldService.metadata?.uid ?? '') !== (newService.metadata?.uid ?? '')) return true;
  if ((o.externalTrafficPolicy ?? '') !== (n.externalTrafficPolicy ?? '')) return true;
  if ((o.healthCheckNodePort ?? 0) !== (n.healthCheckNodePort ?? 0)) return true;
  // Families can be added or removed but never swapped, so only the count matters.
  return (o.ipFamilies?.length ?? 0) !== (n.ipFamilies?.length ?? 0);
}

/** Ports compared in order on what a load balancer can expose. */
export function portsEqualForLB(x: readonly V1ServicePort[], y: readonly V1ServicePort[]): boolean {
  if (x.length !== y.length) return false;
  return x.every((a, i) => {
    const b = y[i]!;
    return (a.name ?? '') === (b.name ?? '') &&
      (a.protocol ?? '') === (b.protocol ?? '') &&
      a.port === b.port &&
      (a.nodePort ?? 0) === (b.nodePort ?? 0) &&
      // IntOrString: 8080 and "8080" differ, as upstream compares type and value.
      (a.targetPort ?? 0) === (b.targetPort ?? 0) &&
      (a.appProtocol ?? undefined) === (b.appProtocol ?? undefined);
  });
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

// ---- Nodes behind load balancers ----

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

/**
 * Whether a node update should trigger a sync of every load balancer: its exclusion changed or
 * its providerID did. Deletion marks and taints are picked up by the sync itself.
 */
export function shouldSyncUpdatedNode(oldNode: V1Node, newNode: V1Node): boolean {
  if (nodeIncludedInLoadBalancers(oldNode) !== nodeIncludedInLoadBalancers(newNode)) return true;
  return (oldNode.spec?.providerID ?? '') !== (newNode.spec?.providerID ?? '');
}

/** Same node names with the same providerIDs: no need to update a load balancer's hosts. */
export function nodesSufficientlyEqual(oldNodes: readonly V1Node[], newNodes: readonly V1Node[]): boolean {
  if (oldNodes.length !== newNodes.length) return false;
  const distill = (nodes: readonly V1Node[]) => new Map(nodes.map((n) => [n.metadata?.name ?? '', n.spec?.providerID ?? '']));
  const o = distill(oldNodes);
  const n = distill(newNodes);
  if (o.size !== n.size) return false;
  for (const [name, providerID] of o) if (n.get(name) !== providerID) return false;
  return true;
}
