import type { V1Node } from '@kubernetes/client-node';
import type { Existence } from '../../cloud/types.ts';
import { nodeName } from '../../kube/node-helpers.ts';

/**
 * The lifecycle controller's view of a provider snapshot (beyond upstream), so that no provider,
 * present or future, can delete nodes by answering an empty or shrunken list: Proxmox filters
 * its VM list by the token's permissions, so a token that lost its ACL answers HTTP 200 with
 * no VMs; a static inventory edited down to nothing says every machine is gone.
 *
 * What "a snapshot" is here: the answers of one pass about every managed node (Ready ones
 * included: without them one NotReady node's "not found" cannot be told from an empty list),
 * grouped by providerID scheme (`proxmox` for `proxmox://fra1/101`; nodes without a providerID
 * form their own group). One group is what one source of truth lists: the machines it "holds"
 * are the nodes it answered `exists` for. Per group and pass:
 *
 * - empty: no node answered `exists` and at least one answered `not-found`. Never evidence of
 *   absence: every `not-found` of the group becomes `unknown`. (So the last node of a group is
 *   never deleted by the controller: its machine cannot be told apart from an empty list.)
 * - shrunk: of the machines the group held (the baseline), more than `shrinkMaxShare` are now
 *   `not-found`. Those missing ones are `unknown` until the smaller list has been read
 *   `confirmReads` times in a row over at least `gracePeriodMs`; then it is the new baseline and
 *   their `not-found` goes on to the per-node grace period, threshold and breaker as any other.
 *   Any other pass (the list grew back, an empty one, no answer at all) starts the count afresh.
 * - otherwise the answers stand, and the baseline becomes what the group holds now: the nodes
 *   answered `exists`, plus those of the old baseline the provider could not answer for.
 *
 * The first time a group is seen, its baseline is every node of the group present (a restarted
 * controller assumes each node had its machine), so a restart in the middle of an outage does
 * not accept a shrunken list as the normal state.
 */

export type Distrust = 'empty' | 'shrunk';
export const DISTRUST_REASONS: readonly Distrust[] = ['empty', 'shrunk'];

export interface SnapshotOptions {
  /** --node-deletion-shrink-max-share: share (0..1) of the held machines that may vanish from one answer and be believed (1: never distrusted as shrunk). */
  shrinkMaxShare: number;
  /** The smaller list must have been read over at least this long (the deletion grace period). */
  gracePeriodMs: number;
  /** ...and this many times in a row. */
  confirmReads: number;
}

/** How one group's answers of this pass were taken. */
export interface GroupJudgement {
  /** The providerID scheme, '' for nodes without a providerID. */
  scheme: string;
  state: 'trusted' | 'no-read' | 'confirmed' | Distrust;
  nodes: number;
  found: number;
  notFound: number;
  /** Machines held before this pass (the baseline). */
  heldBefore: number;
  /** Of those, how many are now `not-found`. */
  lost: number;
  /** shrunk: when the smaller list was first read, and how many reads in a row saw it. */
  since?: number;
  reads?: number;
}

export interface SnapshotJudgement {
  /** The answers to act on: the provider's, with the distrusted `not-found`s turned `unknown` (in a copy: the map given is the one returned when none is). */
  answers: ReadonlyMap<string, Existence>;
  /** Node name -> why its `not-found` was not believed. */
  distrusted: Map<string, Distrust>;
  groups: Map<string, GroupJudgement>;
}

interface GroupMemory {
  /** Names of the nodes whose machines the group held at its last believed read. */
  baseline: Set<string>;
  /** While a shrunken list waits for confirmation. */
  shrink?: { since: number; reads: number };
}

const SCHEME = /^([A-Za-z][A-Za-z0-9+.-]*):/;

/** The scheme last found: the nodes of one provider share it, and checking it is cheaper than the pattern (this runs for every node every period). */
let lastScheme = '';

/** The providerID scheme a node's answer is grouped by; '' when it has none. */
export function providerIDScheme(node: V1Node): string {
  const id = node.spec?.providerID ?? '';
  // `lastScheme` matched SCHEME, so an id starting with it and a ':' has exactly that scheme.
  if (lastScheme && id.charCodeAt(lastScheme.length) === COLON && id.startsWith(lastScheme)) return lastScheme;
  const scheme = SCHEME.exec(id)?.[1] ?? '';
  if (scheme) lastScheme = scheme;
  return scheme;
}
const COLON = 58;

/** How a group is named in logs and events. */
export function describeGroup(scheme: string): string {
  return scheme ? `providerID scheme ${scheme}://` : 'no providerID';
}

