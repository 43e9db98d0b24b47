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
  private last: Remembered | undefined;

  /** Whether this pass's nodes and answers are, group by group, those of the remembered quiet pass. */
  repeats(groups: readonly { partition: unknown; asked: readonly V1Node[] }[], replies: readonly (readonly Existence[])[]): boolean {
    const last = this.last;
    if (!last || last.groups.length !== groups.length) return false;
    for (let g = 0; g < groups.length; g++) {
      const before = last.groups[g]!;
      const group = groups[g]!;
      if (before.partition !== group.partition || !sameItems(before.asked, group.asked) || !sameItems(before.answers, replies[g]!)) return false;
    }
    return true;
  }

  /** The quiet pass's answers by node name (its report's). */
  get answers(): ReadonlyMap<string, Existence> {
    return this.last?.answersByName ?? new Map();
  }

  /** The g-th group's NotReady nodes whose machine exists, as the quiet pass found them. */
  existing(g: number): readonly V1Node[] {
    return this.last?.groups[g]?.existing ?? [];
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

interface Remembered {
  groups: { partition: unknown; asked: readonly V1Node[]; answers: readonly Existence[]; existing: readonly V1Node[] }[];
  answersByName: ReadonlyMap<string, Existence>;
}

/** Same length, same item at every position (references: no object is read). */
function sameItems<T>(a: readonly T[], b: readonly T[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
