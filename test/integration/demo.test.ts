import { expect, test } from 'bun:test';
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { eventually } from '../harness/eventually.ts';
import { runToEnd } from '../harness/run-to-end.ts';

/**
 * The README's main job (scripts/demo.sh runs install, build, then this script): it must reach
 * initialised nodes and an external IP on a machine like this one. --once stops it after showing;
 * Ctrl-C (SIGINT to the whole foreground process group, as a terminal sends it) stops it cleanly.
 */
const root = join(import.meta.dir, '../..');

// A bound, not a wait: a hung demo is killed and fails with its output.
const runDemo = (args: string[]) => runToEnd([process.execPath, join(root, 'scripts/demo.ts'), ...args], { cwd: root, timeoutMs: 150_000 });

/** The printed log file of edge-ccm: it exists and holds edge-ccm's own lines. Removed after the check. */
function checkLogFile(output: string): void {
  const path = /edge-ccm log: (\S+)/.exec(output)?.[1];
  expect(path).toBeDefined();
  expect(readFileSync(path!, 'utf8')).toContain('successfully acquired lease');
  rmSync(dirname(path!), { recursive: true, force: true });
}

test('the demo initialises the nodes from the example inventory and gives the service an external IP', async () => {
  const { exitCode, output } = await runDemo(['--once']);
  expect(exitCode, output).toBe(0);
  for (const node of ['node-a', 'node-b', 'node-c']) expect(output).toMatch(new RegExp(`${node}\\s+static://${node}\\s+type=\\S+\\s+zone=lab-1\\s+region=demo`));
  expect(output).toMatch(/default\/demo-web\s+type=LoadBalancer\s+external IP=203\.0\.113\.\d+/);
  // Ready=Unknown and the not-ready taint are said to be the missing kubelet's, where they are printed.
  expect(output).toMatch(/node-a .*ready=Unknown\s+taints=node\.kubernetes\.io\/not-ready:NoSchedule\s/);
  expect(output).toContain('No kubelet runs in this demo');
  // A kubectl that fits the API server, or exactly how to get one (the demo works without).
  expect(output).toMatch(/kubectl: (KUBECONFIG=\S+ \S*kubectl\S* get nodes|.*bash scripts\/build-control-plane\.sh kubectl)/);
  // The URLs are quoted for the shell ("?" is a glob character).
  expect(output).toMatch(/curl -k 'https:\/\/127\.0\.0\.1:\d+\/healthz\?verbose'/);
  expect(output).toMatch(/-H 'Authorization: Bearer \S+' 'https:\/\/127\.0\.0\.1:\d+\/metrics'/);
  checkLogFile(output);
}, 180_000);

test('the outage scenario: an empty inventory deletes nothing, a removed machine goes alone, a full pool leaves a service pending with its event', async () => {
  const { exitCode, output } = await runDemo(['--once', '--scenario', 'outage']);
  expect(exitCode, output).toBe(0);
  expect(output).toContain('3 of 3 nodes still there (node-a, node-b, node-c)');
  expect(output).toContain('Warning ProviderAnswerDistrusted on node-a: Not judging node node-a gone');
  expect(output).toContain('node-c deleted once the grace period passed: Deleting node node-c because it does not exist in the cloud provider');
  expect(output).toMatch(/default\/web-\d\s+type=LoadBalancer\s+external IP=<pending>/);
  expect(output).toMatch(/Warning SyncLoadBalancerFailed on default\/web-\d: .*pool demo-small exhausted/);
  checkLogFile(output);
}, 180_000);

test('Ctrl-C: everything stops, exit 0, the log file named, no stray edge-ccm output', async () => {
  // Its own process group, as a shell gives a foreground job: the terminal's SIGINT reaches every process in it.
  const child = spawn(process.execPath, [join(root, 'scripts/demo.ts')], { cwd: root, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr.on('data', (d: Buffer) => (output += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  try {
    await eventually('the demo waiting for Ctrl-C', () => output.includes('Press Ctrl-C to stop everything.'), 150_000);
    const ccmPid = Number(/edge-ccm is running \(pid (\d+)\)/.exec(output)?.[1]);
    process.kill(-child.pid!, 'SIGINT');
    expect(await exited).toBe(0);
    const after = output.slice(output.indexOf('Press Ctrl-C to stop everything.') + 'Press Ctrl-C to stop everything.'.length);
    const logPath = /edge-ccm log: (\S+)/.exec(output)?.[1];
    expect(after.trim().split('\n')).toEqual([
      '== stopping edge-ccm and the control plane',
      `   edge-ccm stopped; its log: ${logPath}`,
    ]);
    expect(existsSync(`/proc/${ccmPid}`)).toBe(false);
    expect(readFileSync(logPath!, 'utf8')).toContain('shutting down');
    checkLogFile(output);
  } finally {
    if (child.exitCode === null) process.kill(-child.pid!, 'SIGKILL');
  }
}, 180_000);
