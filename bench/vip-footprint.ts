/**
 * What the control-plane VIP costs on each host (issue 38): `edge-ccm vip` (announce: l2, VIPs
 * from 198.51.100.20) beside kube-vip in its control-plane ARP mode (--controlplane --arp
 * --leaderElection, VIP 198.51.100.40 on eth0), both running at once on the three hosts of
 * test/harness/vip-lab.ts (network namespaces, a real kube-apiserver on each host, one etcd).
 * RSS of every process after the settle, then CPU-seconds, wake-ups and RSS over an idle window,
 * with the load average (the machine is shared).
 *
 *   bun bench/vip-footprint.ts [--kube-vip=PATH (default: built by scripts/install-anchors.sh)] [--settle-seconds=20] [--idle-seconds=60]
 *     [--variant=NAME:BINARY[::ENV=V,...]]...   (default: dist/edge-ccm; a variant without ENV runs with the
 *                                                 systemd unit's Environment= lines, deploy/systemd/edge-ccm-vip.service;
 *                                                 either is the whole environment, with systemd's PATH: not added to the shell's)
 *     [--timings=NAME:KEY=MS,...]...            (controlPlaneEndpoint.timings keys; default: the defaults)
 *     [--interface=eth0]                         (edge-ccm's; one no host has: the VIP without its L2 responder)
 *     [--page-cache=cold|as-is]                  (cold: every binary dropped from the page cache first, bench/page-cache.ts)
 *     [--kube-vip-lease=NAME:D,R,P]...           (kube-vip groups, each with its Lease's duration, renew deadline and
 *                                                 retry in seconds, its own Lease and VIP; default: one at kube-vip's defaults)
 *     [--lan-arp-per-second=N]                   (a segment's everyday ARP, bench/lan-arp.ts: the client asks for an
 *                                                 address nobody holds N times a second, from the settle on; default 0)
 *
 * Every variant runs with every timings, all at once: each pair on all three hosts with a VIP
 * (198.51.100.20 and up), heartbeat port and metrics port of its own, so builds and timings are
 * compared in one window. E.g. kube-vip's failover time (seconds: lease 5 s, renew 3 s, retry
 * 1 s): --timings=defaults: --timings=seconds:heartbeatIntervalMilliseconds=1000,livenessTimeoutMilliseconds=4000,healthIntervalMilliseconds=1000,healthTimeoutMilliseconds=800
 *
 * Needs root, the network tools and the control-plane binaries, as bench/vip-failover.ts.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { VipLab } from '../test/harness/vip-lab.ts';
import { NODES } from '../test/harness/l2-lab.ts';
import type { LoggedProcess } from '../test/harness/processes.ts';
import { idleWindow } from './proc-sampler.ts';
import { parseVariants } from './variants.ts';
import { anchors } from './anchors.ts';
import { evictFromPageCache } from './page-cache.ts';
import { stringOption as opt } from './args.ts';
import { unitEnvironment } from './deployed-env.ts';
import { lanArpPerSecond, startLanArp } from './lan-arp.ts';

const args = process.argv.slice(2);
const KUBE_VIP = (opt('kube-vip', '') || anchors().kubeVip);
const SETTLE_S = Number(opt('settle-seconds', '20'));
const IDLE_S = Number(opt('idle-seconds', '60'));
// No host's own: n1's LAN address is 198.51.100.11 (test/harness/l2-lab.ts), which this bench gave
// kube-vip until session 13; the edge-ccm variants take 198.51.100.20-39, kube-vip's groups 40-49.
const kubeVipGroups = args.filter((a) => a.startsWith('--kube-vip-lease=')).map((a, i) => {
  const value = a.slice('--kube-vip-lease='.length);
  const [name, timers] = value.split(':');
  const lease = (timers ?? '').split(',').map(Number);
  if (!name || !/^[a-z0-9-]+$/.test(name) || lease.length !== 3 || lease.some((n) => !Number.isInteger(n) || n <= 0)) {
    throw new Error(`--kube-vip-lease=${value}: NAME:D,R,P expected (a lowercase name, then three whole seconds: duration, renew deadline, retry)`);
  }
  return { name, lease: lease as [number, number, number], address: `198.51.100.${40 + i}`, metricsPort: 2112 + i };
});
if (kubeVipGroups.length > 10) throw new Error(`${kubeVipGroups.length} --kube-vip-lease groups: at most 10 (their VIPs are 198.51.100.40-49)`);
/** What the VIP's unit sets (`Environment=NAME=VALUE` lines): the VIP as installed runs with it. */
const UNIT_ENV = unitEnvironment('edge-ccm-vip.service');
const variants = parseVariants(args, [`edge-ccm:${join(import.meta.dir, '../dist/edge-ccm')}`]).map((v) => ({ ...v, env: v.env ?? UNIT_ENV }));
const timingArgs = args.filter((a) => a.startsWith('--timings=')).map((a) => a.slice('--timings='.length));
const timings = (timingArgs.length ? timingArgs : ['defaults:']).map((t) => {
  const colon = t.indexOf(':');
  if (colon < 1) throw new Error(`--timings=${t}: NAME:KEY=MS,... expected`);
  const values = Object.fromEntries(t.slice(colon + 1).split(',').filter(Boolean).map((kv) => {
    const [k, ms] = kv.split('=');
    if (!k || !ms || !Number.isFinite(Number(ms))) throw new Error(`--timings=${t}: ${kv} is not KEY=MS`);
    return [k, Number(ms)];
  }));
  return { name: t.slice(0, colon), values: Object.keys(values).length ? values : undefined };
});
const IFACE = opt('interface', 'eth0');
const LAN_ARP_PER_SECOND = lanArpPerSecond();
const PAGE_CACHE = opt('page-cache', 'cold');
if (PAGE_CACHE !== 'cold' && PAGE_CACHE !== 'as-is') throw new Error(`--page-cache=${PAGE_CACHE}: cold or as-is`);
const pairs = variants.flatMap((v) => timings.map((t) => ({ ...v, timings: t })));
if (pairs.length > 20) throw new Error(`${pairs.length} variant x timings pairs: at most 20 (their VIPs are 198.51.100.20-39)`);
if (!existsSync(KUBE_VIP)) throw new Error(`${KUBE_VIP} is missing: build kube-vip there (BENCHMARKS.md, footprint, says how)`);

