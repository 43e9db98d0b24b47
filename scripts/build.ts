/**
 * Builds the single-file executables (scripts/compile.ts). Usage: bun scripts/build.ts [--target host|all]
 *   host (default): dist/edge-ccm and dist/edge-ccm-linux-amd64 (same file)
 *   all:            also dist/edge-ccm-linux-arm64, cross-compiled offline from the aarch64
 *                   runtime of the same Bun version (npm package @oven/bun-linux-aarch64,
 *                   fetched once into the cache by scripts/fetch-bun-runtime.sh, which checks it
 *                   against the sha512 pinned in scripts/lib.sh).
 */
import { $ } from 'bun';
import { copyFileSync, existsSync, mkdirSync, renameSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { compileExecutable } from './compile.ts';

const root = resolve(import.meta.dir, '..');
const dist = join(root, 'dist');
const target = process.argv.includes('--target') ? process.argv[process.argv.indexOf('--target') + 1] : 'host';
if (target !== 'host' && target !== 'all') {
  console.error(`--target must be host or all (got ${target})`);
  process.exit(2);
}
const compile = (outfile: string, compileTarget: Bun.Build.CompileTarget, executablePath?: string) =>
  compileExecutable(join(root, 'src/main.ts'), outfile, compileTarget, executablePath);

mkdirSync(dist, { recursive: true });
const hostOut = join(dist, 'edge-ccm-linux-amd64');
await compile(hostOut, 'bun-linux-x64');
copyFileSync(hostOut, join(dist, 'edge-ccm.tmp'));
renameSync(join(dist, 'edge-ccm.tmp'), join(dist, 'edge-ccm'));

if (target === 'all') {
  const runtime = (await $`bash ${join(root, 'scripts/fetch-bun-runtime.sh')} linux-aarch64`.text()).trim();
  if (!existsSync(runtime)) throw new Error(`aarch64 runtime missing at ${runtime}`);
  await compile(join(dist, 'edge-ccm-linux-arm64'), 'bun-linux-arm64', runtime);
}
