import { formatPrefix, parsePrefix, type Prefix } from '../../net/ip.ts';
import type { CIDRSet } from '../../net/cidr-set.ts';
import { nodeOwner, SERVICE_RANGE_OWNER, type Allocations } from './allocations.ts';

/**
 * The allocator's decision for one node, on the allocations in memory (no I/O): the pod CIDRs to
 * write, or why none can be. A node that has pod CIDRs keeps them (the API server refuses a
 * change): they are held for its owner, and what cannot be held is a problem to report. A node
 * without gets, per cluster CIDR: the inventory's pin (CloudAllocator), else what its owner holds
 * already (the machine's first CIDRs; a RangeAllocator retry after a failed write), else the next
 * free one. Everything a refused decision took is given back.
 */

/** The reasons of the Warning events, one per kind of problem (and the metric's label). */
export type ProblemReason = 'CIDRNotAvailable' | 'CIDROutsideClusterCIDR' | 'CIDRConflict' | 'InvalidPodCIDRPin';

export interface Problem {
  reason: ProblemReason;
  message: string;
}

export interface NodeRequest {
  node: string;
  /** spec.podCIDRs as the node has them (spec.podCIDR when only that is set). */
  podCIDRs: readonly string[];
  /** Whose CIDRs they are: the machine's providerID (CloudAllocator) or nodeOwner(node). */
  owner: string;
  /** The CIDRs the inventory pins for the machine (CloudAllocator); undefined: none. */
  pin?: readonly string[];
  /** Another Node of the same machine that has pod CIDRs (a rename while the old Node lives): they are its. */
  sharedWith?: string;
}

export type Decision =
  /** The node has pod CIDRs: held for the owner, except those with a problem. */
  | { kind: 'hold'; problems: Problem[]; ownerChanged: boolean }
  /** Write these (already held for the owner) to the node. */
  | { kind: 'assign'; cidrs: Prefix[]; ownerChanged: boolean }
  | { kind: 'refuse'; problem: Problem };

export function decide(state: Allocations, request: NodeRequest): Decision {
  const before = heldText(state, request.owner);
  const placeholder = nodeOwner(request.node);
  // CIDRs held for the node before its machine was known are the machine's now.
  if (request.owner !== placeholder) state.transfer(placeholder, request.owner);
  if (request.sharedWith !== undefined && request.podCIDRs.length === 0) {
    return { kind: 'refuse', problem: { reason: 'CIDRConflict', message: `Node ${request.node} is machine ${request.owner}, whose podCIDRs Node ${request.sharedWith} has: delete that Node first` } };
  }
  const decision = request.podCIDRs.length > 0 ? holdExisting(state, request) : assign(state, request);
  if (decision.kind === 'refuse') return decision;
  return { ...decision, ownerChanged: heldText(state, request.owner) !== before };
}

function holdExisting(state: Allocations, request: NodeRequest): { kind: 'hold'; problems: Problem[] } {
  const problems: Problem[] = [];
  const kept: Prefix[] = [];
  for (const text of request.podCIDRs) {
    const prefix = parsePrefix(text, true);
    if (!prefix) {
      problems.push({ reason: 'CIDROutsideClusterCIDR', message: `Node ${request.node} has podCIDR ${JSON.stringify(text)}, which is not a CIDR` });
      continue;
    }
    const result = state.occupy(prefix, request.owner);
    if (result.ok) kept.push(prefix);
    else if (result.reason === 'outside') problems.push(outside(state, request.node, text));
    else problems.push(conflict(request.node, text, result.owner));
  }
  // The node's CIDRs are the truth for its owner: anything else the owner held in the same
  // cluster CIDR (an older record) is given back, unless the node's own could not all be held.
  if (problems.length === 0 && request.sharedWith === undefined) {
    const keptText = new Set(kept.map(formatPrefix));
    for (const prefix of state.held(request.owner)) {
      if (!keptText.has(formatPrefix(prefix)) && kept.some((k) => state.setFor(prefix)?.contains(k))) state.release(prefix, request.owner);
    }
  }
  return { kind: 'hold', problems };
}

function heldText(state: Allocations, owner: string): string {
  return state.held(owner).map(formatPrefix).sort().join(',');
}

