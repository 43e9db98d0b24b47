import type { V1Service } from '@kubernetes/client-node';
import type { BgpClusterView } from '../../cloud/types.ts';
import { serviceKey, wantsLoadBalancer } from '../../kube/service-helpers.ts';
import type { Announcement } from '../../net/bgp/speaker.ts';
import { formatIP, parseIP, type IP } from '../../net/ip.ts';
import type { LoadBalancerConfig, PoolConfig } from '../../lb/config-model.ts';
import { rangesContain } from '../../lb/ranges.ts';
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

export function podCIDRAnnouncements(routes: readonly AnnouncedRoute[], bgp: BgpConfig): Announcement[] {
  if (!bgp.podCIDRs.announce) return [];
  return routes.map((r) => ({ prefix: r.route.destinationCIDR, nextHops: [r.nextHop], ...attributes(bgp.podCIDRs) }));
}

export function loadBalancerAnnouncements(view: BgpClusterView, lb: LoadBalancerConfig, bgp: BgpConfig): Announcement[] {
  const pools = lb.pools.filter((p) => p.announce === 'bgp');
  if (pools.length === 0) return [];
  // Each pool's eligible nodes (its nodeSelector) and their next hops per family, once for the whole table.
  const hopsOf = new Map<PoolConfig, Record<4 | 6, Map<string, string>>>();
  for (const pool of pools) {
    const hops = { 4: new Map<string, string>(), 6: new Map<string, string>() };
    for (const node of view.eligibleNodes) {
      if (pool.nodeSelector && !pool.nodeSelector(node.metadata?.labels ?? {})) continue;
      for (const family of [4, 6] as const) {
        const hop = nodeNextHop(node.status?.addresses, family);
        if (hop) hops[family].set(node.metadata?.name ?? '', hop);
      }
    }
    hopsOf.set(pool, hops);
  }
  const byAddress = new Map<string, { ip: IP; pool: PoolConfig; nextHops: Set<string> }>();
  for (const service of view.services) {
    if (!announcedService(service, lb.classes)) continue;
    const local = service.spec?.externalTrafficPolicy === 'Local';
    const endpoints = local ? view.readyEndpointNodes.get(serviceKey(service)) ?? new Set<string>() : undefined;
    for (const ingress of service.status?.loadBalancer?.ingress ?? []) {
      const address = canonicalAddress(ingress.ip ?? '');
      if (!address) continue;
      const { ip, text: key } = address;
      const pool = pools.find((p) => rangesContain(p.ranges, ip));
      if (!pool) continue; // another pool's mode, or an address edge-ccm did not hand out
      const entry = byAddress.get(key) ?? { ip, pool, nextHops: new Set<string>() };
      byAddress.set(key, entry);
      for (const [node, hop] of hopsOf.get(pool)![ip.family]) if (!endpoints || endpoints.has(node)) entry.nextHops.add(hop);
    }
  }
  const out: Announcement[] = [];
  for (const [address, { ip, pool, nextHops }] of byAddress) {
    if (nextHops.size === 0) continue;
    out.push({ prefix: `${address}/${ip.family === 4 ? 32 : 128}`, nextHops: [...nextHops].sort(), ...attributes(bgp.pools.get(pool.name)) });
  }
  return out;
}

/**
 * An ingress address parsed and in canonical text, remembered: the table is recomputed at every
 * change of the cluster, and parsing was most of its cost (10,000 addresses: 150 ms each time).
 */
const addresses = new Map<string, { ip: IP; text: string } | null>();
const ADDRESS_CACHE_LIMIT = 100_000;
function canonicalAddress(text: string): { ip: IP; text: string } | undefined {
  let known = addresses.get(text);
  if (known === undefined) {
    if (addresses.size >= ADDRESS_CACHE_LIMIT) addresses.clear();
    const ip = parseIP(text);
    known = ip ? { ip, text: formatIP(ip) } : null;
    addresses.set(text, known);
  }
  return known ?? undefined;
}

/** Pod CIDRs first; a load-balancer host route equal to one (a misconfiguration) is left out. */
export function mergeAnnouncements(podCIDRs: readonly Announcement[], loadBalancers: readonly Announcement[]): { table: Announcement[]; clashes: string[] } {
  const seen = new Set(podCIDRs.map((a) => a.prefix));
  const clashes = loadBalancers.filter((a) => seen.has(a.prefix)).map((a) => a.prefix);
  return { table: [...podCIDRs, ...loadBalancers.filter((a) => !seen.has(a.prefix))], clashes };
}

/** A LoadBalancer service of ours that is not being deleted. */
function announcedService(service: V1Service, classes: readonly string[]): boolean {
  return wantsLoadBalancer(service, classes) && !service.metadata?.deletionTimestamp;
}

function attributes(a: BgpAttributes | undefined): Pick<Announcement, 'communities' | 'localPref'> {
  if (!a) return {};
  return { ...(a.communities.length ? { communities: [...a.communities] } : {}), ...(a.localPref !== undefined ? { localPref: a.localPref } : {}) };
}

