import { describe, expect, test } from 'bun:test';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { StaticConfigSchema } from '../providers/static/config-schema.ts';
import { ProxmoxConfigSchema } from '../providers/proxmox/config-schema.ts';

/**
 * The docs that restate the code, held to it (issue 26: they had drifted). docs/flags.md is
 * generated from the flag table and checked by src/options/help.test.ts ("docs/flags.md is up to
 * date"); here: every key of each provider's config file has a row in its config table, and
 * every resource the shipped RBAC grants is in docs/install.md's tables, with its verbs.
 */
const root = join(import.meta.dir, '..');
const read = (path: string) => readFileSync(join(root, path), 'utf8');

/** The schema tree as valibot builds it (see src/config-file/yaml-load.ts). */
interface SchemaNode { entries?: Record<string, SchemaNode>; wrapped?: SchemaNode; item?: SchemaNode; value?: SchemaNode; options?: SchemaNode[] }

/** Every key path of a schema: array items as "[]", a record's values (names the file chooses) as "*". */
function keyPaths(node: SchemaNode | undefined, path: string[] = [], out: string[][] = []): string[][] {
  if (!node) return out;
  if (node.wrapped) return keyPaths(node.wrapped, path, out);
  for (const [key, child] of Object.entries(node.entries ?? {})) {
    out.push([...path, key]);
    keyPaths(child, [...path, key], out);
  }
  if (node.item) keyPaths(node.item, [...path, '[]'], out);
  if (node.value) keyPaths(node.value, [...path, '*'], out);
  for (const option of node.options ?? []) keyPaths(option, path, out);
  return out;
}

/**
 * The key names a doc's tables document: every segment of each `code` span in a row's first cell
 * (`peers[].connectRetry.minSeconds`), and the keys of a `{ key, key: value }` span in any cell.
 */
function documentedKeys(markdown: string): Set<string> {
  const keys = new Set<string>();
  for (const line of markdown.split('\n')) {
    const first = /^\|([^|]*)\|/.exec(line)?.[1];
    if (!first) continue;
    for (const [, code] of first.matchAll(/`([^`]+)`/g)) for (const segment of code!.split(/[.\[\]\s,:{}]+/)) if (segment) keys.add(segment);
    for (const [, object] of line.matchAll(/`[^`{]*\{([^`}]*)\}/g)) for (const [, key] of object!.matchAll(/([A-Za-z][A-Za-z0-9]*)\s*(?=[:,]|$)/g)) keys.add(key!);
  }
  return keys;
}

/** The keys of `schema` under the sections `sections` that no table row of `doc` names. */
function undocumented(schema: unknown, sections: string[], doc: string): string[] {
  const keys = documentedKeys(read(doc));
  return keyPaths(schema as SchemaNode)
    .filter((path) => sections.includes(path[0]!) && path.length > 1)
    .filter((path) => !keys.has(path.at(-1)!))
    .map((path) => path.join('.'));
}

describe('config tables name every key of the schema', () => {
  test('static provider: inventory and loadBalancer in docs/providers/static.md', () => {
    expect(undocumented(StaticConfigSchema, ['inventory', 'loadBalancer'], 'docs/providers/static.md')).toEqual([]);
  });
  test('the bgp section (every provider) in docs/networking/bgp.md', () => {
    expect(undocumented(StaticConfigSchema, ['bgp'], 'docs/networking/bgp.md')).toEqual([]);
  });
  test('the controlPlaneEndpoint section (every provider) in docs/networking/control-plane-vip.md', () => {
    expect(undocumented(StaticConfigSchema, ['controlPlaneEndpoint'], 'docs/networking/control-plane-vip.md')).toEqual([]);
  });
  test('the nodeRules section (every provider) in docs/operations.md', () => {
    expect(undocumented(StaticConfigSchema, ['nodeRules'], 'docs/operations.md')).toEqual([]);
    expect(undocumented(ProxmoxConfigSchema, ['nodeRules'], 'docs/operations.md')).toEqual([]);
  });
  test('proxmox provider: its own sections in docs/providers/proxmox.md', () => {
    const own = Object.keys((ProxmoxConfigSchema as unknown as SchemaNode).entries ?? {}).filter((k) => k !== 'loadBalancer' && k !== 'bgp' && k !== 'nodeRules' && k !== 'controlPlaneEndpoint');
    expect(undocumented(ProxmoxConfigSchema, own, 'docs/providers/proxmox.md')).toEqual([]);
  });
  test('the check can fail: a key no table names is reported', () => {
    const schema = { entries: { inventory: { entries: { surelyNotDocumentedKey: {} } } } };
    expect(undocumented(schema, ['inventory'], 'docs/providers/static.md')).toEqual(['inventory.surelyNotDocumentedKey']);
  });
});

interface Rule { apiGroups?: string[]; resources?: string[]; verbs?: string[] }

describe('docs/install.md names every resource the shipped RBAC grants', () => {
  const grants = parseAllDocs(read('deploy/kubernetes/rbac.yaml'))
    .filter((o) => o?.kind === 'ClusterRole' || o?.kind === 'Role')
    .flatMap((o) => (o.rules ?? []) as Rule[]);
  const install = read('docs/install.md');
  const objectsTable = install.split('\n').filter((l) => l.startsWith('| ClusterRole `system:edge-ccm`') || l.startsWith('| Role `kube-system/edge-ccm:leader-election`')).join('\n');
  const seedTable = install.slice(install.indexOf('| Seed rule |'));

  test.each(grants.flatMap((rule) => (rule.resources ?? []).map((resource) => [resource, rule.verbs ?? []] as const)))('%s', (resource, verbs) => {
    const name = resource.split('/')[0]!;
    // The objects table: the resource (plural, as RBAC spells it) with each verb granted.
    expect(objectsTable.includes(`\`${name}`), `docs/install.md's objects table does not name ${resource}`).toBe(true);
    for (const verb of verbs) expect(new RegExp(`\\b${verb}\\b`).test(objectsTable), `docs/install.md's objects table does not grant ${verb} on ${resource}`).toBe(true);
    // The table of differences from the seed role: every resource has its row and its why.
    const row = seedTable.split('\n').some((line) => line.startsWith('| ') && new RegExp(`\`${name}[\`/]`).test(line.split('|').slice(0, 3).join('|')));
    expect(row, `docs/install.md's seed-role table has no row for ${resource}`).toBe(true);
  });
});

function parseAllDocs(text: string): { kind?: string; rules?: unknown[] }[] {
  return text.split(/^---$/m).map((part) => parse(part) as { kind?: string; rules?: unknown[] }).filter(Boolean);
}
