import type { V1Node } from '@kubernetes/client-node';
import { parseLabelSelector, type LabelPredicate } from '../kube/label-selector.ts';
import { TAINT_EXTERNAL_CLOUD_PROVIDER } from '../kube/node-helpers.ts';

/**
 * Which nodes this CCM manages (beyond upstream: hybrid and edge clusters have nodes from
 * several sources, and a CCM that touches nodes it does not own has deleted them). Every
 * controller asks this one predicate.
 *
 * - providerID prefixes (e.g. `static://`): a node whose spec.providerID is set is managed only
 *   when it starts with one of them. A node without a providerID is managed only while it
 *   carries the uninitialized taint (a kubelet with --cloud-provider=external waiting for us; the
 *   provider decides at initialisation whether it knows the machine). Without the taint it was
 *   joined without an external cloud provider, by someone else: never ours to judge or delete.
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
    if (prefixes.length === 0) return true;
    const providerID = node.spec?.providerID;
    if (!providerID) return (node.spec?.taints ?? []).some((t) => t.key === TAINT_EXTERNAL_CLOUD_PROVIDER);
    return prefixes.some((p) => providerID.startsWith(p));
  };
}
