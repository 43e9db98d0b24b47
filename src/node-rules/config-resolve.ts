import { EDGE_CCM_NODE_ANNOTATION_PREFIX, LABEL_FACT_PREFIX, taintId, type NodeRuleEffects } from '../cloud/node-rules.ts';
import type { ConfigPath, ReportIssue } from '../config-file/issues.ts';
import { NODE_ROLE_PREFIX, isReservedForRules, labelKeyError, labelValueError } from '../kube/labels.ts';
import { didYouMean } from '../util/did-you-mean.ts';
import type { RawNodeRule, RawTerm } from './config-schema.ts';
import type { NodeRule } from './model.ts';
import { compileSelector, type Requirement } from './selector.ts';

/**
 * Second pass over `nodeRules`: the facts each selector names must be ones the provider gives,
 * every key is checked as the API server checks it, the reserved namespaces are refused except
 * node-role.kubernetes.io (NodeRestriction keeps kubelets from setting it, so a controller is
 * where it comes from), and rule names are unique. Each problem is reported with its path.
 */

/** The facts a provider gives, for selectors (src/cloud/node-rules.ts lists the common ones). */
export interface FactVocabulary {
  /** Its provider's name, for messages. */
  provider: string;
  keys: readonly string[];
  /** Whether it has inventory labels (`label:KEY`, matchLabels). */
  labels: boolean;
}

const VALUELESS = new Set(['Exists', 'DoesNotExist']);

export function resolveNodeRules(raw: readonly (RawNodeRule | null)[] | undefined, facts: FactVocabulary, report: ReportIssue): NodeRule[] {
  const rules: NodeRule[] = [];
  const names = new Map<string, number>();
  (raw ?? []).forEach((rule, index) => {
    if (!rule) return; // a shape error, already reported
    const path: ConfigPath = ['nodeRules', index];
    const first = names.get(rule.name);
    if (first !== undefined) report([...path, 'name'], `duplicate rule name ${JSON.stringify(rule.name)} (also nodeRules[${first}])`);
    else names.set(rule.name, index);
    const terms = rule.nodeSelector?.map((term, t) => requirements(term, [...path, 'nodeSelector', t], facts, report));
    const effects = resolveEffects(rule, path, report);
    if (!terms || terms.every((t) => t !== undefined)) {
      rules.push({ name: rule.name, index, matches: compileSelector(terms as Requirement[][] | undefined), effects });
    }
  });
  return rules;
}

/** A term's requirements (matchLabels as `label:KEY In [VALUE]`); undefined when one is invalid. */
function requirements(term: RawTerm, path: ConfigPath, facts: FactVocabulary, report: ReportIssue): Requirement[] | undefined {
  const out: Requirement[] = [];
  let ok = true;
  const fail = (at: ConfigPath, message: string) => ((ok = false), report(at, message));
  if (term.matchLabels !== undefined && !facts.labels) fail([...path, 'matchLabels'], `the ${facts.provider} provider has no inventory labels to match`);
  for (const [key, value] of Object.entries(term.matchLabels ?? {})) {
    const problem = labelKeyError(key) ?? labelValueError(value);
    if (problem !== undefined) fail([...path, 'matchLabels', key], `label ${JSON.stringify(key)}: ${problem}`);
    out.push({ key: LABEL_FACT_PREFIX + key, operator: 'In', values: [value] });
  }
  (term.matchExpressions ?? []).forEach((e, i) => {
    const at = [...path, 'matchExpressions', i];
    const keyProblem = factKeyError(e.key, facts);
    if (keyProblem !== undefined) fail([...at, 'key'], keyProblem);
    const values = e.values ?? [];
    if (VALUELESS.has(e.operator) && values.length > 0) fail([...at, 'values'], `must be left out with operator ${e.operator}`);
    if (!VALUELESS.has(e.operator) && values.length === 0) fail([...at, 'values'], `must list at least one value with operator ${e.operator}`);
    if (e.operator === 'Regexp') {
      values.forEach((pattern, j) => {
        try {
          new RegExp(pattern);
        } catch (err) {
          fail([...at, 'values', j], `invalid regular expression: ${(err as Error).message.replace(/^invalid regular expression: /i, '')}`);
        }
      });
    }
    out.push({ key: e.key, operator: e.operator, values });
  });
  if (out.length === 0) fail(path, 'a term must have at least one requirement (matchExpressions or matchLabels); leave nodeSelector out to select every machine');
  return ok ? out : undefined;
}

