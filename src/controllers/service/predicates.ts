import type { V1Node, V1Service, V1ServicePort } from '@kubernetes/client-node';
import { hasLBFinalizer, nodeIncludedInLoadBalancers, semanticEqual, wantsLoadBalancer } from '../../kube/service-helpers.ts';

/**
 * The service controller's own predicates, as upstream keeps them in controllers/service: which
 * updates matter to a load balancer and which services need a clean-up. Which nodes may back a
 * load balancer is shared (the announcers ask too): src/kube/service-helpers.ts. Pure functions
 * over plain JSON objects.
 */

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
 * Whether a node update should trigger a sync of every load balancer: its exclusion changed or
 * its providerID did. Deletion marks and taints are picked up by the sync itself.
 */
export function shouldSyncUpdatedNode(oldNode: V1Node, newNode: V1Node): boolean {
  if (nodeIncludedInLoadBalancers(oldNode) !== nodeIncludedInLoadBalancers(newNode)) return true;
  return (oldNode.spec?.providerID ?? '') !== (newNode.spec?.providerID ?? '');
}

/** Whether a node's InternalIP/ExternalIP addresses changed (for load balancers that follow them). */
export function nodeAddressesChanged(oldNode: V1Node, newNode: V1Node): boolean {
  return addressKey(oldNode) !== addressKey(newNode);
}

/** The same nodes with the same addresses (the nodes are compared by nodesSufficientlyEqual first). */
export function nodeAddressesEqual(oldNodes: readonly V1Node[], newNodes: readonly V1Node[]): boolean {
  const o = new Map(oldNodes.map((n) => [n.metadata?.name ?? '', addressKey(n)]));
  return newNodes.every((n) => o.get(n.metadata?.name ?? '') === addressKey(n));
}

function addressKey(node: V1Node): string {
  return (node.status?.addresses ?? []).filter((a) => a.type === 'InternalIP' || a.type === 'ExternalIP').map((a) => `${a.type}=${a.address}`).sort().join(',');
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
