import { afterEach, expect, test } from 'bun:test';
import { createHash } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

/**
 * The Bun tarballs the scripts install (the host's Bun, the aarch64 runtime for the arm64 build)
 * are checked against the sha512 pinned in scripts/lib.sh before they are unpacked. The registry
 * is replaced by a stand-in `npm` on PATH whose `npm pack` hands out a tarball of our making, so
 * a tampered download is simulated for real and nothing leaves this machine.
 */
const ROOT = resolve(import.meta.dir, '..');
const LIB = join(ROOT, 'scripts/lib.sh');
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'edge-ccm-integrity-'));
  dirs.push(dir);
  return dir;
}

/** A tarball shaped like an @oven/bun-* package whose `bun` is a shell script. */
function fakeBunTarball(dir: string, script: string): string {
  const pkg = join(dir, 'src/package/bin');
  mkdirSync(pkg, { recursive: true });
  writeFileSync(join(pkg, 'bun'), script);
  chmodSync(join(pkg, 'bun'), 0o755);
  const tgz = join(dir, 'fake.tgz');
  const tar = Bun.spawnSync(['tar', '-czf', tgz, '-C', join(dir, 'src'), 'package']);
  if (tar.exitCode !== 0) throw new Error(tar.stderr.toString());
  return tgz;
}

/** A directory holding an `npm` whose `pack SPEC` copies TGZ into the working directory, as npm names it. */
function fakeNpm(dir: string, tgz: string): string {
  const bin = join(dir, 'bin');
  mkdirSync(bin);
  writeFileSync(join(bin, 'npm'), `#!/bin/sh
[ "$1" = pack ] || { echo "fake npm: only pack" >&2; exit 1; }
for a in "$@"; do spec="$a"; done
name=$(printf '%s' "$spec" | sed 's/^@//; s/\\//-/; s/@/-/')
cp '${tgz}' "$name.tgz"
echo "$name.tgz"
`);
  chmodSync(join(bin, 'npm'), 0o755);
  return bin;
}

function run(cmd: string[], env: Record<string, string>): { exitCode: number; stdout: string; stderr: string } {
  const r = Bun.spawnSync(cmd, { cwd: ROOT, env: { ...process.env, ...env }, stdout: 'pipe', stderr: 'pipe' });
  return { exitCode: r.exitCode, stdout: r.stdout.toString(), stderr: r.stderr.toString() };
}

const sri = (file: string) => `sha512-${createHash('sha512').update(readFileSync(file)).digest('base64')}`;

test('every pinned Bun integrity is a sha512 in the registry format', () => {
  for (const platform of ['linux-x64', 'linux-aarch64']) {
    const got = run(['bash', '-c', `. ${LIB}; bun_integrity ${platform}`], {});
    expect(got.exitCode).toBe(0);
    expect(got.stdout.trim()).toMatch(/^sha512-[A-Za-z0-9+/]{86}==$/);
  }
  const unknown = run(['bash', '-c', `. ${LIB}; bun_integrity linux-riscv64`], {});
  expect(unknown.exitCode).not.toBe(0);
  expect(unknown.stderr).toContain("no pinned integrity for the Bun runtime of platform 'linux-riscv64'");
});

test('verify_integrity accepts a file of the pinned sha512 and refuses one byte changed, naming the package', () => {
  const dir = tempDir();
  const file = join(dir, 'pkg.tgz');
  writeFileSync(file, 'the genuine tarball');
  const ok = run(['bash', '-c', `. ${LIB}; verify_integrity "$1" "$2" @oven/bun-linux-x64@1.4.5`, '_', file, sri(file)], {});
  expect(ok).toMatchObject({ exitCode: 0, stderr: '' });
  const pinned = sri(file);
  writeFileSync(file, 'the genuine tarbalL');
  const refused = run(['bash', '-c', `. ${LIB}; verify_integrity "$1" "$2" @oven/bun-linux-x64@1.4.5`, '_', file, pinned], {});
  expect(refused.exitCode).toBe(1);
  expect(refused.stderr).toContain('INTEGRITY MISMATCH: @oven/bun-linux-x64@1.4.5');
  expect(refused.stderr).toContain(`pinned: ${pinned}`);
  expect(refused.stderr).toContain(`got:    ${sri(file)}`);
});

test('fetch-bun-runtime.sh refuses a tampered aarch64 runtime: loud failure, nothing cached, nothing printed as the runtime', () => {
  const dir = tempDir();
  const cache = join(dir, 'cache');
  const npm = fakeNpm(dir, fakeBunTarball(dir, '#!/bin/sh\necho 1.4.5\n'));
  const got = run(['bash', join(ROOT, 'scripts/fetch-bun-runtime.sh'), 'linux-aarch64'], { EDGE_CCM_CACHE: cache, PATH: `${npm}:${process.env.PATH}` });
  expect(got.exitCode).not.toBe(0);
  expect(got.stderr).toContain('INTEGRITY MISMATCH: @oven/bun-linux-aarch64@1.4.5');
  expect(got.stdout).toBe('');
  expect(existsSync(join(cache, 'bun-runtime-1.4.5-linux-aarch64'))).toBe(false);
});

test('a cached runtime without its verified integrity (an older, unchecked download) is fetched again, and refused when tampered', () => {
  const dir = tempDir();
  const cache = join(dir, 'cache');
  const stale = join(cache, 'bun-runtime-1.4.5-linux-aarch64/package/bin');
  mkdirSync(stale, { recursive: true });
  writeFileSync(join(stale, 'bun'), '#!/bin/sh\n');
  const npm = fakeNpm(dir, fakeBunTarball(dir, '#!/bin/sh\necho 1.4.5\n'));
  const got = run(['bash', join(ROOT, 'scripts/fetch-bun-runtime.sh'), 'linux-aarch64'], { EDGE_CCM_CACHE: cache, PATH: `${npm}:${process.env.PATH}` });
  expect(got.exitCode).not.toBe(0);
  expect(got.stderr).toContain('INTEGRITY MISMATCH: @oven/bun-linux-aarch64@1.4.5');
});

test('ensure_bun refuses a tampered Bun: loud failure naming the package, no bun installed', () => {
  const dir = tempDir();
  const cache = join(dir, 'cache');
  const npm = fakeNpm(dir, fakeBunTarball(dir, '#!/bin/sh\necho 1.4.5\n'));
  const got = run(['bash', '-c', `. ${LIB}; ensure_bun; echo "exit=$?"; [ -e "$BUN" ] && echo present || echo absent`], { EDGE_CCM_CACHE: cache, PATH: `${npm}:${process.env.PATH}` });
  const platform = process.arch === 'arm64' ? 'linux-aarch64' : 'linux-x64';
  expect(got.stderr).toContain(`INTEGRITY MISMATCH: @oven/bun-${platform}@1.4.5`);
  expect(got.stdout.trim().split('\n')).toEqual(['exit=1', 'absent']);
});
