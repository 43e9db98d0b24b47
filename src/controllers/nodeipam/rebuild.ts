import { parsePrefix } from '../../net/ip.ts';
import { Allocations } from './allocations.ts';
import { decide, type NodeRequest, type Problem } from './decide.ts';
import type { NodeIPAMOptions } from './options.ts';

/**
 * The allocations a new leader starts from, rebuilt from what survives it: the CloudAllocator's
 * record (each machine's CIDRs) first, then the pod CIDRs the Nodes carry. Nothing is written:
 * what cannot be held (outside the cluster CIDRs, held twice) is returned to be reported.
 */

export interface RebuildResult {
  state: Allocations;
  /** Problems of nodes' pod CIDRs, per node name. */
  nodeProblems: Map<string, Problem[]>;
  /** Record entries that could not be held (a changed --cluster-cidr, a hand edit), one line each. */
  recordProblems: string[];
}

export function rebuildAllocations(
  options: Pick<NodeIPAMOptions, 'clusterCIDRs' | 'maskSizes' | 'serviceCIDRs'>,
  records: ReadonlyMap<string, readonly string[]>,
  nodes: readonly NodeRequest[],
): RebuildResult {
  const state = new Allocations(options);
  const recordProblems: string[] = [];
  for (const [owner, cidrs] of records) {
    for (const text of cidrs) {
      const prefix = parsePrefix(text, true);
      const result = prefix ? state.occupy(prefix, owner) : undefined;
      if (result?.ok) continue;
      const why = !result ? 'not a CIDR' : result.reason === 'outside' ? 'outside --cluster-cidr' : `also held by ${result.owner}`;
      recordProblems.push(`machine ${owner}: recorded podCIDR ${text} is ${why}; dropped`);
    }
  }
  const nodeProblems = new Map<string, Problem[]>();
  for (const node of nodes) {
    if (node.podCIDRs.length === 0) continue;
    const decision = decide(state, node);
    if (decision.kind === 'hold' && decision.problems.length > 0) nodeProblems.set(node.node, decision.problems);
  }
  return { state, nodeProblems, recordProblems };
}