/**
 * The nodes by group. All of one group (one provider: the usual case) is the list itself, not a
 * copy of it: this runs every period over every node.
 */
function groupBy(nodes: readonly V1Node[], groupOf: (node: V1Node) => string): Map<string, readonly V1Node[]> {
  const groups = new Map<string, V1Node[]>();
  if (nodes.length === 0) return groups;
  const first = groupOf(nodes[0]!);
  let i = 1;
  while (i < nodes.length && groupOf(nodes[i]!) === first) i++;
  if (i === nodes.length) return new Map([[first, nodes]]);
  groups.set(first, nodes.slice(0, i));
  for (; i < nodes.length; i++) {
    const node = nodes[i]!;
    const scheme = groupOf(node);
    const members = groups.get(scheme);
    if (members) members.push(node);
    else groups.set(scheme, [node]);
  }
  return groups;
}

export class ProviderSnapshots {
  private readonly memory = new Map<string, GroupMemory>();

  constructor(private readonly opts: SnapshotOptions) {}

  /**
   * `nodes`: every node the provider was asked about this pass; `answers`: its answers by node
   * name; `groupOf`: the source of truth a node's answer came from (several providers in one
   * process: its provider's platform, which a node waiting for its providerID has too).
   */
  judge(nodes: readonly V1Node[], answers: ReadonlyMap<string, Existence>, now: number, groupOf: (node: V1Node) => string = providerIDScheme): SnapshotJudgement {
    // The answers are copied only when one is distrusted: every pass at idle would copy them all.
    let acted: Map<string, Existence> | undefined;
    const result: SnapshotJudgement = { answers: answers as Map<string, Existence>, distrusted: new Map(), groups: new Map() };
    const groups = groupBy(nodes, groupOf);
    for (const scheme of this.memory.keys()) if (!groups.has(scheme)) this.memory.delete(scheme);

    for (const [scheme, members] of groups) {
      const memory = this.memory.get(scheme) ?? { baseline: new Set(members.map(nodeName)) };
      this.memory.set(scheme, memory);
      // One loop per pass over the group (this runs every period for every node): the answers
      // counted, and the baseline pruned of nodes gone from the group only when it holds any.
      let found = 0;
      /** Found and not in the baseline: the only ones a believed answer adds to it. */
      const newlyFound: string[] = [];
      const notFound: string[] = [];
      const lost: string[] = [];
      let inBaseline = 0;
      for (const node of members) {
        const name = nodeName(node);
        const held = memory.baseline.has(name);
        if (held) inBaseline++;
        const answer = answers.get(name);
        if (answer === 'exists') {
          found++;
          if (!held) newlyFound.push(name);
        } else if (answer === 'not-found') {
          notFound.push(name);
          if (held) lost.push(name);
        }
      }
      if (inBaseline < memory.baseline.size) {
        const present = new Set(members.map(nodeName));
        for (const name of memory.baseline) if (!present.has(name)) memory.baseline.delete(name);
      }
      const judgement: GroupJudgement = {
        scheme, state: 'trusted', nodes: members.length, found, notFound: notFound.length, heldBefore: memory.baseline.size, lost: lost.length,
      };
      result.groups.set(scheme, judgement);
      const distrust = (which: readonly string[], reason: Distrust) => {
        acted ??= result.answers = new Map(answers);
        for (const name of which) {
          acted.set(name, 'unknown');
          result.distrusted.set(name, reason);
        }
      };

      if (found === 0 && notFound.length === 0) {
        judgement.state = 'no-read';
        delete memory.shrink;
        continue;
      }
      if (found === 0) {
        judgement.state = 'empty';
        delete memory.shrink;
        distrust(notFound, 'empty');
        continue;
      }
      // The epsilon keeps 0.3 * 10 (= 3.0000000000000004) at its intended value.
      if (lost.length > this.opts.shrinkMaxShare * memory.baseline.size + 1e-9) {
        const shrink = memory.shrink ?? { since: now, reads: 0 };
        shrink.reads++;
        judgement.since = shrink.since;
        judgement.reads = shrink.reads;
        if (now - shrink.since < this.opts.gracePeriodMs || shrink.reads < this.opts.confirmReads) {
          judgement.state = 'shrunk';
          memory.shrink = shrink;
          distrust(lost, 'shrunk');
          continue;
        }
        judgement.state = 'confirmed';
      }
      delete memory.shrink;
      for (const name of notFound) memory.baseline.delete(name);
      for (const name of newlyFound) memory.baseline.add(name);
    }
    return result;
  }
}
