/**
 * How every edge-ccm executable is compiled: Bun.build's `compile` (not the CLI: the plugins of
 * scripts/build-plugins.ts), minified, with bytecode, one chunk per dynamically imported
 * subcommand. scripts/build.ts builds dist/ with it; the benches build their variants of edge-ccm
 * (bench/edge-fake-main.ts) and their floors with it, so that what they measure is compiled as
 * what ships:
 *
 *   bun scripts/compile.ts ENTRY OUTFILE
 */
import { $ } from 'bun';
import { renameSync, statSync } from 'node:fs';
import { resolve } from 'node:path';
import pkg from '../package.json' with { type: 'json' };
import { BUILD_PLUGINS } from './build-plugins.ts';

const root = resolve(import.meta.dir, '..');

async function builtFrom(): Promise<string> {
  const commit = (await $`git -C ${root} rev-parse --short=12 HEAD`.quiet().nothrow()).stdout.toString().trim() || 'unknown';
  const dirty = (await $`git -C ${root} status --porcelain --untracked-files=no`.quiet().nothrow()).stdout.toString().trim() ? '-dirty' : '';
  return commit + dirty;
}

/**
 * Writes to a temporary name and renames over the target: a binary that is running (a test, the
 * demo) cannot be overwritten in place (ETXTBSY), but it can be replaced.
 */
export async function compileExecutable(entry: string, target: string, compileTarget: Bun.Build.CompileTarget = 'bun-linux-x64', executablePath?: string): Promise<void> {
  const started = performance.now();
  const outfile = `${target}.tmp-${process.pid}`;
  const result = await Bun.build({
    entrypoints: [resolve(entry)],
    format: 'esm',
    minify: true,
    bytecode: true,
    // One chunk per dynamically imported subcommand (src/cmd/cli.ts), so `speaker` and `vip` do not
    // parse and evaluate the controllers and providers (BENCHMARKS.md, footprint).
    splitting: true,
    sourcemap: 'none',
    plugins: BUILD_PLUGINS,
    define: {
      EDGE_CCM_VERSION: JSON.stringify(pkg.version),
      EDGE_CCM_COMMIT: JSON.stringify(await builtFrom()),
    },
    compile: {
      target: compileTarget,
      outfile,
      ...(executablePath ? { executablePath } : {}),
      // A compiled binary would otherwise read .env and bunfig.toml from its working directory:
      // a CCM's behaviour must come from its flags and config only.
      autoloadDotenv: false,
      autoloadBunfig: false,
      autoloadTsconfig: false,
      autoloadPackageJson: false,
    },
  });
  if (!result.success) {
    for (const log of result.logs) console.error(log);
    process.exit(1);
  }
  renameSync(outfile, target);
  const mb = (statSync(target).size / 1024 / 1024).toFixed(1);
  console.log(`built ${target} (${mb} MiB) in ${((performance.now() - started) / 1000).toFixed(1)}s`);
}

if (import.meta.main) {
  const [entry, target] = process.argv.slice(2);
  if (!entry || !target) {
    console.error('usage: bun scripts/compile.ts ENTRY OUTFILE');
    process.exit(2);
  }
  await compileExecutable(entry, target);
}
