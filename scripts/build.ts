/**
 * Builds the single-file executables with Bun.build's `compile` (not the CLI: the plugins of
 * scripts/build-plugins.ts). Usage: bun scripts/build.ts [--target host|all]
 *   host (default): dist/edge-ccm and dist/edge-ccm-linux-amd64 (same file)
 *   all:            also dist/edge-ccm-linux-arm64, cross-compiled offline from the aarch64
 *                   runtime of the same Bun version (npm package @oven/bun-linux-aarch64,
 *                   fetched once into the cache by scripts/fetch-bun-runtime.sh, which checks it
 *                   against the sha512 pinned in scripts/lib.sh).
 */
import { $ } from 'bun';
import { copyFileSync, existsSync, mkdirSync, renameSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import pkg from '../package.json' with { type: 'json' };
import { BUILD_PLUGINS } from './build-plugins.ts';

const root = resolve(import.meta.dir, '..');
const dist = join(root, 'dist');
const target = process.argv.includes('--target') ? process.argv[process.argv.indexOf('--target') + 1] : 'host';
if (target !== 'host' && target !== 'all') {
  console.error(`--target must be host or all (got ${target})`);
  process.exit(2);
}

const commit = (await $`git -C ${root} rev-parse --short=12 HEAD`.quiet().nothrow()).stdout.toString().trim() || 'unknown';
const dirty = (await $`git -C ${root} status --porcelain --untracked-files=no`.quiet().nothrow()).stdout.toString().trim() ? '-dirty' : '';

/**
 * Writes to a temporary name and renames over the target: a binary that is running (a test, the
 * demo) cannot be overwritten in place (ETXTBSY), but it can be replaced.
 */
async function compile(target: string, compileTarget: Bun.Build.CompileTarget, executablePath?: string): Promise<void> {
  const started = performance.now();
  const outfile = `${target}.tmp-${process.pid}`;
  const result = await Bun.build({
    entrypoints: [join(root, 'src/main.ts')],
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
      EDGE_CCM_COMMIT: JSON.stringify(commit + dirty),
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
