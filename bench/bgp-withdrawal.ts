/**
 * How fast a dead node leaves a real router's table (issue 29, docs/networking/bgp.md "Node
 * liveness"), and what the per-node sessions cost: the lab of
 * test/integration/bgp-node-liveness.test.ts (test/harness/bgp-node-lab.ts: a real
 * kube-apiserver, the compiled edge-ccm as leader, three node namespaces each running the
 * compiled `edge-ccm speaker` with bgp.loadBalancers.announceFrom: nodes and BFD, BIRD 2 or FRR
 * 8.4 with bfdd as the router), for each router:
 *
 * - ROUNDS times: node n2's link down (its speaker running); the time until its next hop has left
 *   the router's kernel table (sampled about every 15 ms), then the link back and the time until
 *   the next hop is back;
 * - ROUNDS times: SIGKILL of n3's speaker; the time until its next hop has left; then a new one;
 * - a quiet window of STEADY seconds: CPU of each speaker and of the router's daemons, and the
 *   packets per second on the router's LAN interface (BFD both ways, BGP keepalives; no probes).
 *
 *   bun bench/bgp-withdrawal.ts [--rounds=10] [--steady-seconds=20] [--routers=bird,frr] [--interval-ms=200] [--multiplier=3]
 */
import { readFileSync } from 'node:fs';
import { CLUSTER_NODES } from '../test/harness/bgp-cluster-lab.ts';
import type { RouterKind } from '../test/harness/bgp-lab.ts';
import { NodeLab } from '../test/harness/bgp-node-lab.ts';
import { startControlPlane } from '../test/harness/control-plane.ts';
import { eventually } from '../test/harness/eventually.ts';
import { transportFor } from '../test/harness/kubeconfig.ts';
import { mustRun } from '../test/harness/netns.ts';

const args = Object.fromEntries(process.argv.slice(2).filter((a) => a.startsWith('--') && a.includes('=')).map((a) => a.slice(2).split('=') as [string, string]));
const ROUNDS = Number(args.rounds ?? 10);
const STEADY_S = Number(args['steady-seconds'] ?? 20);
const ROUTERS = (args.routers ?? 'bird,frr').split(',') as RouterKind[];
const BFD = { intervalMs: Number(args['interval-ms'] ?? 200), multiplier: Number(args.multiplier ?? 3) };
const TICKS_PER_S = 100; // USER_HZ

const v4 = (i: number) => CLUSTER_NODES[i]!.v4;

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}
function summary(ms: number[]): { p50: number; p90: number; max: number; runs: number } {
  const s = [...ms].sort((a, b) => a - b);
  return { p50: Math.round(percentile(s, 50)), p90: Math.round(percentile(s, 90)), max: Math.round(s.at(-1)!), runs: s.length };
}

/** utime + stime of a process, in seconds. */
function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').replace(/^.*\) /, '').split(' ');
  return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_S;
}

async function lanPackets(site: NodeLab): Promise<{ rx: number; tx: number }> {
  const j = JSON.parse(await site.lab.ip('rtr', '-s', '-j', 'link', 'show', 'eth0'))[0].stats64;
  return { rx: j.rx.packets, tx: j.tx.packets };
}

const cp = await startControlPlane();
const admin = transportFor(cp.adminKubeconfig);
await NodeLab.createSpeakerIdentity(admin);
const results: Record<string, unknown> = {};
try {
  for (const kind of ROUTERS) {
    const site = await NodeLab.start(cp, admin, kind, `bench${kind}`, { announceFrom: 'nodes', bfd: BFD });
    try {
      for (const n of CLUSTER_NODES) await eventually(`BFD with ${n.name} Up`, () => site.router.bfdUp!(n.v4), 10_000);
      const linkDown: number[] = [];
      const linkBack: number[] = [];
      for (let r = 0; r < ROUNDS; r++) {
        linkDown.push(await site.withdrawalMs(v4(1), () => site.linkDown(1)));
        await Bun.sleep(500);
        const back = performance.now();
        await site.linkUp(1);
        await eventually('n2 back', async () => (await site.hops()).includes(v4(1)), 60_000, 10);
        linkBack.push(performance.now() - back);
        // Past BIRD's error forget time in the lab (5 s): each round a first failure, not a flap it dampens.
        await Bun.sleep(6_000);
      }
      console.error(`[${kind}] link down: ${JSON.stringify(summary(linkDown))}; back: ${JSON.stringify(summary(linkBack))}`);
      const killed: number[] = [];
      for (let r = 0; r < ROUNDS; r++) {
        killed.push(await site.withdrawalMs(v4(2), async () => process.kill(site.speakers.get(2)!.pid, 'SIGKILL')));
        site.startSpeaker(2);
        await eventually('n3 back', async () => (await site.hops()).includes(v4(2)), 60_000, 50);
        await Bun.sleep(6_000);
      }
      console.error(`[${kind}] speaker SIGKILL: ${JSON.stringify(summary(killed))}`);

      // The quiet window: every session Up, nothing changing.
      const routerPids = (await mustRun(['ip', 'netns', 'pids', site.lab.ns('rtr')])).trim().split('\n').map(Number)
        .map((pid) => ({ pid, name: readFileSync(`/proc/${pid}/comm`, 'utf8').trim() }))
        .filter((p) => ['bird', 'bfdd', 'bgpd', 'zebra'].includes(p.name));
      const speakerPids = [...site.speakers.values()].map((p) => p.pid);
      const cpu0 = { router: routerPids.map((p) => cpuSeconds(p.pid)), speakers: speakerPids.map(cpuSeconds) };
      const pk0 = await lanPackets(site);
      const t0 = performance.now();
      await Bun.sleep(STEADY_S * 1000);
      const seconds = (performance.now() - t0) / 1000;
      const pk1 = await lanPackets(site);
      const routerCpu = Object.fromEntries(routerPids.map((p, i) => [p.name, +((100 * (cpuSeconds(p.pid) - cpu0.router[i]!)) / seconds).toFixed(2)]));
      const speakerCpu = speakerPids.map((pid, i) => +((100 * (cpuSeconds(pid) - cpu0.speakers[i]!)) / seconds).toFixed(2));
      const steady = {
        seconds: +seconds.toFixed(1),
        nodes: CLUSTER_NODES.length,
        sessionsPerNode: 2,
        routerCpuPercent: routerCpu,
        speakerCpuPercent: speakerCpu,
        routerLanPacketsPerSecond: { rx: +((pk1.rx - pk0.rx) / seconds).toFixed(1), tx: +((pk1.tx - pk0.tx) / seconds).toFixed(1) },
      };
      console.error(`[${kind}] steady: ${JSON.stringify(steady)}`);
      results[kind] = { bfd: BFD, linkDownMs: summary(linkDown), linkBackMs: summary(linkBack), speakerKillMs: summary(killed), raw: { linkDown, linkBack, killed }, steady };
    } finally {
      await site.destroy();
    }
  }
} finally {
  await cp.stop();
}
console.log(JSON.stringify(results, null, 2));
