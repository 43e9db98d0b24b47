/**
 * What one incident (a fault of the VIP's holder, then its heal) costs the API server's clients,
 * sticky (the default: the healed host waits in standby) against `preferredHost` (the ordered
 * handback: the healed preferred host takes the VIP back), issue 39. The lab of
 * bench/vip-failover.ts (three hosts, a kube-apiserver each, the compiled `edge-ccm vip`), and
 * from the client's namespace: a request to https://VIP:6443/readyz every 100 ms (0.3 s timeout),
 * and one long-lived watch (curl -N on a ConfigMap watch, TCP keepalive 1 s, so a connection the
 * new holder's kernel does not know is reset within about a second), restarted 100 ms after it
 * ends: every end is a connection reset or closed under the client. In preferred mode the
 * preferred host is the first in the rendezvous order and every fault is applied to it while it
 * holds; in sticky mode to whichever host holds. Per incident: moves of the VIP (from the ARP
 * prober), failed requests, watch ends; takes while another host still held it (vip logs, to
 * the ms) and probes answered by two MACs, which must stay 0.
 * Usage: bun bench/vip-incidents.ts [RUNS=10] [MODES=sticky,preferred] [FAULTS=apiserver,vip-kill,link,partition]
 * (root; after bun scripts/build.ts). VIP_BENCH_CPU_LOAD=N runs N busy loops beside it. BENCHMARKS.md.
 */
import { readFileSync } from 'node:fs';
import { rankNodes } from '../src/net/l2/election.ts';
import { ArpProber, percentile } from '../test/harness/arp-probes.ts';
import { eventually } from '../test/harness/eventually.ts';
import { healHostPartition, partitionHost } from '../test/harness/host-partition.ts';
import { NODES, type NodeName } from '../test/harness/l2-lab.ts';
import { VIP, VIP_KEY, VipLab } from '../test/harness/vip-lab.ts';
import { describeOverlaps, holderOverlaps, VipRequests } from '../test/harness/vip-probes.ts';
import { CpuLoad } from './cpu-load.ts';

const RUNS = Number(process.argv[2] ?? 10);
const MODES = (process.argv[3] ?? 'sticky,preferred').split(',') as ('sticky' | 'preferred')[];
const ORDER = rankNodes(VIP_KEY, NODES) as NodeName[];

const vip = await VipLab.build();
const prober = ArpProber.start(vip.site, VIP, 'vip-incidents-prober');
const load = CpuLoad.start(Number(process.env.VIP_BENCH_CPU_LOAD ?? 0));

const others = (n: NodeName) => NODES.filter((o) => o !== n);
type Fault = { name: string; apply: (h: NodeName) => Promise<void>; heal: (h: NodeName) => Promise<void> };
const FAULTS: Record<string, Fault> = {
  apiserver: { name: "holder's kube-apiserver killed, then started again", apply: (h) => vip.apiServers.get(h)!.kill(), heal: (h) => vip.startApiServer(h) },
  'vip-kill': { name: "holder's edge-ccm SIGKILLed, then started again", apply: (h) => vip.vips.get(h)!.kill(), heal: async (h) => void vip.startVip(h) },
  link: { name: "holder's link down, then up", apply: async (h) => void (await vip.site.lab.ip(h, 'link', 'set', 'eth0', 'down')), heal: async (h) => void (await vip.site.lab.ip(h, 'link', 'set', 'eth0', 'up')) },
  partition: {
    name: 'holder partitioned from the other two (the client reaches all three), then healed',
    apply: (h) => partitionHost(vip.site.lab, h, others(h).map((n) => vip.site.nodes[n].lanIPv4)),
    heal: (h) => healHostPartition(vip.site.lab, h),
  },
};
const faultNames = (process.argv[4] ?? Object.keys(FAULTS).join(',')).split(',');
for (const f of faultNames) if (!FAULTS[f]) throw new Error(`unknown fault ${f}: one of ${Object.keys(FAULTS).join(', ')}`);

/**
 * The watch: one curl at a time, each start and end logged with its ms and exit code. An end
 * with 7 (refused) or 28 (connect timeout) is an attempt that never connected (while no API
 * server behind the VIP answers); every other end lost an established watch.
 */
const NEVER_CONNECTED = new Set([7, 28]);
const watchScript = `while :; do echo "open $(date +%s%3N)"; curl -sk -N --connect-timeout 2 --keepalive-time 1 -o /dev/null -H 'Authorization: Bearer ${vip.adminToken}' 'https://${VIP}:6443/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=3600'; rc=$?; echo "end $(date +%s%3N) $rc"; sleep 0.1; done`;
const watch = vip.site.lab.spawnLogged('client', 'vip-incidents-watch', ['sh', '-c', watchScript]);
const watchEnds = (from: number, to: number) => readFileSync(watch.logPath, 'utf8').split('\n').flatMap((l) => {
  const m = /^end (\d+) (\d+)/.exec(l);
  return m && Number(m[1]) >= from && Number(m[1]) < to ? [Number(m[2])] : [];
});
const requests = new VipRequests(vip, VIP);

