import { LABEL_FACT_PREFIX, TAGS_FACT, type NodeFacts } from '../cloud/node-rules.ts';
import { globToRegExp } from '../util/glob.ts';
import type { SelectorOperator } from './config-schema.ts';

/**
 * A rule's nodeSelector as a predicate over a machine's facts: any term (OR), every requirement
 * of a term (AND). A fact is a list of values: one for a single-valued fact, none when it is
 * absent or empty, a VM's tags for `tags`. In and Glob and Regexp hold when some value matches
 * some given value; NotIn when none does (so an absent fact is NotIn anything, as in Kubernetes
 * selectors); Exists when there is a value. Regexp is unanchored (as Talos's Go MatchString).
 */

export interface Requirement {
  key: string;
  operator: SelectorOperator;
  values: readonly string[];
}

export type FactPredicate = (facts: NodeFacts) => boolean;

/** The values of one fact of a machine. */
export function factValues(facts: NodeFacts, key: string): readonly string[] {
  if (key === TAGS_FACT) return facts.tags ?? [];
  const value = key.startsWith(LABEL_FACT_PREFIX) ? facts.labels?.[key.slice(LABEL_FACT_PREFIX.length)] : facts.values[key];
  return value === undefined || value === '' ? [] : [value];
}

/** Compiles one requirement; throws a SyntaxError for a regular expression that does not compile (config validation reports it first). */
export function compileRequirement(r: Requirement): FactPredicate {
  const test = valueTest(r);
  switch (r.operator) {
    case 'Exists':
      return (facts) => factValues(facts, r.key).length > 0;
    case 'DoesNotExist':
      return (facts) => factValues(facts, r.key).length === 0;
    case 'NotIn':
      return (facts) => !factValues(facts, r.key).some(test);
    default:
      return (facts) => factValues(facts, r.key).some(test);
  }
}

function valueTest(r: Requirement): (value: string) => boolean {
  if (r.operator === 'Glob' || r.operator === 'Regexp') {
    const patterns = r.values.map((p) => (r.operator === 'Glob' ? globToRegExp(p) : new RegExp(p)));
    return (value) => patterns.some((p) => p.test(value));
  }
  const set = new Set(r.values);
  return (value) => set.has(value);
}

/** Terms of requirements: any term whose every requirement holds. No terms: every machine. */
export function compileSelector(terms: readonly (readonly Requirement[])[] | undefined): FactPredicate {
  if (terms === undefined) return () => true;
  const compiled = terms.map((term) => term.map(compileRequirement));
  return (facts) => compiled.some((term) => term.every((holds) => holds(facts)));
}
