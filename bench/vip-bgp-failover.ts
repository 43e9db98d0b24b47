/**
 * Control-plane VIP failover with `announce: bgp` (issue 28), RUNS times per fault kind: the three
 * hosts of test/harness/vip-lab.ts with BIRD in rtr (a BGP and a BFD session, 3 x 200 ms, per
 * host), the compiled `edge-ccm vip` on each with the lab's BGP config, BIRD's table read every
 * 100 ms and a client asking https://VIP_BGP:6443/readyz through rtr every 100 ms (0.3 s
 * timeout). For each fault of the holder: from the fault to the old path leaving BIRD's table, to
 * the new holder's path, to the first good request after it; the failed requests; every table
 * sample with two paths for the VIP is counted (must stay 0). Then the cold start of all three.
 * A run slower than 2 s to the first good request, or a move not seen, prints every host's log
 * tail (the evidence) to stderr.
 * Usage: bun bench/vip-bgp-failover.ts [RUNS=10] [PART,PART...: only the faults whose names contain one] (root; after bun scripts/build.ts). BENCHMARKS.md.
 */
import { percentile } from '../test/harness/arp-probes.ts';
import { healHostPartition, partitionHost } from '../test/harness/host-partition.ts';
import { eventually } from '../test/harness/eventually.ts';
import { NODES, type NodeName } from '../test/harness/l2-lab.ts';
import { VIP_BGP, VipLab } from '../test/harness/vip-lab.ts';
import { describeOverlaps, holderOverlaps, VipPathSampler, VipRequests } from '../test/harness/vip-probes.ts';

const RUNS = Number(process.argv[2] ?? 10);
/** Comma-separated parts of fault names: only those faults, and no cold start. */
const ONLY = process.argv[3]?.split(',');
const vip = await VipLab.build({ router: true });
let paths: VipPathSampler | undefined;
let requests: VipRequests | undefined;

const hopOf = (n: NodeName) => vip.site.nodes[n].lanIPv4;
const holderNow = (): NodeName | undefined => {
  const last = paths!.samples.at(-1);
  return last?.hops.length === 1 ? NODES.find((n) => hopOf(n) === last.hops[0]) : undefined;
};

type Fault = { name: string; apply: (holder: NodeName) => Promise<void>; heal: (holder: NodeName) => Promise<void> };
const signal = (pid: number, sig: NodeJS.Signals) => async () => void process.kill(pid, sig);
const FAULTS: Fault[] = [
  { name: "holder's kube-apiserver killed", apply: (h) => vip.apiServers.get(h)!.kill(), heal: (h) => vip.startApiServer(h) },
  { name: "holder's kube-apiserver hung (SIGSTOP)", apply: (h) => signal(vip.apiServers.get(h)!.pid, 'SIGSTOP')(), heal: (h) => signal(vip.apiServers.get(h)!.pid, 'SIGCONT')() },
  { name: "holder's edge-ccm SIGKILLed", apply: (h) => vip.vips.get(h)!.kill(), heal: async (h) => void vip.startVip(h, 'bgp') },
  // The move is measured from the SIGTERM; the restart waits for the old process's exit (its
  // goodbyes, BGP Cease and BFD AdminDown, come after the release and hold its metrics port).
  { name: "holder's edge-ccm SIGTERMed", apply: (h) => signal(vip.vips.get(h)!.pid, 'SIGTERM')(), heal: async (h) => {
    await vip.vips.get(h)!.exited;
    vip.startVip(h, 'bgp');
  } },
  {
    name: "holder's edge-ccm paused 3 s (SIGSTOP, then SIGCONT)",
    apply: async (h) => {
      const pid = vip.vips.get(h)!.pid;
      process.kill(pid, 'SIGSTOP');
      setTimeout(() => process.kill(pid, 'SIGCONT'), 3000);
    },
    heal: async () => void (await Bun.sleep(3000)),
  },
  { name: "holder's link down", apply: async (h) => void (await vip.site.lab.ip(h, 'link', 'set', 'eth0', 'down')), heal: async (h) => void (await vip.site.lab.ip(h, 'link', 'set', 'eth0', 'up')) },
  {
    name: 'the other two hosts partitioned from the holder (the router reaches all three)',
    apply: (h) => partitionHost(vip.site.lab, h, NODES.filter((n) => n !== h).map(hopOf)),
    heal: (h) => healHostPartition(vip.site.lab, h),
  },
];

