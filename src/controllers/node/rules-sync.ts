import type { V1Node, V1Taint } from '@kubernetes/client-node';
import { EDGE_CCM_NODE_ANNOTATION_PREFIX, taintId, type NodeRuleEffects } from '../../cloud/node-rules.ts';
import { isReservedForRules } from '../../kube/labels.ts';
import { nodeLabels } from '../../kube/node-helpers.ts';
import { managedKeys, managedKeysUpdate } from './managed-keys.ts';

/**
 * What the node rules' labels, annotations and taints (the provider's ruleEffects) mean for one
 * node, as a pure function of the node and the effects; the same at initialisation (merged into
 * its write, so a rule's taint is on the node before the uninitialized taint is gone) and on
 * every periodic pass after (so a node follows rule and fact changes).
 *
 * - What edge-ccm set for the rules is listed per kind in the annotations below (managed-keys.ts):
 *   those keys follow the rules, changed or removed when the rules change or stop matching.
 * - A key the node has that edge-ccm did not set (the kubelet's --node-labels, kubectl, another
 *   controller, the cloud labels) is never changed, taken over or removed: the rule's value for
 *   it is left out (discarded, logged).
 * - Reserved keys (kubernetes.io, k8s.io but node-role.kubernetes.io) and edge-ccm's own
 *   annotations are never written or removed, whatever a provider says: so the uninitialized,
 *   not-ready and shutdown taints are out of reach.
 */

export const RULE_LABELS_ANNOTATION = 'node.edge-ccm.io/rule-labels';
export const RULE_ANNOTATIONS_ANNOTATION = 'node.edge-ccm.io/rule-annotations';
export const RULE_TAINTS_ANNOTATION = 'node.edge-ccm.io/rule-taints';

/** A JSON merge patch of the node: null removes a label or annotation; taints, when given, is the whole new list. */
export interface NodeRulesPatch {
  labels: Record<string, string | null>;
  annotations: Record<string, string | null>;
  taints?: V1Taint[];
}

export interface RuleDiscard {
  kind: 'label' | 'annotation' | 'taint';
  key: string;
  reason: 'already-present' | 'reserved';
}

export interface NodeRulesPlan {
  /** Undefined when the node is in line with the rules. */
  patch?: NodeRulesPatch;
  discarded: RuleDiscard[];
}

export function planNodeRules(node: V1Node, effects: NodeRuleEffects): NodeRulesPlan {
  const discarded: RuleDiscard[] = [];
  const labels = planMap('label', nodeLabels(node), effects.labels, managedKeys(node, RULE_LABELS_ANNOTATION), discarded);
  const annotations = planMap('annotation', node.metadata?.annotations ?? {}, effects.annotations, managedKeys(node, RULE_ANNOTATIONS_ANNOTATION), discarded);
  const taints = planTaints(node.spec?.taints ?? [], effects, managedKeys(node, RULE_TAINTS_ANNOTATION), discarded);
  const bookkeeping = {
    ...managedKeysUpdate(node, RULE_LABELS_ANNOTATION, labels.owned),
    ...managedKeysUpdate(node, RULE_ANNOTATIONS_ANNOTATION, annotations.owned),
    ...managedKeysUpdate(node, RULE_TAINTS_ANNOTATION, taints.owned),
  };
  const patch: NodeRulesPatch = { labels: labels.changes, annotations: { ...annotations.changes, ...bookkeeping } };
  if (taints.list) patch.taints = taints.list;
  const changed = Object.keys(patch.labels).length > 0 || Object.keys(patch.annotations).length > 0 || patch.taints !== undefined;
  return { patch: changed ? patch : undefined, discarded };
}

function writable(kind: RuleDiscard['kind'], key: string): boolean {
  return !isReservedForRules(key) && !(kind === 'annotation' && key.startsWith(EDGE_CCM_NODE_ANNOTATION_PREFIX));
}

/** Labels or annotations: the changes to make, and the keys edge-ccm holds afterwards. */
function planMap(
  kind: 'label' | 'annotation',
  current: Readonly<Record<string, string>>,
  wanted: Readonly<Record<string, string>>,
  managed: ReadonlySet<string> = new Set(),
  discarded: RuleDiscard[],
): { changes: Record<string, string | null>; owned: string[] } {
  const changes: Record<string, string | null> = {};
  const owned: string[] = [];
  for (const [key, value] of Object.entries(wanted)) {
    if (!writable(kind, key)) discarded.push({ kind, key, reason: 'reserved' });
    else if (!managed.has(key) && Object.hasOwn(current, key)) {
      if (current[key] !== value) discarded.push({ kind, key, reason: 'already-present' });
    } else {
      owned.push(key);
      if (current[key] !== value) changes[key] = value;
    }
  }
  for (const key of managed) {
    if (!Object.hasOwn(wanted, key) && Object.hasOwn(current, key) && writable(kind, key)) changes[key] = null;
  }
  return { changes, owned };
}

/**
 * Taints, identified by key and effect: ours are replaced in place (value) or dropped, new ones
 * appended, every other taint kept as it is and where it is. `list` only when it changes.
 */
function planTaints(
  current: readonly V1Taint[],
  effects: NodeRuleEffects,
  managed: ReadonlySet<string> = new Set(),
  discarded: RuleDiscard[],
): { list?: V1Taint[]; owned: string[] } {
  const wanted = new Map<string, V1Taint>();
  for (const t of effects.taints) {
    if (writable('taint', t.key)) wanted.set(taintId(t), { key: t.key, effect: t.effect, ...(t.value ? { value: t.value } : {}) });
    else discarded.push({ kind: 'taint', key: taintId(t), reason: 'reserved' });
  }
  const owned: string[] = [];
  const list: V1Taint[] = [];
  let changed = false;
  const present = new Set<string>();
  for (const t of current) {
    const id = taintId(t);
    present.add(id);
    const want = wanted.get(id);
    if (!managed.has(id) || !writable('taint', t.key)) {
      list.push(t);
      if (want && (want.value ?? '') !== (t.value ?? '')) discarded.push({ kind: 'taint', key: id, reason: 'already-present' });
    } else if (want) {
      owned.push(id);
      list.push((want.value ?? '') === (t.value ?? '') ? t : want);
      changed ||= (want.value ?? '') !== (t.value ?? '');
    } else changed = true; // ours, and no rule gives it any more
  }
  for (const [id, t] of wanted) {
    if (present.has(id)) continue;
    owned.push(id);
    list.push(t);
    changed = true;
  }
  return { list: changed ? list : undefined, owned };
}
