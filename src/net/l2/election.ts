import { compareCodeUnits } from '../../util/compare.ts';
import { sha256Hex } from '../../util/digest.ts';
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
    .map((node) => ({ node, hash: rank(node, key) }))
    .sort((a, b) => compareCodeUnits(a.hash, b.hash) || compareCodeUnits(a.node, b.node))
    .map((entry) => entry.node);
}

/** The node that announces `address`, or undefined when no node is eligible (the first of rankNodes, without sorting). */
export function electNode(address: string, nodes: Iterable<string>): string | undefined {
  const key = canonical(address);
  let best: { node: string; hash: string } | undefined;
  for (const node of nodes) {
    const hash = rank(node, key);
    if (!best || compareCodeUnits(hash, best.hash) < 0 || (hash === best.hash && node < best.node)) best = { node, hash };
  }
  return best?.node;
}

/**
 * SHA-256 of "node#address" as hex, remembered: a speaker elects every address again at every
 * change, and at 100 nodes and 1000 addresses the 100,000 hashes took ~1 s of CPU per pass
 * (bench/l2-heartbeat-cost.ts). Bounded: forgotten all at once past MAX_RANKS entries.
 */
const ranks = new Map<string, Map<string, string>>();
let remembered = 0;
const MAX_RANKS = 1_000_000;

function rank(node: string, key: string): string {
  let byNode = ranks.get(key);
  if (!byNode) ranks.set(key, (byNode = new Map()));
  let hash = byNode.get(node);
  if (hash === undefined) {
    if (remembered >= MAX_RANKS) {
      ranks.clear();
      remembered = 0;
      ranks.set(key, (byNode = new Map()));
    }
    hash = sha256Hex(`${node}#${key}`);
    byNode.set(node, hash);
    remembered += 1;
  }
  return hash;
}


/** "2001:DB8::0001" and "2001:db8::1" must elect the same node on every speaker. */
function canonical(address: string): string {
  const ip = parseIP(address);
  return ip ? formatIP(ip) : address;
}
