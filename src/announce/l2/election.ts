import type { V1EndpointSlice, V1Node, V1Service } from '@kubernetes/client-node';
import type { PoolConfig } from '../../lb/config-model.ts';
import { rangesContain } from '../../lb/ranges.ts';
import { readyEndpointNodes } from '../../kube/endpoint-slices.ts';
import { isNodeReady, nodeName } from '../../kube/node-helpers.ts';
import { formatIP, parseIP, type IP } from '../../net/ip.ts';
import { electNode } from '../../net/l2/election.ts';
import { nodeEligibleForLoadBalancer, serviceKey, wantsLoadBalancer } from '../../kube/service-helpers.ts';

/**
 * What the cluster asks of the L2 speakers, computed by each speaker alone from what they all see
 * (the services' addresses, the nodes, the endpoint slices and which speakers are alive), so that
 * every speaker elects the same node per address without talking to the others. Pure: no I/O.
 */

export interface ClusterView {
  pools: readonly PoolConfig[];
  /** loadBalancer.classes: the load-balancer classes edge-ccm serves besides the default. */
  classes?: readonly string[];
  services: readonly V1Service[];
  nodes: readonly V1Node[];
  endpointSlices: readonly V1EndpointSlice[];
  /** Nodes whose speaker is alive (heard from recently, or this speaker's own node). */
  alive: ReadonlySet<string>;
}

/** One load-balancer address of an `announce: l2` pool and who announces it. */
export interface AddressElection {
  address: string;
  pool: PoolConfig;
  /** namespace/name of the services holding it (several when shared). */
  services: string[];
  /** The nodes that may announce it, sorted by name. */
  eligible: string[];
  /** The elected node; undefined when no node is eligible (nobody answers). */
  owner?: string;
}

/** Every `announce: l2` address of every LoadBalancer service, with its elected node. */
export function electAddresses(view: ClusterView): AddressElection[] {
  const l2Pools = view.pools.filter((p) => p.announce === 'l2');
  if (l2Pools.length === 0) return [];
  const byAddress = new Map<string, { ip: IP; pool: PoolConfig; services: V1Service[] }>();
  for (const service of view.services) {
    // Another implementation's class holds addresses edge-ccm did not assign: never ours to announce.
    if (!wantsLoadBalancer(service, view.classes ?? []) || service.metadata?.deletionTimestamp) continue;
    for (const ingress of service.status?.loadBalancer?.ingress ?? []) {
      const ip = parseIP(ingress.ip ?? '');
      if (!ip) continue;
      const pool = l2Pools.find((p) => rangesContain(p.ranges, ip));
      if (!pool) continue; // not ours to announce (another pool's mode, or another implementation's address)
      const key = formatIP(ip);
      const entry = byAddress.get(key) ?? { ip, pool, services: [] };
      entry.services.push(service);
      byAddress.set(key, entry);
    }
  }
  const endpointNodes = readyEndpointNodes(view.endpointSlices);
  const elections: AddressElection[] = [];
  for (const [address, { pool, services }] of byAddress) {
    const poolNodes = view.nodes.filter((n) => nodeMayAnnounce(n, pool, view.alive)).map(nodeName);
    // A shared address: any node that may answer for one of its services (sharing requires the
    // same traffic policy and, for Local, the same pods, so the sets agree in practice).
    const eligible = new Set<string>();
    for (const service of services) {
      const local = service.spec?.externalTrafficPolicy === 'Local';
      const withEndpoints = local ? endpointNodes.get(serviceKey(service)) ?? new Set<string>() : undefined;
      for (const node of poolNodes) if (!withEndpoints || withEndpoints.has(node)) eligible.add(node);
    }
    const sorted = [...eligible].sort();
    elections.push({ address, pool, services: services.map(serviceKey).sort(), eligible: sorted, owner: electNode(address, sorted) });
  }
  return elections.sort((a, b) => a.address.localeCompare(b.address));
}

/**
 * Ready, not being deleted, not excluded from load balancers (label), not about to be removed by
 * the cluster autoscaler (taint), selected by the pool, and its speaker alive.
 */
export function nodeMayAnnounce(node: V1Node, pool: PoolConfig, alive: ReadonlySet<string>): boolean {
  return isNodeReady(node) &&
    nodeEligibleForLoadBalancer(node) &&
    (pool.nodeSelector?.(node.metadata?.labels ?? {}) ?? true) &&
    alive.has(nodeName(node));
}

/**
 * Interface -> addresses this node answers for: each address it is elected for, on its pool's
 * interfaces, or (no list) on the interface whose subnet holds the address. Addresses with no
 * such interface on this node are returned as unplaced, never answered anywhere.
 */
export function announcementTable(
  elections: readonly AddressElection[],
  self: string,
  subnetInterface: (ip: IP) => string | undefined,
): { table: Map<string, string[]>; unplaced: string[] } {
  const table = new Map<string, string[]>();
  const unplaced: string[] = [];
  for (const election of elections) {
    if (election.owner !== self) continue;
    const ip = parseIP(election.address)!;
    const interfaces = election.pool.interfaces ?? [subnetInterface(ip)].filter((i): i is string => !!i);
    if (interfaces.length === 0) unplaced.push(election.address);
    for (const name of interfaces) table.set(name, [...(table.get(name) ?? []), election.address]);
  }
  return { table, unplaced };
}
