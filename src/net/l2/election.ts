import { createHash } from 'node:crypto';
import { formatIP, parseIP } from '../ip.ts';

/**
 * Which node announces an address, decided by every speaker alone from what they all see (the
 * address and the eligible node names), so they agree without talking to each other.
 *
 * Rendezvous hashing, as MetalLB's layer 2 mode: the nodes are ordered by SHA-256 of
 * "node#address" and the first one wins. Addresses spread evenly over nodes, and when a node
 * leaves only the addresses it held move (each to its next node in that address's order); a node
 * joining takes only the addresses it now ranks first for.
 */
export function rankNodes(address: string, nodes: Iterable<string>): string[] {
  const key = canonical(address);
  return [...new Set(nodes)]
    .map((node) => ({ node, hash: createHash('sha256').update(`${node}#${key}`).digest() }))
    .sort((a, b) => Buffer.compare(a.hash, b.hash) || (a.node < b.node ? -1 : 1))
    .map((entry) => entry.node);
}

/** The node that announces `address`, or undefined when no node is eligible. */
export function electNode(address: string, nodes: Iterable<string>): string | undefined {
  return rankNodes(address, nodes)[0];
}

/** "2001:DB8::0001" and "2001:db8::1" must elect the same node on every speaker. */
function canonical(address: string): string {
  const ip = parseIP(address);
  return ip ? formatIP(ip) : address;
}
