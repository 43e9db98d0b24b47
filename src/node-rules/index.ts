/** The node rules (the `nodeRules` section of every provider's file): what providers and config-sections.ts import. */
export { NodeRulesSchema, salvageNodeRules, SELECTOR_OPERATORS, type RawNodeRule } from './config-schema.ts';
export { resolveNodeRules, writableKeyError, type FactVocabulary } from './config-resolve.ts';
export { ruleEffects, unmatchedRules } from './evaluate.ts';
export type { NodeRule } from './model.ts';
