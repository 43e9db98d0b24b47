import type { V1Node, V1Service } from '@kubernetes/client-node';
import type { PoolConfig } from '../lb/config-model.ts';
import { rangesContain } from '../lb/ranges.ts';
import { nodeName } from '../kube/node-helpers.ts';
import { serviceKey, wantsLoadBalancer } from '../kube/service-helpers.ts';
import { formatIP, parseIP, type IP } from '../net/ip.ts';
import { compareCodeUnits } from '../util/compare.ts';

/**
 * Which load-balancer address is announced, from which nodes, by which protocol: the one loop
 * the BGP announcer (src/announce/bgp) and the L2 speakers (src/announce/l2) share, as MetalLB's
 * speaker feeds its bgp and layer2 controllers from one. Pure: no I/O.
 *
 * Every address in a Service's status.loadBalancer.ingress that lies in a pool announced by the
 * protocol, of a LoadBalancer service edge-ccm serves (its class or none) that is not being
 * deleted. Its nodes: the candidates the caller passes (for BGP the service controller's eligible
 * nodes, for L2 also Ready and with a live speaker), narrowed by the pool's nodeSelector and, for
 * externalTrafficPolicy: Local, to the nodes with a ready endpoint of the service. An address
 * shared by several services gets the union of their nodes.
 */

export interface AddressInputs {
  protocol: 'bgp' | 'l2';
  pools: readonly PoolConfig[];
  /** loadBalancer.classes: the load-balancer classes edge-ccm serves besides the default. */
  classes?: readonly string[];
  services: readonly V1Service[];
  /** The nodes that may announce at all, before the pool's and the services' narrowing. */
  candidates: readonly V1Node[];
  /** namespace/name -> nodes with a ready endpoint of that service (read for externalTrafficPolicy: Local). */
  readyEndpointNodes: ReadonlyMap<string, ReadonlySet<string>>;
}

/** One address to announce. */
export interface AnnouncedAddress {
  /** Canonical text ("2001:db8::1", never "2001:DB8::0001"): every speaker keys and elects by it. */
  address: string;
  ip: IP;
  pool: PoolConfig;
  /** The services holding it (several when shared), by namespace/name. */
  services: string[];
  /** The nodes that may announce it, sorted by name; empty: nobody may. */
  nodes: string[];
}

export function announcedAddresses(input: AddressInputs): AnnouncedAddress[] {
  const pools = input.pools.filter((p) => p.announce === input.protocol);
  if (pools.length === 0) return [];
  const byAddress = new Map<string, { ip: IP; pool: PoolConfig; services: V1Service[] }>();
  for (const service of input.services) {
    // Another implementation's class holds addresses edge-ccm did not assign: never ours to announce.
    if (!wantsLoadBalancer(service, input.classes ?? []) || service.metadata?.deletionTimestamp) continue;
    for (const ingress of service.status?.loadBalancer?.ingress ?? []) {
      const parsed = canonicalAddress(ingress.ip ?? '');
      if (!parsed) continue;
      const pool = pools.find((p) => rangesContain(p.ranges, parsed.ip));
      if (!pool) continue; // another pool's mode, or an address edge-ccm did not hand out
      const entry = byAddress.get(parsed.text) ?? { ip: parsed.ip, pool, services: [] };
      entry.services.push(service);
      byAddress.set(parsed.text, entry);
    }
  }
  const poolNodes = new Map<PoolConfig, string[]>();
  const nodesOf = (pool: PoolConfig): string[] => {
    let names = poolNodes.get(pool);
    if (!names) {
      names = input.candidates.filter((n) => pool.nodeSelector?.(n.metadata?.labels ?? {}) ?? true).map(nodeName);
      poolNodes.set(pool, names);
    }
    return names;
  };
  const out: AnnouncedAddress[] = [];
  for (const [address, { ip, pool, services }] of byAddress) {
    const nodes = new Set<string>();
    for (const service of services) {
      const withEndpoints = service.spec?.externalTrafficPolicy === 'Local' ? input.readyEndpointNodes.get(serviceKey(service)) ?? new Set<string>() : undefined;
      for (const node of nodesOf(pool)) if (!withEndpoints || withEndpoints.has(node)) nodes.add(node);
    }
    out.push({ address, ip, pool, services: services.map(serviceKey).sort(), nodes: [...nodes].sort() });
  }
  return out.sort((a, b) => compareCodeUnits(a.address, b.address));
}

/**
 * An ingress address parsed and in canonical text, remembered: the tables are recomputed at every
 * change of the cluster, and parsing was most of their cost (10,000 addresses: 150 ms each time).
 */
const parsedAddresses = new Map<string, { ip: IP; text: string } | null>();
const ADDRESS_CACHE_LIMIT = 100_000;
function canonicalAddress(text: string): { ip: IP; text: string } | undefined {
  let known = parsedAddresses.get(text);
  if (known === undefined) {
    if (parsedAddresses.size >= ADDRESS_CACHE_LIMIT) parsedAddresses.clear();
    const ip = parseIP(text);
    known = ip ? { ip, text: formatIP(ip) } : null;
    parsedAddresses.set(text, known);
  }
  return known ?? undefined;
}
