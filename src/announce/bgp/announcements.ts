import type { V1Node, V1Service } from '@kubernetes/client-node';
import type { BgpClusterView } from '../../cloud/types.ts';
import { isNodeReady } from '../../kube/node-helpers.ts';
import { nodeEligibleForLoadBalancer } from '../../kube/service-helpers.ts';
import type { Announcement } from '../../net/bgp/speaker.ts';
import type { LoadBalancerConfig } from '../../lb/config-model.ts';
import { announcedAddresses } from '../addresses.ts';
import type { BgpAttributes, BgpConfig } from './config-model.ts';
import { nodeNextHop } from './next-hop.ts';
import type { AnnouncedRoute } from './route-table.ts';

/**
 * What the speaker announces, computed from the cluster as the app's informers see it: pure,
 * no I/O, so the rules are tested directly.
 *
 * - Pod CIDRs: the route controller's routes (BgpRouteTable), each with its node as next hop.
 * - Load-balancer addresses: every address in a Service's status.loadBalancer.ingress that lies
 *   in an `announce: bgp` pool, as a host route (/32, /128) whose next hops are the eligible
 *   nodes (the service controller's eligibility: view.eligibleNodes, narrowed by the pool's
 *   nodeSelector); for
 *   externalTrafficPolicy: Local only those with a ready endpoint of the service. An address
 *   shared by several services gets the union of their next hops. No next hop: not announced.
 */

/**
 * The leader's next-hop candidates (announceFrom: leader): the eligible nodes whose Ready
 * condition is True. Upstream's service controller ignores readiness because a cloud load
 * balancer health-checks its backends; a BGP route has no such check, so a dead node would keep
 * its share of the traffic for as long as its Node exists. Ready turns Unknown once the kubelet
 * has been silent for kube-controller-manager's --node-monitor-grace-period (50 s by default), or
 * False when the kubelet itself says so: from then on the node is no next hop. When no eligible
 * node is Ready (the control plane cut off from every kubelet, not every node dead), the
 * eligible nodes are kept as they are: withdrawing every address would turn a control-plane
 * outage into a data-plane one.
 */
export function leaderNextHopCandidates(eligible: readonly V1Node[]): { nodes: readonly V1Node[]; noneReady: boolean } {
  const ready = eligible.filter(isNodeReady);
  if (ready.length > 0 || eligible.length === 0) return { nodes: ready, noneReady: false };
  return { nodes: eligible, noneReady: true };
}

export function podCIDRAnnouncements(routes: readonly AnnouncedRoute[], bgp: BgpConfig): Announcement[] {
  if (!bgp.podCIDRs.announce) return [];
  return routes.map((r) => ({ prefix: r.route.destinationCIDR, nextHops: [r.nextHop], ...attributes(bgp.podCIDRs) }));
}

export function loadBalancerAnnouncements(view: BgpClusterView, lb: LoadBalancerConfig, bgp: BgpConfig): Announcement[] {
  const addresses = announcedAddresses({ protocol: 'bgp', pools: lb.pools, classes: lb.classes, services: view.services, candidates: view.eligibleNodes, readyEndpointNodes: view.readyEndpointNodes });
  if (addresses.length === 0) return [];
  // Each eligible node's next hop per family, once for the whole table.
  const hops = { 4: new Map<string, string>(), 6: new Map<string, string>() };
  for (const node of view.eligibleNodes) {
    for (const family of [4, 6] as const) {
      const hop = nodeNextHop(node.status?.addresses, family);
      if (hop) hops[family].set(node.metadata?.name ?? '', hop);
    }
  }
  const out: Announcement[] = [];
  for (const { address, ip, pool, nodes } of addresses) {
    const nextHops = [...new Set(nodes.map((n) => hops[ip.family].get(n)).filter((h): h is string => !!h))];
    if (nextHops.length === 0) continue;
    out.push({ prefix: `${address}/${ip.family === 4 ? 32 : 128}`, nextHops: nextHops.sort(), ...attributes(bgp.pools.get(pool.name)) });
  }
  return out;
}

/**
 * What one node announces over its own sessions (loadBalancers.announceFrom: nodes): every
 * address it may serve, as a host route with itself as the only next hop. The same rules as the
 * leader's table with the node as the only candidate, when it is eligible (not being deleted,
 * not excluded by label, not tainted ToBeDeletedByClusterAutoscaler): a node being drained
 * announces nothing, so its paths go before its workloads stop. For externalTrafficPolicy:
 * Local only with a ready endpoint of the service on this node. Readiness is not asked (as
 * upstream's service controller does not): a dead node leaves with its BFD session instead.
 */
export function nodeLoadBalancerAnnouncements(
  node: V1Node | undefined,
  cluster: { services: readonly V1Service[]; readyEndpointNodes: ReadonlyMap<string, ReadonlySet<string>> },
  lb: LoadBalancerConfig,
  bgp: BgpConfig,
): Announcement[] {
  if (!node || !nodeEligibleForLoadBalancer(node)) return [];
  return loadBalancerAnnouncements({ ...cluster, eligibleNodes: [node] }, lb, bgp);
}

/** Pod CIDRs first; a load-balancer host route equal to one (a misconfiguration) is left out. */
export function mergeAnnouncements(podCIDRs: readonly Announcement[], loadBalancers: readonly Announcement[]): { table: Announcement[]; clashes: string[] } {
  const seen = new Set(podCIDRs.map((a) => a.prefix));
  const clashes = loadBalancers.filter((a) => seen.has(a.prefix)).map((a) => a.prefix);
  return { table: [...podCIDRs, ...loadBalancers.filter((a) => !seen.has(a.prefix))], clashes };
}

function attributes(a: BgpAttributes | undefined): Pick<Announcement, 'communities' | 'localPref'> {
  if (!a) return {};
  return { ...(a.communities.length ? { communities: [...a.communities] } : {}), ...(a.localPref !== undefined ? { localPref: a.localPref } : {}) };
}

