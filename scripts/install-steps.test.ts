import { afterEach, expect, test } from 'bun:test';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

/**
 * Issue 26, the first hour: the demo installs only what it runs, and every long step of an
 * install says which of how many it is, where its log is and that it is alive, with the tools'
 * own output (hundreds of "go: downloading" lines) in the log, not on the console.
 */
const ROOT = resolve(import.meta.dir, '..');
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'edge-ccm-install-steps-'));
  dirs.push(dir);
  return dir;
}

function bash(script: string, env: Record<string, string> = {}): { code: number; stderr: string; stdout: string } {
  const run = Bun.spawnSync(['bash', '-c', script], { cwd: ROOT, env: { ...process.env, ...env }, stdout: 'pipe', stderr: 'pipe' });
  return { code: run.exitCode ?? -1, stderr: run.stderr.toString(), stdout: run.stdout.toString() };
}

test('step_run: what and where the log is, alive while it runs (elapsed time and the last log line), done; the output only in the log', () => {
  const log = join(tempDir(), 'logs/step.log');
  // A tool as noisy as `go mod tidy` on a fresh machine, then silent for 3 s.
  const noisy = 'for i in $(seq 1 324); do echo "go: downloading example.com/m$i v1.0.0"; done; sleep 3; echo "linking"';
  const r = bash(`. scripts/lib.sh; step_run 3 6 "building etcd" ${log} bash -c '${noisy}'`, { EDGE_CCM_PROGRESS_SECONDS: '1' });
  expect(r.code).toBe(0);
  const lines = r.stderr.trimEnd().split('\n');
  expect(lines[0]).toBe(`[3/6] building etcd (log: ${log})`);
  const alive = lines.filter((l) => /^ {6}\.\.\. \d+ s, last: /.test(l));
  expect(alive.length, r.stderr).toBeGreaterThanOrEqual(2); // one a second (here) over 3 s of silence
  expect(lines.at(-1)).toMatch(/^\[3\/6\] done in \d+ s$/);
  expect(lines.length).toBe(2 + alive.length); // nothing else on the console
  const logged = readFileSync(log, 'utf8');
  expect(logged.match(/go: downloading/g)).toHaveLength(324);
  expect(logged).toEndWith('linking\n');
});

test('step_run: a failing step says so with the end of its log and returns its exit status', () => {
  const log = join(tempDir(), 'fail.log');
  const r = bash(`. scripts/lib.sh; step_run 4 6 "building kube-apiserver" ${log} bash -c 'echo "compile error: x.go:1"; exit 3'; echo "status $?"`);
  expect(r.stdout.trim()).toBe('status 3');
  expect(r.stderr).toMatch(new RegExp(`\\[4/6\\] FAILED after \\d+ s: building kube-apiserver; the end of ${log}:\\n {6}compile error: x\\.go:1`));
});

/** A copy of install.sh and lib.sh beside stand-ins of the scripts it runs, each recording that it ran. */
function installSandbox() {
  const root = tempDir();
  const marks = join(root, 'ran');
  mkdirSync(join(root, 'scripts'), { recursive: true });
  mkdirSync(join(root, 'node_modules'));
  mkdirSync(marks);
  for (const f of ['install.sh', 'lib.sh']) copyFileSync(join(ROOT, 'scripts', f), join(root, 'scripts', f));
  for (const f of ['build-control-plane.sh', 'install-test-deps.sh', 'install-network-tools.sh', 'fetch-bun-runtime.sh']) {
    writeFileSync(join(root, 'scripts', f), `echo "\${EDGE_CCM_STEP_FIRST:-}/\${EDGE_CCM_STEP_TOTAL:-} $*" > ${marks}/${f}\necho /bin/dir\n`);
  }
  // Packages and Bun present: the real Bun, already installed in this machine's cache.
  writeFileSync(join(root, 'bun.lock'), 'lock');
  writeFileSync(join(root, 'node_modules/.edge-ccm-lock'), 'lock');
  const cache = join(root, 'cache');
  mkdirSync(cache);
  const realBunHome = join(process.env.EDGE_CCM_CACHE || join(process.env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'edge-ccm'), 'bun-1.4.5');
  symlinkSync(realBunHome, join(cache, 'bun-1.4.5'));
  const run = (args: string, env: Record<string, string> = {}) =>
    bash(`bash ${join(root, 'scripts/install.sh')} ${args}`, { EDGE_CCM_CACHE: cache, EDGE_CCM_LOG_DIR: join(root, 'logs'), ...env });
  const ran = () => Object.fromEntries(['build-control-plane.sh', 'install-test-deps.sh', 'install-network-tools.sh', 'fetch-bun-runtime.sh']
    .filter((f) => existsSync(join(marks, f))).map((f) => [f, readFileSync(join(marks, f), 'utf8').trim()]));
  return { run, ran, marks };
}

test('install.sh --demo installs only what the demo runs (Bun, packages, the control plane), numbered within the demo\'s steps', () => {
  const box = installSandbox();
  const r = box.run('--demo', { EDGE_CCM_STEP_TOTAL: '6' });
  expect(r.code, r.stderr).toBe(0);
  expect(box.ran()).toEqual({ 'build-control-plane.sh': '3/6' });
  expect(r.stderr.trimEnd().split('\n')).toEqual(['[1/6] Bun 1.4.5: installed already (' + join(box.marks, '../cache/bun-1.4.5/node_modules/.bin/bun') + ')', '[2/6] packages: as bun.lock says already']);
});

test('install.sh without --demo (the test command) installs the rest too, each a numbered step with its log', () => {
  const box = installSandbox();
  const r = box.run('');
  expect(r.code, r.stderr).toBe(0);
  // The real cluster's commands too (kubelet, kube-proxy, kube-scheduler, kube-controller-manager, kubectl: steps 5-9).
  expect(box.ran()).toEqual({ 'build-control-plane.sh': '3/12 cluster', 'install-test-deps.sh': '/', 'install-network-tools.sh': '/', 'fetch-bun-runtime.sh': '/ linux-aarch64' });
  for (const n of [10, 11, 12]) expect(r.stderr).toMatch(new RegExp(`^\\[${n}/12\\] .* \\(log: .*\\.log\\)$`, 'm'));
});