function factKeyError(key: string, facts: FactVocabulary): string | undefined {
  if (key.startsWith(LABEL_FACT_PREFIX)) {
    if (!facts.labels) return `the ${facts.provider} provider has no inventory labels to match (${JSON.stringify(key)})`;
    const problem = labelKeyError(key.slice(LABEL_FACT_PREFIX.length));
    return problem === undefined ? undefined : `invalid label key in ${JSON.stringify(key)}: ${problem}`;
  }
  if (facts.keys.includes(key)) return undefined;
  const known = [...facts.keys, ...(facts.labels ? [`${LABEL_FACT_PREFIX}KEY`] : [])];
  return `unknown fact ${JSON.stringify(key)}${didYouMean(key, facts.keys)}: the ${facts.provider} provider knows ${known.join(', ')}`;
}

function resolveEffects(rule: RawNodeRule, path: ConfigPath, report: ReportIssue): NodeRuleEffects {
  const labels: Record<string, string> = {};
  for (const [key, value] of Object.entries(rule.labels ?? {})) {
    const at = [...path, 'labels', key];
    const problem = writableKeyError(key, 'label') ?? valueError(value, 'label');
    if (problem !== undefined) report(at, problem);
    else labels[key] = value;
  }
  const annotations: Record<string, string> = {};
  for (const [key, value] of Object.entries(rule.annotations ?? {})) {
    const at = [...path, 'annotations', key];
    const problem = writableKeyError(key, 'annotation') ??
      (key.startsWith(EDGE_CCM_NODE_ANNOTATION_PREFIX) ? `annotation key ${JSON.stringify(key)}: ${EDGE_CCM_NODE_ANNOTATION_PREFIX} is where the node controller records what it set; no rule may write there` : undefined);
    if (problem !== undefined) report(at, problem);
    else annotations[key] = value;
  }
  const taints: NodeRuleEffects['taints'] = [];
  const seen = new Map<string, number>();
  (rule.taints ?? []).forEach((t, i) => {
    const at = [...path, 'taints', i];
    const value = t.value ?? '';
    const problem = writableKeyError(t.key, 'taint') ?? valueError(value, 'taint');
    if (problem !== undefined) return report(at, problem);
    const id = taintId(t);
    const first = seen.get(id);
    if (first !== undefined) return report(at, `taint ${id} is given twice in this rule (also taints[${first}]): a node holds one taint per key and effect`);
    seen.set(id, i);
    taints.push({ key: t.key, value, effect: t.effect });
  });
  if (!rule.labels && !rule.annotations && !rule.taints) report(path, 'the rule applies nothing: give labels, annotations or taints');
  return { labels, annotations, taints };
}

/** Why a rule may not write `key` as a label, annotation or taint key; undefined when it may. */
export function writableKeyError(key: string, kind: 'label' | 'annotation' | 'taint'): string | undefined {
  const problem = labelKeyError(key);
  if (problem !== undefined) return `invalid ${kind} key ${JSON.stringify(key)}: ${problem}`;
  if (isReservedForRules(key)) {
    return `${kind} key ${JSON.stringify(key)} is in a namespace Kubernetes reserves (kubernetes.io, k8s.io and their subdomains); of those, rules may set only ${NODE_ROLE_PREFIX}*`;
  }
  return undefined;
}

function valueError(value: string, kind: 'label' | 'taint'): string | undefined {
  const problem = labelValueError(value);
  return problem === undefined ? undefined : `invalid ${kind} value ${JSON.stringify(value)}: ${problem}`;
}
