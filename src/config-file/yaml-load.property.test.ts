import { describe, expect, test } from 'bun:test';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { parse, stringify } from 'yaml';
import { loadProxmoxConfig } from '../../providers/proxmox/config-load.ts';
import type { SecretSource } from './secrets.ts';
import type { ConfigLoadResult } from './yaml-load.ts';
import { loadStaticConfig } from '../../providers/static/config-load.ts';

/**
 * The config parsers under random mutations of valid files (the shipped examples): a value
 * replaced by junk, a key removed or misspelt, an item duplicated, the text cut or garbled.
 * Whatever comes in, loading never throws, and a rejected file says where: every error has a
 * line, a message, and (for a file that is valid YAML) a path into the document.
 */

const EXAMPLES = join(import.meta.dir, '../../examples');
/** Every file the examples name reads as a credential; the variable systemd would set is set. */
const SECRETS: SecretSource = {
  readFile: () => 'secret-or-pem',
  permissions: () => ({ mode: 0o600, groupIsOwn: true }),
  env: (name) => (name === 'CREDENTIALS_DIRECTORY' ? '/run/credentials/edge-ccm.service' : undefined),
};

const PARSERS: { name: string; text: string; load: (text: string) => ConfigLoadResult<unknown> }[] = [
  { name: 'static', text: readFileSync(join(EXAMPLES, 'inventory.yaml'), 'utf8'), load: (t) => loadStaticConfig(t, SECRETS) },
  { name: 'proxmox', text: readFileSync(join(EXAMPLES, 'proxmox.yaml'), 'utf8'), load: (t) => loadProxmoxConfig(t, SECRETS) },
];

const junkArb = fc.oneof(
  fc.string({ maxLength: 20 }),
  fc.integer(),
  fc.double(),
  fc.boolean(),
  fc.constant(null),
  fc.constantFrom('', ' ', '0.0.0.0/0', '::', '192.0.2.7/33', 'http://user:pass@h', '${CREDENTIALS_DIRECTORY}/x', '-1', 'x'.repeat(5000), '\u0000', 'ünïcödé'),
  fc.array(fc.oneof(fc.string({ maxLength: 5 }), fc.integer()), { maxLength: 3 }),
  fc.dictionary(fc.string({ maxLength: 6 }), fc.string({ maxLength: 6 }), { maxKeys: 2 }),
);

type Mutation =
  | { kind: 'replace'; at: number; value: unknown }
  | { kind: 'delete'; at: number }
  | { kind: 'rename'; at: number; suffix: string }
  | { kind: 'duplicate'; at: number };

const mutationArb: fc.Arbitrary<Mutation> = fc.oneof(
  fc.record({ kind: fc.constant('replace' as const), at: fc.nat(), value: junkArb }),
  fc.record({ kind: fc.constant('delete' as const), at: fc.nat() }),
  fc.record({ kind: fc.constant('rename' as const), at: fc.nat(), suffix: fc.constantFrom('x', 'S', '_') }),
  fc.record({ kind: fc.constant('duplicate' as const), at: fc.nat() }),
);

type Node = Record<string, unknown> | unknown[];
/** Every (container, key) pair in the document, depth first. */
function slots(doc: unknown): [Node, string | number][] {
  const out: [Node, string | number][] = [];
  const walk = (v: unknown) => {
    if (Array.isArray(v)) v.forEach((x, i) => (out.push([v, i]), walk(x)));
    else if (v && typeof v === 'object') for (const [k, x] of Object.entries(v)) (out.push([v as Node, k]), walk(x));
  };
  walk(doc);
  return out;
}

function mutate(doc: unknown, m: Mutation): void {
  const all = slots(doc);
  if (!all.length) return;
  const [container, key] = all[m.at % all.length]!;
  const c = container as Record<string | number, unknown>;
  switch (m.kind) {
    case 'replace':
      c[key] = m.value;
      break;
    case 'delete':
      if (Array.isArray(container)) container.splice(key as number, 1);
      else delete c[key];
      break;
    case 'rename':
      if (Array.isArray(container)) container.splice(key as number, 0, container[key as number]);
      else {
        c[`${String(key)}${m.suffix}`] = c[key];
        delete c[key];
      }
      break;
    case 'duplicate':
      if (Array.isArray(container)) container.push(structuredClone(container[key as number]));
      else c[key] = structuredClone(c[key]);
      break;
  }
}

function checkResult(r: ConfigLoadResult<unknown>, pathRequired: boolean): void {
  if (r.ok) return;
  expect(r.errors.length).toBeGreaterThan(0);
  for (const e of r.errors) {
    expect(typeof e.message === 'string' && e.message.length > 0).toBe(true);
    expect(Number.isInteger(e.line) && e.line >= 1).toBe(true);
    if (pathRequired) expect(e.path, `error without a path: ${JSON.stringify(e)}`).not.toBe('');
  }
}

describe.each(PARSERS)('$name config parser', ({ text, load }) => {
  test('the base file is valid', () => {
    const r = load(text);
    expect(r.ok ? [] : r.errors).toEqual([]);
  });

  test('structural mutations: never a crash, every error with a line and a path', () => {
    fc.assert(fc.property(fc.array(mutationArb, { minLength: 1, maxLength: 4 }), (mutations) => {
      const doc = parse(text) as unknown;
      for (const m of mutations) mutate(doc, m);
      checkResult(load(stringify(doc)), true);
    }), { numRuns: 500 });
  });

  test('textual damage (cut, garbled, a line repeated): never a crash, every error with a line', () => {
    const damageArb = fc.oneof(
      fc.nat().map((n) => (t: string) => t.slice(0, n % (t.length + 1))),
      fc.tuple(fc.nat(), fc.constantFrom(':', '-', '[', '{', '"', "'", '\t', '&a', '*a', '!!binary', '\n  ', '#')).map(([n, s]) => (t: string) => t.slice(0, n % (t.length + 1)) + s + t.slice(n % (t.length + 1))),
      fc.nat().map((n) => (t: string) => {
        const lines = t.split('\n');
        const i = n % lines.length;
        return [...lines.slice(0, i + 1), lines[i], ...lines.slice(i + 1)].join('\n');
      }),
    );
    fc.assert(fc.property(fc.array(damageArb, { minLength: 1, maxLength: 3 }), (damages) => {
      checkResult(load(damages.reduce((t, d) => d(t), text)), false);
    }), { numRuns: 500 });
  });
});
