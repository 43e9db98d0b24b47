/**
 * What a per-node load-balancer process costs where it really works (issue 38): `edge-ccm
 * speaker` against MetalLB's speaker and kube-vip, each on all three nodes of one lab
 * (bench/node-footprint-lab.ts: network namespaces on one switch, a real kube-apiserver, BIRD as
 * the router), each announcing the same addresses for the same LoadBalancer services (a ready
 * endpoint on every node). The L2 sides run one after the other (they would answer ARP for the
 * same addresses); the BGP sides run together (each has its own sessions). Per phase, from no
 * service: every side started, RSS after the settle and idle CPU; then per step of --services
 * (services added while the sides run): CPU from the first write until the settle ends per
 * service added, RSS, idle CPU over --step-idle-seconds; after the last step RSS and idle CPU
 * over --idle-seconds (3600: the hour of the issue). Before a step's CPU is read every side
 * announces every address (ARP answered by a node for sampled addresses; a route per address
 * from each node's session in the router's table); after a phase nobody answers any more. Figures
 * are per process (mean and max of the three nodes); the load average goes with every CPU figure.
 *
 *   bun bench/node-footprint.ts [--services=10,100,1000] [--phases=edge-ccm-l2,metallb-l2,kube-vip,bgp,bgp-no-bfd]
 *     [--settle-seconds=20] [--step-idle-seconds=60] [--idle-seconds=60]
 *     [--edge-ccm=dist/edge-ccm] [--metallb=~/.cache/edge-ccm/anchors/metallb-speaker] [--kube-vip=~/.cache/edge-ccm/anchors/kube-vip]
 *     [--metallb-crds=~/.cache/edge-ccm/anchors/src/metallb/config/crd/bases] [--address-probes=3 (edge-ccm speaker's, L2)]
 *     [--by-mapping=yes: after every window, each side's file-backed MiB by mapped file and permissions]
 *     [--edge-ccm-env=NAME=VALUE,... (edge-ccm speaker's environment; default the chart DaemonSet's, SPEAKER_ENV)]
 *     [--lan-arp-per-second=N (a segment's everyday ARP through every phase, bench/lan-arp.ts; default 0)]
 *
 * Needs root, the network tools (scripts/install-network-tools.sh), BIRD and the control-plane binaries.
 */
import { existsSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join, resolve } from 'node:path';
import { eventually } from '../test/harness/eventually.ts';
import { NODES, type NodeName } from '../test/harness/l2-lab.ts';
import type { LoggedProcess } from '../test/harness/processes.ts';
import { NodeFootprintLab, serviceAddress } from './node-footprint-lab.ts';
import { phases, SPEAKER_ENV, type Phase, type Side } from './node-footprint-sides.ts';
import { clearReferenced, cpuSeconds, fileResidentByMapping, referencedMiB, residentMiB } from './proc-sampler.ts';
import { anchors } from './anchors.ts';
import { stringOption as opt } from './args.ts';
import { evictFromPageCache } from './page-cache.ts';
import { lanArpPerSecond, startLanArp } from './lan-arp.ts';