function assign(state: Allocations, request: NodeRequest): { kind: 'assign'; cidrs: Prefix[] } | { kind: 'refuse'; problem: Problem } {
  const sets = state.clusterSets();
  const pinned = request.pin === undefined ? undefined : checkPin(state, request);
  if (pinned && !Array.isArray(pinned)) return { kind: 'refuse', problem: pinned };
  const held = state.held(request.owner);
  const chosen: Prefix[] = [];
  const fresh: Prefix[] = [];
  for (let i = 0; i < sets.length; i++) {
    const set = sets[i]!;
    const prefix = pinned?.[i] ?? held.find((h) => set.contains(h)) ?? state.allocate(i, request.owner);
    if (!prefix) {
      for (const f of fresh) state.release(f, request.owner);
      return { kind: 'refuse', problem: exhausted(set, request.node) };
    }
    if (!pinned && !held.includes(prefix)) fresh.push(prefix);
    chosen.push(prefix);
  }
  if (pinned) {
    // The pin wins over what the machine held before; checkPin saw no other owner on it.
    for (const prefix of held) state.release(prefix, request.owner);
    for (const prefix of pinned) state.occupy(prefix, request.owner);
  }
  return { kind: 'assign', cidrs: chosen };
}

/** The pin in --cluster-cidr order, or the problem with it: each checked against the flags and the others' CIDRs. */
function checkPin(state: Allocations, request: NodeRequest): Prefix[] | Problem {
  const sets = state.clusterSets();
  const clusters = sets.map((s) => formatPrefix(s.cluster)).join(',');
  const invalid = (message: string): Problem => ({ reason: 'InvalidPodCIDRPin', message: `The inventory pins podCIDRs ${request.pin!.join(',')} for node ${request.node}: ${message}` });
  const parsed: Prefix[] = [];
  for (const text of request.pin!) {
    const prefix = parsePrefix(text);
    if (!prefix) return invalid(`${JSON.stringify(text)} is not a CIDR`);
    if (parsed.some((p) => p.family === prefix.family)) return invalid(`two IPv${prefix.family} CIDRs (give at most one of each family)`);
    parsed.push(prefix);
  }
  const ordered: Prefix[] = [];
  for (const set of sets) {
    const prefix = parsed.find((p) => p.family === set.cluster.family);
    if (!prefix) return invalid(`no IPv${set.cluster.family} CIDR, and --cluster-cidr ${clusters} gives every node one`);
    if (!set.contains(prefix)) return invalid(`${formatPrefix(prefix)} is outside --cluster-cidr ${clusters}`);
    if (prefix.bits !== set.maskSize) return invalid(`${formatPrefix(prefix)} is a /${prefix.bits}, and nodes get a /${set.maskSize} of ${formatPrefix(set.cluster)}`);
    const holder = set.ownerOf(prefix);
    if (holder !== undefined && holder !== request.owner) return conflict(request.node, formatPrefix(prefix), holder, 'pinned ');
    ordered.push(prefix);
  }
  const extra = parsed.find((p) => !sets.some((s) => s.cluster.family === p.family));
  if (extra) return invalid(`${formatPrefix(extra)} is outside --cluster-cidr ${clusters}`);
  return ordered;
}

function outside(state: Allocations, node: string, cidr: string): Problem {
  const clusters = state.clusterSets().map((s) => formatPrefix(s.cluster)).join(',');
  return { reason: 'CIDROutsideClusterCIDR', message: `Node ${node} has podCIDR ${cidr}, outside --cluster-cidr ${clusters}: it is not tracked, and may overlap other networks` };
}

function conflict(node: string, cidr: string, holder: string, what = ''): Problem {
  const who = holder === SERVICE_RANGE_OWNER ? '--service-cluster-ip-range' : holder.startsWith('node/') ? `node ${holder.slice(5)}` : `machine ${holder}`;
  return { reason: 'CIDRConflict', message: `The ${what}podCIDR ${cidr} of node ${node} overlaps CIDRs held by ${who}` };
}

function exhausted(set: CIDRSet, node: string): Problem {
  return {
    reason: 'CIDRNotAvailable',
    message: `No free /${set.maskSize} left in --cluster-cidr ${formatPrefix(set.cluster)} for node ${node} (${set.used} of ${set.size} held)`,
  };
}
