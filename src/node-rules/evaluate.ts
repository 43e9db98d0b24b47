import { taintId, type NodeFacts, type NodeRuleEffects, type RuleTaint } from '../cloud/node-rules.ts';
import type { NodeRule } from './model.ts';

/**
 * What the rules give one machine: every matching rule applies, in the file's order, so a later
 * rule's value for a label or annotation key, or for a taint's key and effect, replaces an
 * earlier one's (Talos CCM's order). Deterministic: the same rules and facts give the same result.
 */
export function ruleEffects(rules: readonly NodeRule[], facts: NodeFacts): NodeRuleEffects {
  const labels: Record<string, string> = {};
  const annotations: Record<string, string> = {};
  const taints = new Map<string, RuleTaint>();
  for (const rule of rules) {
    if (!rule.matches(facts)) continue;
    Object.assign(labels, rule.effects.labels);
    Object.assign(annotations, rule.effects.annotations);
    for (const t of rule.effects.taints) taints.set(taintId(t), t);
  }
  return { labels, annotations, taints: [...taints.values()] };
}

/** The rules no machine of `machines` matches (for `validate`'s warning). */
export function unmatchedRules(rules: readonly NodeRule[], machines: readonly NodeFacts[]): NodeRule[] {
  return rules.filter((rule) => !machines.some((facts) => rule.matches(facts)));
}