const ROOT = resolve(import.meta.dir, '..');
const args = process.argv.slice(2);
const STEPS = opt('services', '10,100,1000').split(',').map(Number);
const SETTLE_S = Number(opt('settle-seconds', '20'));
const STEP_IDLE_S = Number(opt('step-idle-seconds', '60'));
const IDLE_S = Number(opt('idle-seconds', '60'));
const binaries = {
  edgeCcm: opt('edge-ccm', join(ROOT, 'dist/edge-ccm')),
  metallb: opt('metallb', '') || anchors().metallbSpeaker,
  kubeVip: opt('kube-vip', '') || anchors().kubeVip,
};
const ADDRESS_PROBES = Number(opt('address-probes', '3'));
const LAN_ARP_PER_SECOND = lanArpPerSecond();
const BY_MAPPING = opt('by-mapping', 'no') === 'yes';
const METALLB_CRDS = opt('metallb-crds', '') || anchors().metallbCrds;
const EDGE_CCM_ENV = opt('edge-ccm-env', SPEAKER_ENV.join(',')).split(',').filter(Boolean);
if (EDGE_CCM_ENV.some((kv) => !/^[A-Za-z_][A-Za-z0-9_]*=/.test(kv))) throw new Error(`--edge-ccm-env=${EDGE_CCM_ENV.join(',')}: NAME=VALUE,... expected`);
const ALL_PHASES = phases({ ...binaries, addressProbes: ADDRESS_PROBES, edgeCcmEnv: EDGE_CCM_ENV });
const PHASES = opt('phases', Object.keys(ALL_PHASES).join(',')).split(',').map((p) => {
  const phase = ALL_PHASES[p];
  if (!phase) throw new Error(`--phases: no phase ${p} (have ${Object.keys(ALL_PHASES).join(', ')})`);
  return phase;
});
for (const [what, path] of [...Object.entries(binaries), ['metallb-crds', METALLB_CRDS]]) {
  if (!existsSync(path!)) throw new Error(`--${what}: ${path} is missing (edge-ccm: bun scripts/build.ts; the anchors: scripts/install-anchors.sh)`);
}
if (STEPS.some((s, i) => !Number.isInteger(s) || s <= 0 || (i > 0 && s <= STEPS[i - 1]!))) throw new Error(`--services: increasing positive counts, not ${opt('services', '')}`);

interface Running { side: Side; procs: Map<NodeName, LoggedProcess> }

const rows: string[] = [];
const fmt = (xs: number[], digits: number) => `${(xs.reduce((a, b) => a + b, 0) / xs.length).toFixed(digits)} (${Math.max(...xs).toFixed(digits)})`;
const load = () => loadavg().map((l) => l.toFixed(1)).join(' ');

function alive(running: Running[]): void {
  for (const r of running) for (const [n, p] of r.procs) if (!p.running) throw new Error(`${r.side.name} on ${n} exited:\n${p.logTail(30)}`);
}

const cpuOf = (r: Running) => NODES.map((n) => cpuSeconds(r.procs.get(n)!.pid));
const rssOf = (r: Running) => NODES.map((n) => residentMiB(r.procs.get(n)!.pid));
const pidsOf = (r: Running) => NODES.map((n) => r.procs.get(n)!.pid);

/** Idle CPU-s/min per process over `seconds` (no write, no probe meanwhile), then RSS. */
async function idleWindow(running: Running[], seconds: number) {
  const cpu0 = running.map(cpuOf);
  const load0 = load();
  for (const r of running) pidsOf(r).forEach(clearReferenced);
  await Bun.sleep(seconds * 1000);
  alive(running);
  return running.map((r, i) => ({ cpuPerMin: cpuOf(r).map((c, k) => ((c - cpu0[i]![k]!) * 60) / seconds), rss: rssOf(r), touched: pidsOf(r).map(referencedMiB), load: `${load0} -> ${load()}` }));
}

async function allAnnounce(lab: NodeFootprintLab, running: Running[], what: string): Promise<void> {
  let last: string | undefined;
  await eventually(what, async () => {
    alive(running);
    for (const r of running) if ((last = await r.side.missing(lab)) !== undefined) return false;
    return true;
  }, { timeoutMs: 600_000, intervalMs: 1000, explain: () => `${last}\n${running.flatMap((r) => [...r.procs.values()].map((p) => `--- ${p.name}:\n${p.logTail(15)}`)).join('\n')}` });
}

function row(side: string, services: string, announcedS: string, perService: string, idle: { cpuPerMin: number[]; rss: { rss: number; anon: number }[]; touched: { total: number; code: number }[]; load: string }): void {
  const line = `| ${side} | ${services} | ${announcedS} | ${perService} | ${fmt(idle.rss.map((r) => r.rss), 1)} | ${fmt(idle.rss.map((r) => r.anon), 1)} | ${fmt(idle.touched.map((t) => t.total), 1)} / ${fmt(idle.touched.map((t) => t.code), 1)} | ${fmt(idle.cpuPerMin, 3)} | ${idle.load} |`;
  rows.push(line);
  console.log(line);
}