const evidence = (why: string) => {
  console.error(`== ${why}: log tails`);
  for (const n of NODES) console.error(`-- ${n}\n${vip.vips.get(n)?.logTail(40) ?? ''}`);
  console.error(`-- last table samples ${JSON.stringify(paths?.samples.slice(-40))}`);
};
const overlapText = (from: number) => describeOverlaps(holderOverlaps(vip, from, Date.now()));
const fmt = (xs: number[]) => `p50 ${percentile(xs, 50)} ms, max ${Math.max(...xs)} ms`;

try {
  await vip.startRouter();
  for (const n of NODES) vip.startVip(n, 'bgp');
  await Promise.all(NODES.map((n) => vip.startApiServer(n)));
  paths = new VipPathSampler(vip);
  await eventually('one path for the VIP', () => !!holderNow(), 30_000);
  requests = new VipRequests(vip, VIP_BGP);
  for (const fault of FAULTS.filter((f) => !ONLY || ONLY.some((part) => f.name.includes(part)))) {
    const gone: number[] = [];
    const moved: number[] = [];
    const good: number[] = [];
    const failed: number[] = [];
    const before = paths.doubles().length;
    const from = Date.now();
    for (let run = 0; run < RUNS; run++) {
      await Bun.sleep(2000);
      const holder = holderNow();
      if (!holder) throw new Error(`no single path before run ${run} of ${fault.name}: ${JSON.stringify(paths.samples.at(-1))}`);
      const faultAt = Date.now();
      await fault.apply(holder);
      await eventually(`the VIP's path leaves ${holder} (${fault.name})`, () => !!paths!.movedFrom(hopOf(holder), faultAt).moved, 20_000).catch((e) => {
        evidence(`run ${run} of ${fault.name}: no move`);
        throw e;
      });
      const m = paths.movedFrom(hopOf(holder), faultAt);
      await eventually('a request succeeds after the move', () => requests!.list.some((r) => r.t > m.moved!.t && r.ok), 20_000);
      const g = requests.firstGood(faultAt, m.moved!.t);
      if (g.ms > 2000) evidence(`run ${run} of ${fault.name}: first good request ${g.ms} ms after the fault`);
      gone.push(m.gone!.t - faultAt);
      moved.push(m.moved!.t - faultAt);
      good.push(g.ms);
      failed.push(g.failed);
      await fault.heal(holder);
      await Bun.sleep(1500);
      await eventually('one path again', () => !!holderNow(), 30_000);
    }
    console.log(`vip bgp failover: ${fault.name}: ${RUNS} runs; old path gone ${fmt(gone)}; new path ${fmt(moved)}; first good request after it ${fmt(good)}; failed requests p50 ${percentile(failed, 50)}, max ${Math.max(...failed)}; samples with two paths ${paths.doubles().length - before}; ${overlapText(from)}`);
  }
  const cold: number[] = [];
  const coldBefore = paths.doubles().length;
  for (let run = 0; run < (ONLY ? 0 : RUNS); run++) {
    await Promise.all(NODES.map((n) => vip.vips.get(n)!.kill()));
    await eventually('no path after every vip stopped', () => paths!.samples.at(-1)?.hops.length === 0, 20_000);
    const at = Date.now();
    for (const n of NODES) vip.startVip(n, 'bgp');
    await eventually('a path after the cold start', () => paths!.samples.some((s) => s.t >= at && s.hops.length === 1), 20_000);
    cold.push(paths.samples.find((s) => s.t >= at && s.hops.length === 1)!.t - at);
  }
  if (!ONLY) console.log(`vip bgp cold start of all three: ${RUNS} runs; first path ${fmt(cold)} (process start, the 1 s warm-up, BGP and BFD sessions up); samples with two paths ${paths.doubles().length - coldBefore}`);
  console.log(`vip bgp bench total: ${paths.samples.length} table samples, ${paths.doubles().length} with two paths; ${requests.list.length} requests, ${requests.list.filter((r) => !r.ok).length} failed`);
} finally {
  await Promise.all([paths?.stop(), requests?.stop()]);
  await vip.destroy();
}
