import { expect, test } from 'bun:test';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { tempDir } from '../harness/ccm-process.ts';
import { removeOwnedDir } from '../harness/processes.ts';
import { NETWORK_FAULT_KINDS } from '../soak/faults.ts';
import type { SoakReport } from '../soak/report.ts';
import { randomSeed } from '../soak/random.ts';

/**
 * The fault soak's CI profile (docs/reliability.md) on every change: 3.5 minutes of workload and
 * faults (the network faults dealt first) plus about a minute of set-up, 2+2 replicas of the
 * compiled binary, a GoBGP router (the leader's pod CIDRs) and three L2 speakers in network
 * namespaces (root) with their own BGP sessions to BIRD (BFD), an L2 prober on the switch every
 * 100 ms and the nodes' router read every 200 ms. The seed is random
 * and printed (EDGE_CCM_SOAK_SEED=N replays one); any invariant violated fails the test with
 * the soak's report. The soak runs as its own process (its pid in an owned dir, so it is ended
 * however this test ends), its output kept in a file and shown on failure.
 */
const ROOT = resolve(import.meta.dir, '../..');
// 3.5: the whole CI run came to 20 min 19 s with 5 (session 8), 19 min 25 s with 4.5 and
// 19 min 20 s to 20 min 17 s with 4 (session 10). The five speaker faults share one resource (one
// at a time, each up to 12 s plus 6 s of rest): with 3, a run of seed 2363045176 dealt only 6
// faults, speaker-sigstop not among them (the assertion below failed), because the fault loop
// waited behind the busy head of its deck; it now deals the first kind whose resource is free.
const MINUTES = 3.5;
/**
 * Two MACs answering one address for at most this long is not a violation here: one heartbeat
 * interval (250 ms) and a probe round, the partition-heal limit docs/networking/l2.md states (a
 * node whose link comes back may answer until it hears its first peer). Every split this profile
 * exists to catch lasted longer (survivors splitting: 0.7-7.5 s; a woken speaker: 0.8 s). The full
 * profile and the L2 tests judge at zero.
 */
const L2_TWO_MACS_TOLERANCE_MS = 350;

test('the CI soak profile reports no invariant violation', async () => {
  const binary = join(ROOT, 'dist/edge-ccm');
  if (!existsSync(binary)) throw new Error(`${binary} is missing: run \`bun run build\` first (the README's test command, bash scripts/test.sh, builds it)`);
  const seed = Number(process.env.EDGE_CCM_SOAK_SEED ?? randomSeed());
  console.log(`soak seed ${seed}: replay with scripts/soak --seed ${seed} --minutes ${MINUTES} --profile ci`);
  const dir = tempDir('edge-ccm-soak-ci-');
  try {
    await runCiSoak(dir, seed);
  } finally {
    removeOwnedDir(dir);
  }
}, (MINUTES + 4) * 60_000);

async function runCiSoak(dir: string, seed: number): Promise<void> {
  const reportPath = join(dir, 'report.json');
  const logPath = join(dir, 'soak.log');
  const soak = Bun.spawn([process.execPath, join(ROOT, 'test/soak/main.ts'), '--profile', 'ci', '--minutes', String(MINUTES), '--seed', String(seed), '--report', reportPath, '--l2-two-macs-tolerance-ms', String(L2_TWO_MACS_TOLERANCE_MS)], {
    cwd: ROOT, stdout: Bun.file(logPath), stderr: 'pipe',
  });
  writeFileSync(join(dir, 'soak.pid'), String(soak.pid));
  const stderr = await new Response(soak.stderr).text();
  const code = await soak.exited;
  const log = readFileSync(logPath, 'utf8');
  const tail = `${log.split('\n').slice(-60).join('\n')}\n${stderr}`;
  expect(existsSync(reportPath), `the soak wrote no report (exit ${code}):\n${tail}`).toBe(true);
  const report = JSON.parse(readFileSync(reportPath, 'utf8')) as SoakReport;
  console.log(log.split('\n').filter((l) => /^(soak:|faults|objects|invariant|replica|network|L2 probe|BGP dead|recovery|replicas|violations)/.test(l)).join('\n'));
  expect(report.violations, tail).toEqual([]);
  expect(code, tail).toBe(0);
  // A soak that injected nothing or checked nothing proves nothing.
  expect(report.faultsTotal).toBeGreaterThan(5);
  expect(report.checks['write-in-term'] ?? 0).toBeGreaterThan(0);
  expect(report.checks['service-state'] ?? 0).toBeGreaterThan(0);
  expect(report.checks['bgp-rib'] ?? 0).toBeGreaterThan(0);
  expect(report.checks['l2-answers'] ?? 0).toBeGreaterThan(0);
  expect(report.checks['bgp-node-rib'] ?? 0).toBeGreaterThan(0);
  // The speaker faults killed, paused or cut off a node that had next hops, and the router was read meanwhile.
  expect(report.checks['bgp-dead-hop'] ?? 0).toBeGreaterThan(0);
  expect(report.network.deadHop.withdrawals).toBeGreaterThan(0);
  // The prober judged every round: 8 addresses, about 10 rounds a second.
  expect(report.checks['l2-probe'] ?? 0).toBeGreaterThan(8 * 10 * 60);
  expect(report.churnTotal).toBeGreaterThan(20);
  // The network faults come first in the CI profile's deck: each of them was injected.
  for (const kind of NETWORK_FAULT_KINDS) expect(report.faults[kind] ?? 0, `fault ${kind} injected`).toBeGreaterThan(0);
}
