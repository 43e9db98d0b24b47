/**
 * Kubernetes label selectors (`a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x)`, `a`, `!a`),
 * parsed once into a predicate. Used for node ownership and load-balancer pool scoping.
 */
import { labelKeyError, labelValueError } from './labels.ts';

export type LabelPredicate = (labels: Record<string, string> | undefined) => boolean;

type Requirement =
  | { key: string; op: 'in' | 'notin'; values: string[] }
  | { key: string; op: 'exists' | 'notexists' };


/** Parses a selector; throws an Error naming the bad part. The empty selector matches everything. */
export function parseLabelSelector(selector: string): LabelPredicate {
  const reqs = splitTopLevel(selector).map(parseRequirement);
  return (labels) => reqs.every((r) => matches(r, labels ?? {}));
}

function splitTopLevel(s: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let cur = '';
  for (const ch of s) {
    if (ch === '(') depth++;
    if (ch === ')') depth--;
    if (ch === ',' && depth === 0) {
      parts.push(cur);
      cur = '';
    } else cur += ch;
  }
  parts.push(cur);
  return parts.map((p) => p.trim()).filter((p) => p !== '');
}

function checkKey(key: string, part: string): string {
  if (labelKeyError(key) !== undefined) throw new Error(`invalid label key ${JSON.stringify(key)} in ${JSON.stringify(part)}`);
  return key;
}
function checkValue(value: string, part: string): string {
  if (labelValueError(value) !== undefined) throw new Error(`invalid label value ${JSON.stringify(value)} in ${JSON.stringify(part)}`);
  return value;
}

function parseRequirement(part: string): Requirement {
  const set = /^(\S+)\s+(in|notin)\s*\(([^)]*)\)$/.exec(part);
  if (set) {
    const values = set[3]!.split(',').map((v) => checkValue(v.trim(), part));
    return { key: checkKey(set[1]!, part), op: set[2] as 'in' | 'notin', values };
  }
  const cmp = /^([^!=\s]+)\s*(==|!=|=)\s*(.*)$/.exec(part);
  if (cmp) {
    const value = checkValue(cmp[3]!, part);
    return { key: checkKey(cmp[1]!, part), op: cmp[2] === '!=' ? 'notin' : 'in', values: [value] };
  }
  if (part.startsWith('!')) return { key: checkKey(part.slice(1).trim(), part), op: 'notexists' };
  return { key: checkKey(part, part), op: 'exists' };
}

function matches(r: Requirement, labels: Record<string, string>): boolean {
  const has = Object.hasOwn(labels, r.key);
  switch (r.op) {
    case 'exists': return has;
    case 'notexists': return !has;
    case 'in': return has && r.values.includes(labels[r.key]!);
    case 'notin': return !has || !r.values.includes(labels[r.key]!);
  }
}