/** The file-backed MiB by mapping (mean of the three nodes), the mappings of 0.1 MiB and more. */
function printMappings(r: Running): void {
  const sum = new Map<string, number>();
  for (const pid of pidsOf(r)) for (const [k, v] of fileResidentByMapping(pid)) sum.set(k, (sum.get(k) ?? 0) + v / NODES.length);
  console.log(`  ${r.side.name} file-backed by mapping: ${[...sum].filter(([, v]) => v >= 0.1).sort((a, b) => b[1] - a[1]).map(([k, v]) => `${k} ${v.toFixed(1)}`).join(', ')}`);
}

async function runPhase(lab: NodeFootprintLab, phase: Phase): Promise<void> {
  console.log(`\n## ${phase.name} (load ${load()})`);
  const running: Running[] = [];
  try {
    for (const side of phase.sides) await side.setUp?.(lab);
    // Each phase's binaries read from disk by its own processes (the phases run one after another).
    evictFromPageCache(Object.values(binaries));
    for (const side of phase.sides) running.push({ side, procs: new Map(NODES.map((n) => [n, side.start(lab, n)])) });
    await Bun.sleep(SETTLE_S * 1000);
    const atStart = await idleWindow(running, STEP_IDLE_S);
    running.forEach((r, i) => row(r.side.name, '0 (start)', '-', '-', atStart[i]!));
    if (BY_MAPPING) running.forEach(printMappings);
    let previous = 0;
    for (const step of STEPS) {
      const cpu0 = running.map(cpuOf);
      const started = performance.now();
      await lab.addServices(step);
      await allAnnounce(lab, running, `every side announcing the ${step} services`);
      const announcedS = ((performance.now() - started) / 1000).toFixed(1);
      await Bun.sleep(SETTLE_S * 1000);
      const perService = running.map((r, i) => cpuOf(r).map((c, k) => ((c - cpu0[i]![k]!) * 1000) / (step - previous)));
      previous = step;
      const idle = await idleWindow(running, STEP_IDLE_S);
      running.forEach((r, i) => row(r.side.name, String(step), announcedS, fmt(perService[i]!, 1), idle[i]!));
      if (BY_MAPPING) running.forEach(printMappings);
    }
    if (IDLE_S > 0) {
      const idle = await idleWindow(running, IDLE_S);
      await allAnnounce(lab, running, `every side still announcing after ${IDLE_S} s idle`);
      running.forEach((r, i) => row(r.side.name, `${previous} after ${IDLE_S} s idle`, '-', '-', idle[i]!));
      if (BY_MAPPING) running.forEach(printMappings);
    }
  } finally {
    for (const r of running) await Promise.all([...r.procs.values()].map((p) => p.terminate(10_000)));
    for (const side of phase.sides) await side.tearDown?.(lab).catch((e) => console.error(`${side.name} tear-down:`, e));
    await lab.deleteServices();
  }
  // The answers and routes came from the sides: with them stopped nobody answers, the routers hold nothing.
  const left = await lab.arpAnswers(serviceAddress(0));
  if (left.length > 0) throw new Error(`${serviceAddress(0)} still answered by ${left.join(',')} after ${phase.name} stopped`);
  for (const n of NODES) {
    for (const session of [`edge_${n}`, `metallb_${n}`]) {
      await eventually(`no route from ${session} after ${phase.name} stopped`, async () => (await lab.routesFrom(session)) === 0, 30_000, 500);
    }
  }
}

console.log(`node footprint: services ${STEPS.join(',')}, settle ${SETTLE_S} s, idle per step ${STEP_IDLE_S} s, final idle ${IDLE_S} s; ${new Date().toISOString()}, load ${load()}`);
const lab = await NodeFootprintLab.build(METALLB_CRDS);
try {
  startLanArp(lab.site.lab, LAN_ARP_PER_SECOND);
  for (const phase of PHASES) await runPhase(lab, phase);
} finally {
  await lab.destroy();
}
console.log(`\nPer process, mean (max) of the three nodes. "announced after": from the step's first write until every side announced every address.\n
| side | services | announced after (s) | CPU-ms per service added, first write to ${SETTLE_S} s after announced | RSS (MiB) | of it anonymous (MiB) | touched in the window / of it machine code (MiB) | idle CPU-s/min (${STEP_IDLE_S} s window; final row ${IDLE_S} s) | load avg 1/5/15 min (window start -> end) |
|---|---|---|---|---|---|---|---|---|
${rows.join('\n')}`);
