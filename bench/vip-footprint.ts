/**
 * What the control-plane VIP costs on each host (issue 38): `edge-ccm vip` (announce: l2, VIP
 * 198.51.100.10) beside kube-vip in its control-plane ARP mode (--controlplane --arp
 * --leaderElection, VIP 198.51.100.11 on eth0), both running at once on the three hosts of
 * test/harness/vip-lab.ts (network namespaces, a real kube-apiserver on each host, one etcd).
 * RSS of every process after the settle, then CPU-seconds and RSS over an idle window, with the
 * load average (the machine is shared).
 *
 *   bun bench/vip-footprint.ts [--kube-vip=~/.cache/edge-ccm/anchors/kube-vip] [--settle-seconds=20] [--idle-seconds=60]
 *
 * Needs root, the network tools and the control-plane binaries, as bench/vip-failover.ts.
 */
import { existsSync, readFileSync } from 'node:fs';
import { homedir, loadavg } from 'node:os';
import { join } from 'node:path';
import { VipLab } from '../test/harness/vip-lab.ts';
import { NODES } from '../test/harness/l2-lab.ts';
import type { LoggedProcess } from '../test/harness/processes.ts';
import { cpuSeconds, residentMiB } from './proc-sampler.ts';

const args = process.argv.slice(2);
const opt = (name: string, dflt: string) => args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? dflt;
const KUBE_VIP = opt('kube-vip', join(homedir(), '.cache/edge-ccm/anchors/kube-vip'));
const SETTLE_S = Number(opt('settle-seconds', '20'));
const IDLE_S = Number(opt('idle-seconds', '60'));
const KUBE_VIP_ADDRESS = '198.51.100.11';
if (!existsSync(KUBE_VIP)) throw new Error(`${KUBE_VIP} is missing: build kube-vip there (BENCHMARKS.md, footprint, says how)`);

const vip = await VipLab.build();
try {
  await Promise.all(NODES.map((n) => vip.startApiServer(n)));
  const sides: { name: string; node: string; proc: LoggedProcess }[] = [];
  for (const n of NODES) sides.push({ name: 'edge-ccm vip (announce: l2)', node: n, proc: vip.startVip(n) });
  for (const n of NODES) {
    sides.push({
      name: 'kube-vip (control plane, ARP, leader election)', node: n,
      proc: vip.startKubeVip(n, { binary: KUBE_VIP, address: KUBE_VIP_ADDRESS }),
    });
  }
  await Bun.sleep(SETTLE_S * 1000);
  for (const s of sides) if (!s.proc.running) throw new Error(`${s.name} on ${s.node} exited: ${readFileSync(s.proc.logPath, 'utf8').slice(-2000)}`);
  const holders = await Promise.all(NODES.map(async (n) => (await vip.site.lab.ip(n, '-o', 'addr', 'show', 'dev', 'eth0')).includes(KUBE_VIP_ADDRESS) ? n : undefined));
  console.log(`kube-vip's address held by: ${holders.filter(Boolean).join(',') || 'none'}`);
  // Each edge-ccm vip's own view: holding, API server healthy, quorum, pauses (a process that misses its deadlines says so here).
  for (const n of NODES) {
    const metrics = (await vip.vipEndpoint(n, '/metrics')) ?? '';
    const gauge = (name: string) => new RegExp(`^${name} (\\S+)$`, 'm').exec(metrics)?.[1] ?? '?';
    console.log(`edge-ccm vip on ${n}: holding ${gauge('edge_ccm_vip_holding')}, apiserver healthy ${gauge('edge_ccm_vip_apiserver_healthy')}, quorum ${gauge('edge_ccm_vip_quorum')}, pauses ${gauge('edge_ccm_vip_pauses_total')}`);
  }
  const rssStart = sides.map((s) => residentMiB(s.proc.pid));
  const cpu0 = sides.map((s) => cpuSeconds(s.proc.pid));
  const load0 = loadavg()[0]!;
  await Bun.sleep(IDLE_S * 1000);
  const load1 = loadavg()[0]!;
  const rows = sides.map((s, i) => {
    const end = residentMiB(s.proc.pid);
    return `| ${s.name} | ${s.node} | ${rssStart[i]!.rss.toFixed(1)} | ${end.rss.toFixed(1)} | ${end.anon.toFixed(1)} | ${(((cpuSeconds(s.proc.pid) - cpu0[i]!) * 60) / IDLE_S).toFixed(3)} | ${load0.toFixed(1)}-${load1.toFixed(1)} |`;
  });
  console.log(`| side | host | RSS after ${SETTLE_S} s (MiB) | RSS after ${IDLE_S} s idle (MiB) | of it anonymous (MiB) | idle CPU-s/min | load avg (1 min) |\n|---|---|---|---|---|---|---|\n${rows.join('\n')}`);
} finally {
  await vip.destroy();
}

