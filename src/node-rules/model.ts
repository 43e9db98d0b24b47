import type { NodeFacts, NodeRuleEffects } from '../cloud/node-rules.ts';

/** A rule of the `nodeRules` section after validation: its selector compiled, its keys checked. */
export interface NodeRule {
  name: string;
  /** Its place in nodeRules (for messages: nodeRules[2]). */
  index: number;
  matches(facts: NodeFacts): boolean;
  effects: NodeRuleEffects;
}
