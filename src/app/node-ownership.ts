import type { V1Node } from '@kubernetes/client-node';
import { parseLabelSelector, type LabelPredicate } from '../kube/label-selector.ts';

/**
 * Which nodes this CCM manages (beyond upstream: hybrid and edge clusters have nodes from
 * several sources, and a CCM that touches nodes it does not own has deleted them). Every
 * controller asks this one predicate.
 *
 * - providerID prefixes (e.g. `static://`): a node whose spec.providerID is set is managed only
 *   when it starts with one of them. A node without a providerID yet (not initialised) is
 *   managed: the provider decides at initialisation whether it knows the machine.
 * - a label selector: the node must also match it (also before initialisation).
 * With neither, every node is managed, as upstream.
 */
export interface NodeOwnership {
  providerIDPrefixes: string[];
  labelSelector?: string;
}

export function nodeOwnershipPredicate(ownership: NodeOwnership): (node: V1Node) => boolean {
  const selector: LabelPredicate | undefined = ownership.labelSelector ? parseLabelSelector(ownership.labelSelector) : undefined;
  const prefixes = ownership.providerIDPrefixes.filter((p) => p !== '');
  return (node) => {
    if (selector && !selector(node.metadata?.labels)) return false;
    const providerID = node.spec?.providerID;
    if (!providerID || prefixes.length === 0) return true;
    return prefixes.some((p) => providerID.startsWith(p));
  };
}