const vip = await VipLab.build();
try {
  await Promise.all(NODES.map((n) => vip.startApiServer(n)));
  if (PAGE_CACHE === 'cold') evictFromPageCache([KUBE_VIP, ...variants.map((v) => v.binary)]);
  const sides: { name: string; node: string; proc: LoggedProcess; metricsPort?: number }[] = [];
  pairs.forEach((p, i) => {
    const name = `edge-ccm vip (announce: l2${IFACE === 'eth0' ? '' : ` on ${IFACE}`}) ${p.name}, timings ${p.timings.name}`;
    const fileName = `${p.name}-${p.timings.name}`.replace(/[^a-z0-9-]+/gi, '_');
    for (const n of NODES) {
      sides.push({ name, node: n, metricsPort: 7480 + i, proc: vip.startVipVariant(n, { name: fileName, binary: p.binary, address: `198.51.100.${20 + i}`, heartbeatPort: 7950 + i, metricsPort: 7480 + i, iface: IFACE, ...(p.timings.values ? { timings: p.timings.values } : {}), ...(p.env ? { env: p.env } : {}) }) });
    }
  });
  for (const g of kubeVipGroups.length ? kubeVipGroups : [undefined]) {
    for (const n of NODES) {
      sides.push({
        name: `kube-vip (control plane, ARP, leader election${g ? `, lease ${g.lease.join('/')} s` : ''})`, node: n,
        proc: vip.startKubeVip(n, g ? { binary: KUBE_VIP, address: g.address, lease: g.lease, group: { name: g.name, metricsPort: g.metricsPort } } : { binary: KUBE_VIP, address: '198.51.100.40' }),
      });
    }
  }
  startLanArp(vip.site.lab, LAN_ARP_PER_SECOND);
  await Bun.sleep(SETTLE_S * 1000);
  for (const s of sides) if (!s.proc.running) throw new Error(`${s.name} on ${s.node} exited: ${readFileSync(s.proc.logPath, 'utf8').slice(-2000)}`);
  for (const address of kubeVipGroups.length ? kubeVipGroups.map((g) => g.address) : ['198.51.100.40']) {
    const holders = await Promise.all(NODES.map(async (n) => (await vip.site.lab.ip(n, '-o', 'addr', 'show', 'dev', 'eth0')).includes(`${address}/`) ? n : undefined));
    console.log(`kube-vip's address ${address} held by: ${holders.filter(Boolean).join(',') || 'none'}`);
  }
  // Each edge-ccm vip's own view: holding, API server healthy, quorum, pauses (a process that misses its deadlines says so here).
  for (const s of sides) {
    if (s.metricsPort === undefined) continue;
    const metrics = (await vip.site.lab.exec(s.node, ['curl', '-sf', '--max-time', '2', `http://127.0.0.1:${s.metricsPort}/metrics`])).stdout;
    const gauge = (name: string) => new RegExp(`^${name} (\\S+)$`, 'm').exec(metrics)?.[1] ?? '?';
    console.log(`${s.name} on ${s.node}: holding ${gauge('edge_ccm_vip_holding')}, apiserver healthy ${gauge('edge_ccm_vip_apiserver_healthy')}, quorum ${gauge('edge_ccm_vip_quorum')}, pauses ${gauge('edge_ccm_vip_pauses_total')}`);
  }
  const { figures, load } = await idleWindow(sides.map((s) => s.proc.pid), IDLE_S);
  const rows = sides.map((s, i) => {
    const f = figures[i]!;
    return `| ${s.name} | ${s.node} | ${f.rssStart.toFixed(1)} | ${f.rssEnd.toFixed(1)} | ${f.anonEnd.toFixed(1)} | ${f.referenced.toFixed(1)} (${f.referencedCode.toFixed(1)}) | ${f.cpuPerMinute.toFixed(3)} | ${f.wakeupsPerSecond.toFixed(1)} | ${load} |`;
  });
  sides.forEach((s, i) => console.log(`${s.name} on ${s.node}: wake-ups/s by thread: ${figures[i]!.byThread}; CPU-ms/min by thread: ${figures[i]!.cpuByThread}`));
  console.log(`| side | host | RSS after ${SETTLE_S} s (MiB) | RSS after ${IDLE_S} s idle (MiB) | of it anonymous (MiB) | touched in the idle window (of it machine code), MiB | idle CPU-s/min | wake-ups/s (voluntary context switches, all threads) | load avg (1 min) |\n|---|---|---|---|---|---|---|---|---|\n${rows.join('\n')}`);
  // Stopped gracefully (the lab's cleanup SIGKILLs), so a variant run with BUN_OPTIONS=--cpu-prof writes its profile.
  await Promise.all(sides.filter((s) => s.metricsPort !== undefined).map((s) => s.proc.terminate(5_000)));
} finally {
  await vip.destroy();
}

