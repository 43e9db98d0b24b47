import { expect, test } from 'bun:test';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';

/**
 * The speaker knows packets and sessions, nothing of Kubernetes (docs/networking/bgp.md): its
 * files import only each other, src/net, the logger interface and the runtime.
 */
const ROOT = resolve(import.meta.dir, '..');
const DIR = join(ROOT, 'src', 'net', 'bgp');

test('src/net/bgp imports nothing of Kubernetes, the controllers or the providers', () => {
  const bad: string[] = [];
  for (const file of readdirSync(DIR).filter((f) => f.endsWith('.ts') && !f.endsWith('.test.ts'))) {
    const text = readFileSync(join(DIR, file), 'utf8');
    for (const m of text.matchAll(/^\s*(?:import|export)\b[^'"]*?from\s+['"]([^'"]+)['"]/gm)) {
      const spec = m[1]!;
      if (spec === 'bun' || spec === 'bun:ffi' || spec.startsWith('node:')) continue;
      const target = spec.startsWith('.') ? relative(ROOT, resolve(DIR, spec)) : spec;
      if (target.startsWith('src/net/') || target === 'src/log.ts') continue;
      bad.push(`${file}: ${spec}`);
    }
  }
  expect(bad).toEqual([]);
});
