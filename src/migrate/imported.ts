import * as v from 'valibot';
import { stringify } from 'yaml';
import { LoadBalancerSchema } from '../lb/config-schema.ts';
import { resolveLoadBalancer } from '../lb/config-resolve.ts';
import type { Compatibility } from '../lb/compatibility.ts';

/**
 * What `edge-ccm import` makes of another address manager's pools: the equivalent
 * `loadBalancer` section, and every feature that has no equivalent, named with the object and
 * field it came from (a pool's L2/BGP announcement, a namespace label selector, ...), so
 * nothing is dropped silently. The section is checked by the same validator the daemon uses.
 */

/** A `loadBalancer.pools[]` entry as written to the file. */
export interface ImportedPool {
  name: string;
  addresses: string[];
  exclude?: string[];
  namespaces?: string[];
  serviceSelector?: string;
  priority?: number;
  autoAssign?: boolean;
  includeNetworkAndBroadcast?: boolean;
}

export interface ImportResult {
  source: Compatibility;
  pools: ImportedPool[];
  /** One line per feature that was not converted: "WHERE: WHAT (what to do instead)". */
  unmapped: string[];
}

/** A Kubernetes object as read from the API or a manifest file. */
export interface ManifestObject {
  apiVersion?: string;
  kind?: string;
  metadata?: { name?: string; namespace?: string };
  spec?: Record<string, unknown>;
  data?: Record<string, string>;
}

export const objectName = (o: ManifestObject): string => `${o.kind ?? 'object'} ${o.metadata?.namespace ? `${o.metadata.namespace}/` : ''}${o.metadata?.name ?? '(unnamed)'}`;

/** The section as the config file holds it: compatibility on, so the services' annotations keep working. */
export function importedSection(result: ImportResult): { loadBalancer: Record<string, unknown> } {
  return { loadBalancer: { compatibility: [result.source], pools: result.pools.map(withoutUndefined) } };
}

/** The problems our validator finds in the section (e.g. overlapping pools, which the source allowed). */
export function checkImported(result: ImportResult): string[] {
  const section = importedSection(result).loadBalancer;
  const parsed = v.safeParse(LoadBalancerSchema, section);
  if (!parsed.success) return parsed.issues.map((i) => `loadBalancer${(i.path ?? []).map((p) => (typeof p.key === 'number' ? `[${p.key}]` : `.${String(p.key)}`)).join('')}: ${i.message}`);
  const problems: string[] = [];
  resolveLoadBalancer(parsed.output, (path, message) => problems.push(`${formatPath(path)}: ${message}`));
  return problems;
}

/** The text to write: a comment naming the source and every unconverted feature, then the section. */
export function renderImported(result: ImportResult, from: string): string {
  const lines = [`# edge-ccm import ${result.source}: ${result.pools.length} pool${result.pools.length === 1 ? '' : 's'} from ${from}.`];
  if (result.unmapped.length) {
    lines.push('# Not converted (nothing equivalent in edge-ccm, or to be set up apart; see docs/migrating.md):');
    for (const u of result.unmapped) lines.push(`#   - ${u}`);
  } else {
    lines.push('# Every feature in use was converted.');
  }
  return `${lines.join('\n')}\n${stringify(importedSection(result), { lineWidth: 0 })}`;
}

/**
 * A LabelSelector (matchLabels, matchExpressions) as edge-ccm's selector text. `special` maps
 * keys that are not labels (Cilium's io.kubernetes.service.namespace) to a handler that takes
 * the requirement instead; what cannot be written is added to `unmapped`.
 */
export function selectorText(
  selector: unknown,
  where: string,
  unmapped: string[],
  special: Record<string, (op: string, values: string[]) => boolean> = {},
): string | undefined {
  if (!selector || typeof selector !== 'object') return undefined;
  const s = selector as { matchLabels?: Record<string, string>; matchExpressions?: { key: string; operator: string; values?: string[] }[] };
  const parts: string[] = [];
  const requirement = (key: string, op: string, values: string[]) => {
    if (special[key]?.(op, values)) return;
    switch (op) {
      case 'In': return void parts.push(values.length === 1 ? `${key}=${values[0]}` : `${key} in (${values.join(',')})`);
      case 'NotIn': return void parts.push(`${key} notin (${values.join(',')})`);
      case 'Exists': return void parts.push(key);
      case 'DoesNotExist': return void parts.push(`!${key}`);
      default: unmapped.push(`${where}: operator ${op} on ${key} (not a label selector operator)`);
    }
  };
  for (const [k, value] of Object.entries(s.matchLabels ?? {})) requirement(k, 'In', [value]);
  for (const e of s.matchExpressions ?? []) requirement(e.key, e.operator, e.values ?? []);
  return parts.length ? parts.join(',') : undefined;
}

/** A name our pools accept: the source's, with anything else replaced by "-". */
export function poolName(name: string): string {
  const cleaned = name.replace(/[^A-Za-z0-9_.-]/g, '-').replace(/^[^A-Za-z0-9]+|[^A-Za-z0-9]+$/g, '').slice(0, 63);
  return cleaned || 'imported';
}

function formatPath(path: (string | number)[]): string {
  return path.map((p, i) => (typeof p === 'number' ? `[${p}]` : i === 0 ? p : `.${p}`)).join('');
}

function withoutUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, x]) => x !== undefined)) as Partial<T>;
}