const answering = (): NodeName | undefined => {
  const last = prober.probes().at(-1);
  return last?.macs.length === 1 ? vip.nodeOfMac(last.macs[0]!) : undefined;
};
/** Changes of the host answering the prober between `from` and `to`, `holder` answering before. */
function moves(holder: NodeName, from: number, to: number): number {
  let last: NodeName | undefined = holder, count = 0;
  for (const p of prober.probes().filter((x) => x.t >= from && x.t < to && x.macs.length === 1)) {
    const n = vip.nodeOfMac(p.macs[0]!);
    if (last && n !== last) count += 1;
    last = n;
  }
  return count;
}
/** "vip taken" lines in the vips' logs between `from` and `to`: each is a move of the VIP. */
function takesIn(from: number, to: number): number {
  return NODES.reduce((sum, n) => sum + readFileSync(vip.vips.get(n)!.logPath, 'utf8').split('\n').filter((l) => {
    const m = /^(\S+Z) INFO "vip taken"/.exec(l);
    return m && Date.parse(m[1]!) >= from && Date.parse(m[1]!) < to;
  }).length, 0);
}

/** The healed host is eligible again (warmed up, healthy, with quorum): where a handback would begin. */
async function eligible(n: NodeName): Promise<boolean> {
  if ((await vip.vipEndpoint(n, '/readyz')) !== 'ok') return false;
  const m = (await vip.vipEndpoint(n, '/metrics')) ?? '';
  return /^edge_ccm_vip_apiserver_healthy 1$/m.test(m) && /^edge_ccm_vip_quorum 1$/m.test(m);
}

async function restartAll(): Promise<void> {
  await Promise.all(NODES.map((n) => vip.vips.get(n)?.kill()));
  for (const n of NODES) vip.startVip(n);
}

const fmt = (xs: number[]) => `p50 ${percentile(xs, 50)}, max ${Math.max(...xs)}, total ${xs.reduce((a, b) => a + b, 0)}`;

try {
  for (const n of NODES) vip.startVip(n);
  await Promise.all(NODES.map((n) => vip.startApiServer(n)));
  await eventually('a holder', () => !!answering(), 30_000);
  for (const mode of MODES) {
    vip.setPreferredHost(mode === 'preferred' ? ORDER[0] : undefined);
    await restartAll();
    if (mode === 'preferred') await eventually(`${ORDER[0]} (preferred) holds the VIP`, () => answering() === ORDER[0], 30_000);
    else await eventually('a holder', () => !!answering(), 30_000);
    for (const key of faultNames) {
      const fault = FAULTS[key]!;
      const perRun: { moves: number; takes: number; failed: number; resets: number; codes: number[] }[] = [];
      const from = Date.now();
      for (let run = 0; run < RUNS; run++) {
        await Bun.sleep(2000);
        // An incident starts with the watch open and one holder (in preferred mode, the preferred host).
        await eventually('one holder, the watch open for 1 s', () => {
          const last = readFileSync(watch.logPath, 'utf8').trimEnd().split('\n').at(-1)!;
          const open = /^open (\d+)$/.exec(last);
          return !!answering() && (mode === 'sticky' || answering() === ORDER[0]) && !!open && Date.now() - Number(open[1]) > 1000;
        }, 60_000);
        const holder = answering()!;
        const at = Date.now();
        await fault.apply(holder);
        await eventually(`the VIP leaves ${holder}`, () => prober.probes().some((p) => p.t >= at && p.macs.length === 1 && vip.nodeOfMac(p.macs[0]!) !== holder), 20_000);
        await Bun.sleep(1000);
        await fault.heal(holder);
        await eventually(`${holder} eligible again`, () => eligible(holder), 60_000);
        if (mode === 'preferred') await eventually(`${holder} holds the VIP again (handback)`, () => answering() === holder, 30_000);
        // Long enough for a handback to have shown (and its watch to have ended and reopened).
        await Bun.sleep(3000);
        const to = Date.now();
        const codes = watchEnds(at, to);
        perRun.push({ moves: moves(holder, at, to), takes: takesIn(at, to), failed: requests.list.filter((r) => r.t >= at && r.t < to && !r.ok).length, resets: codes.filter((c) => !NEVER_CONNECTED.has(c)).length, codes });
      }
      const to = Date.now();
      const doubles = prober.probes().filter((p) => p.t >= from && p.t < to && p.macs.length > 1).length;
      console.log(`vip incidents, ${mode}${mode === 'preferred' ? ` (preferredHost: ${ORDER[0]})` : ''}: ${fault.name}: ${RUNS} runs; per incident: takes of the VIP (vip logs) ${fmt(perRun.map((r) => r.takes))}, moves seen by the prober ${fmt(perRun.map((r) => r.moves))}; failed requests (every 100 ms) ${fmt(perRun.map((r) => r.failed))}; established watch connections lost ${fmt(perRun.map((r) => r.resets))} (curl exit codes of the losses ${[...new Set(perRun.flatMap((r) => r.codes.filter((c) => !NEVER_CONNECTED.has(c))))].sort().join(',') || '-'}; reconnects refused or timed out ${perRun.reduce((a, r) => a + r.codes.filter((c) => NEVER_CONNECTED.has(c)).length, 0)} in all); probes answered by two MACs ${doubles}; ${describeOverlaps(holderOverlaps(vip, from, to))}`);
    }
  }
  console.log(`vip incidents: ${load.describe()}`);
} finally {
  await requests.stop();
  await prober.stop();
  await load.stop();
  await vip.destroy();
}
