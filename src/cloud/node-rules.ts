/**
 * Node rules in the provider contract (beyond upstream): what a provider knows of a machine (its
 * facts), and what the rules of its config file give that machine's node (labels, annotations,
 * taints). The provider evaluates the rules (src/node-rules), since it holds both the rules and
 * the facts; the cloud node controller applies the result and keeps it in step.
 */

export const TAINT_EFFECTS = ['NoSchedule', 'PreferNoSchedule', 'NoExecute'] as const;
export type TaintEffect = (typeof TAINT_EFFECTS)[number];

export interface RuleTaint {
  key: string;
  /** Empty for a taint without value. */
  value: string;
  effect: TaintEffect;
}

/** What the matching rules give a node, later rules overriding earlier ones key by key. */
export interface NodeRuleEffects {
  labels: Record<string, string>;
  annotations: Record<string, string>;
  /** At most one per key and effect (the API's identity of a taint). */
  taints: RuleTaint[];
}

/**
 * A machine as a rule's selector sees it. `values` holds the single-valued facts by name (every
 * provider: name, id, providerID, region, zone, instanceType; each provider adds its own); an
 * empty string counts as absent. `tags` is the one multi-valued fact (Proxmox VM tags),
 * `labels` the inventory labels (static), selected as `label:KEY`.
 */
export interface NodeFacts {
  values: Record<string, string | undefined>;
  tags?: readonly string[];
  labels?: Readonly<Record<string, string>>;
}

/** The facts every provider gives. */
export const COMMON_FACT_KEYS = ['name', 'id', 'providerID', 'region', 'zone', 'instanceType'] as const;

/** The selector key of an inventory label: `label:` and the label key. */
export const LABEL_FACT_PREFIX = 'label:';
export const TAGS_FACT = 'tags';

/** A taint's identity on a node: the API allows one taint per key and effect. */
export function taintId(t: { key: string; effect?: string }): string {
  return `${t.key}:${t.effect ?? ''}`;
}

/** Annotations under this prefix are the node controller's bookkeeping (what it set): no rule may write them. */
export const EDGE_CCM_NODE_ANNOTATION_PREFIX = 'node.edge-ccm.io/';
