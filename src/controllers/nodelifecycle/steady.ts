import type { V1Node } from '@kubernetes/client-node';
import type { Existence } from '../../cloud/types.ts';

/**
 * The idle pass's shortcut. A pass that judged every node and found nothing to do (no write, no
 * hold, no distrusted answer, no DeletionHeld condition to change, nothing remembered about any
 * node) is a fixed point: the next pass over the same node objects, in the same order, with the
 * same answers, judges and decides the same nothing (the snapshot's memory does not move either:
 * snapshot.ts). The informer replaces a node's object whenever the node changes and nothing
 * changes a cached object in place, so "the same objects" is a comparison of references, no node
 * read. Such a pass skips the judgement and the decisions (with 5,000 idle nodes, most of the
 * controller's idle CPU) and asks the shutdown questions of the nodes the last pass found existing
 * and NotReady; the provider is still asked everything, every period, and the breaker evaluated.
 */
export class SteadyPass {
  private last: QuietPass | undefined;

  /**
   * The remembered quiet pass when this pass's nodes and answers are, group by group, its own;
   * undefined when anything differs (or nothing is remembered).
   */
  repeated(groups: readonly { partition: unknown; asked: readonly V1Node[] }[], replies: readonly (readonly Existence[])[]): QuietPass | undefined {
    const last = this.last;
    if (!last || last.groups.length !== groups.length) return undefined;
    for (let g = 0; g < groups.length; g++) {
      const before = last.groups[g]!;
      const group = groups[g]!;
      if (before.partition !== group.partition || !sameItems(before.asked, group.asked) || !sameItems(before.answers, replies[g]!)) return undefined;
    }
    return last;
  }

  /**
   * Keeps a quiet pass's inputs. The node lists are the pass's own (nothing changes them
   * afterwards); the answers are copied: a provider handing back one list it changes in place
   * would otherwise always look the same.
   */
  remember(groups: readonly { partition: unknown; asked: readonly V1Node[]; existing: readonly V1Node[] }[], replies: readonly (readonly Existence[])[], answersByName: ReadonlyMap<string, Existence>): void {
    this.last = { groups: groups.map((g, i) => ({ partition: g.partition, asked: g.asked, answers: replies[i]!.slice(), existing: g.existing })), answersByName };
  }

  /** The last pass did something (or may have): the next one judges every node. */
  forget(): void {
    this.last = undefined;
  }
}

/** A quiet pass's inputs, and what a pass repeating it reuses: each group's NotReady existing nodes, the report's answers by name. */
export interface QuietPass {
  readonly groups: readonly { partition: unknown; asked: readonly V1Node[]; answers: readonly Existence[]; existing: readonly V1Node[] }[];
  readonly answersByName: ReadonlyMap<string, Existence>;
}

/** Same length, same item at every position (references: no object is read). */
function sameItems<T>(a: readonly T[], b: readonly T[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
