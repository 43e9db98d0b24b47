import * as v from 'valibot';
import { TAINT_EFFECTS } from '../cloud/node-rules.ts';
import { nonEmpty, simpleName, validOrUndefined } from '../config-file/schema.ts';

/**
 * The shape of the `nodeRules` section, the same in every provider's file (after Talos CCM's
 * `transformations`): each rule a selector over the provider's facts of a machine and the
 * labels, annotations and taints its node gets. What needs the whole section or the provider
 * (fact names, reserved keys, duplicate names, regular expressions) is config-resolve.ts's.
 */

export const SELECTOR_OPERATORS = ['In', 'NotIn', 'Exists', 'DoesNotExist', 'Glob', 'Regexp'] as const;
export type SelectorOperator = (typeof SELECTOR_OPERATORS)[number];

const ExpressionSchema = v.strictObject({
  key: nonEmpty,
  operator: v.picklist(SELECTOR_OPERATORS, `must be one of ${SELECTOR_OPERATORS.join(', ')}`),
  values: v.optional(v.array(v.string())),
});
export type RawExpression = v.InferOutput<typeof ExpressionSchema>;

/** One term: every requirement must hold. */
const TermSchema = v.strictObject({
  matchExpressions: v.optional(v.array(ExpressionSchema)),
  /** Inventory labels, each equal: `label:KEY In [VALUE]` written short. */
  matchLabels: v.optional(v.record(v.string(), v.string())),
});
export type RawTerm = v.InferOutput<typeof TermSchema>;

const TaintSchema = v.strictObject({
  key: nonEmpty,
  value: v.optional(v.string()),
  effect: v.picklist(TAINT_EFFECTS, `must be one of ${TAINT_EFFECTS.join(', ')}`),
});

const RuleSchema = v.strictObject({
  name: simpleName,
  /** Any one term matching selects the machine; absent: every machine. */
  nodeSelector: v.optional(v.pipe(v.array(TermSchema), v.minLength(1, 'must list at least one term, or be left out (every machine)'))),
  labels: v.optional(v.record(v.string(), v.string())),
  annotations: v.optional(v.record(v.string(), v.string())),
  taints: v.optional(v.array(TaintSchema)),
});
export type RawNodeRule = v.InferOutput<typeof RuleSchema>;

export const NodeRulesSchema = v.array(RuleSchema);

/** The valid rules of a section that failed its schema; an invalid rule is a null hole, so later indexes keep their paths. */
export function salvageNodeRules(input: unknown): (RawNodeRule | null)[] | undefined {
  if (!Array.isArray(input)) return undefined;
  return input.map((rule) => validOrUndefined(RuleSchema, rule) ?? null);
}
