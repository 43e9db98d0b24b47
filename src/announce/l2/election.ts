import type { V1EndpointSlice, V1Node, V1Service } from '@kubernetes/client-node';
import type { PoolConfig } from '../../lb/config-model.ts';
import { announcedAddresses } from '../addresses.ts';
import { readyEndpointNodes } from '../../kube/endpoint-slices.ts';
import { isNodeReady, nodeName } from '../../kube/node-helpers.ts';
import type { IP } from '../../net/ip.ts';
import { electNode } from '../../net/l2/election.ts';
import { nodeEligibleForLoadBalancer } from '../../kube/service-helpers.ts';

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
  ip: IP;
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
  const candidates = view.nodes.filter((n) => isNodeReady(n) && nodeEligibleForLoadBalancer(n) && view.alive.has(nodeName(n)));
  const addresses = announcedAddresses({
    protocol: 'l2', pools: view.pools, classes: view.classes, services: view.services, candidates,
    readyEndpointNodes: readyEndpointNodes(view.endpointSlices),
  });
  return addresses.map(({ address, ip, pool, services, nodes }) => ({ address, ip, pool, services, eligible: nodes, owner: electNode(address, nodes) }));
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
    const interfaces = election.pool.interfaces ?? [subnetInterface(election.ip)].filter((i): i is string => !!i);
    if (interfaces.length === 0) unplaced.push(election.address);
    for (const name of interfaces) table.set(name, [...(table.get(name) ?? []), election.address]);
  }
  return { table, unplaced };
}

/**
 * Interfaces where this node may soon take over an IPv4 address (it is eligible, another node
 * owns it): kept ready by the responder, so a takeover does not wait for a socket to open.
 */
export function standbyInterfaces(
  elections: readonly AddressElection[],
  self: string,
  subnetInterface: (ip: IP) => string | undefined,
): Set<string> {
  const out = new Set<string>();
  for (const election of elections) {
    if (election.owner === self || election.ip.family !== 4 || !election.eligible.includes(self)) continue;
    for (const name of election.pool.interfaces ?? [subnetInterface(election.ip)].filter((i): i is string => !!i)) out.add(name);
  }
  return out;
}

/**
 * Addresses held before and now by services none of which held them before: a new assignment
 * (a service deleted and another given its address within one reconcile, the announcer gathering
 * service changes before it reconciles), probed afresh as if the address had been free.
 */
export function reassignedAddresses(before: readonly AddressElection[], now: readonly AddressElection[]): Set<string> {
  const held = new Map(before.map((e) => [e.address, new Set(e.services)]));
  const out = new Set<string>();
  for (const e of now) {
    const previous = held.get(e.address);
    if (previous && !e.services.some((s) => previous.has(s))) out.add(e.address);
  }
  return out;
}
