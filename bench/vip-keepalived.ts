/**
 * keepalived in the control-plane VIP lab (issue 28), configured exactly as kubeadm's HA guide
 * documents it (bench/kubeadm-ha-guide.ts: VRRP with 1 s adverts, n1 MASTER at 101, n2 and n3
 * BACKUP at 100, check_apiserver.sh every 3 s, weight -2, fall 10, rise 2), to set measured
 * figures beside bench/vip-failover.ts's for `edge-ccm vip`. Same lab (test/harness/vip-lab.ts:
 * three hosts with a kube-apiserver each, one shared etcd, the VIP on each host's lo with
 * arp_ignore=1; `edge-ccm vip` is not started), same raw-ARP prober every 100 ms and client
 * request through the VIP every 100 ms (0.3 s timeout).
 *
 * Variant `keepalived` (the default): keepalived alone, the VIP on the API servers' own port.
 * Variant `haproxy`: the guide's pairing, haproxy on every host at 8443 balancing over all three
 * API servers, the check script and the client on 8443.
 *
 * Faults of the holder: its kube-apiserver killed or hung, keepalived stopped (SIGTERM) or killed
 * (SIGKILL), its link down, the other two partitioned from it (VRRP's adverts included).
 * For each fault of the holder, RUNS times: the time from the fault to the first ARP answer from
 * another host, to the first good request after the first failed one (0: none failed), the
 * failed requests, and the probes answered by two MACs (while the fault lasts and while healing).
 * Each fault is held HOLD_MS after the first good request. A fault the VIP is not meant to leave
 * for (haproxy variant: the holder's API server killed) is watched for OBSERVE_MS instead.
 * Healing restarts what was stopped (and removes a VIP a killed keepalived left on eth0), then
 * waits until n1 (the MASTER) holds the VIP alone again.
 * Usage: bun bench/vip-keepalived.ts [RUNS=5] [keepalived|haproxy] [PART,PART...: only the faults whose names contain one]
 * (root; keepalived, haproxy: scripts/install-network-tools.sh; dist/edge-ccm built, which the lab checks for). BENCHMARKS.md.
 */
import { chmodSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ArpProber, percentile, type Probe } from '../test/harness/arp-probes.ts';
import { eventually } from '../test/harness/eventually.ts';
import { healHostPartition, partitionHost } from '../test/harness/host-partition.ts';
import { NODES, type NodeName } from '../test/harness/l2-lab.ts';
import type { LoggedProcess } from '../test/harness/processes.ts';
import { API_PORT, VIP, VipLab } from '../test/harness/vip-lab.ts';
import { checkApiserverScript, haproxyCfg, keepalivedConf, type VrrpRole } from './kubeadm-ha-guide.ts';

const RUNS = Number(process.argv[2] ?? 5);
const VARIANT = process.argv[3] ?? 'keepalived';
if (VARIANT !== 'keepalived' && VARIANT !== 'haproxy') throw new Error(`variant must be keepalived or haproxy, not ${VARIANT}`);
const ONLY = process.argv[4]?.split(',');
const HAPROXY_PORT = 8443;
const PORT = VARIANT === 'haproxy' ? HAPROXY_PORT : API_PORT;
const MASTER: NodeName = 'n1';
const ROLE: Record<NodeName, VrrpRole> = { n1: { state: 'MASTER', priority: 101 }, n2: { state: 'BACKUP', priority: 100 }, n3: { state: 'BACKUP', priority: 100 } };
/** How long a fault the VIP should stay for is watched. */
const OBSERVE_MS = 15_000;
/** How long a fault is held after the move, so what answers ARP meanwhile is seen (two holders after a SIGKILL). */
const HOLD_MS = 3000;

for (const tool of ['/usr/sbin/keepalived', ...(VARIANT === 'haproxy' ? ['/usr/sbin/haproxy'] : [])]) {
  if (!existsSync(tool)) throw new Error(`${tool} is missing: run bash scripts/install-network-tools.sh (as root)`);
}

const vip = await VipLab.build();
const { lab } = vip.site;
const prober = ArpProber.start(vip.site, VIP, 'keepalived-bench-prober');
const keepaliveds = new Map<NodeName, LoggedProcess>();
const haproxies = new Map<NodeName, LoggedProcess>();
const requests: { t: number; ok: boolean }[] = [];
let requesting = true;

const file = (node: NodeName, what: string) => join(lab.dir, `kubeadm-guide-${node}-${what}`);

function startKeepalived(node: NodeName): void {
  const conf = file(node, 'keepalived.conf');
  const script = file(node, 'check_apiserver.sh');
  writeFileSync(script, checkApiserverScript(VIP, PORT));
  chmodSync(script, 0o755);
  writeFileSync(conf, keepalivedConf({ role: ROLE[node], interface: 'eth0', vip: VIP, checkScript: script }));
  // Own pid files per host (the defaults in /run are one per machine); the log on the console.
  keepaliveds.set(node, lab.spawnLogged(node, `keepalived-${node}`, [
    'keepalived', '--dont-fork', '--log-console', '--log-detail', '-f', conf,
    '-p', file(node, 'main.pid'), '-r', file(node, 'vrrp.pid'), '-c', file(node, 'checker.pid'),
  ]));
}

function startHaproxy(node: NodeName): void {
  const cfg = file(node, 'haproxy.cfg');
  writeFileSync(cfg, haproxyCfg(HAPROXY_PORT, NODES.map((n) => ({ name: n, address: vip.site.nodes[n].lanIPv4, port: API_PORT }))));
  haproxies.set(node, lab.spawnLogged(node, `haproxy-${node}`, ['haproxy', '-db', '-f', cfg]));
}

/** SIGKILL every keepalived process of the host at once (a crash or OOM kill): none can remove the VIP. */
async function killKeepalived(node: NodeName): Promise<void> {
  const main = keepaliveds.get(node)!;
  for (const child of ['vrrp.pid', 'checker.pid']) {
    const path = file(node, child);
    const pid = existsSync(path) ? Number(readFileSync(path, 'utf8').trim()) : NaN;
    // Children first, the parent in the same tick: it is gone before it could restart one.
    if (pid > 0) process.kill(pid, 'SIGKILL');
  }
  await main.kill();
}

/** The VIP a killed keepalived left on eth0 (keepalived adds it as /32), removed before it restarts. */
async function removeLeftVip(node: NodeName): Promise<boolean> {
  if (!(await lab.ip(node, '-4', 'addr', 'show', 'dev', 'eth0')).includes(`${VIP}/32`)) return false;
  await lab.ip(node, 'addr', 'del', `${VIP}/32`, 'dev', 'eth0');
  return true;
}

async function requestOk(): Promise<boolean> {
  const r = await lab.exec('client', ['curl', '-sk', '-o', '/dev/null', '-w', '%{http_code}', '--max-time', '0.3', `https://${VIP}:${PORT}/readyz`]);
  return r.stdout.trim() === '200';
}

const holderOf = (p: Probe | undefined): NodeName | undefined => (p?.macs.length === 1 ? vip.nodeOfMac(p.macs[0]!) : undefined);
const doublesIn = (from: number, to: number) => prober.probes().filter((p) => p.t >= from && p.t < to && p.macs.length > 1).length;
const probesIn = (from: number, to: number) => prober.probes().filter((p) => p.t >= from && p.t < to).length;
let leftVips = 0;

type Fault = { name: string; moves: boolean; apply: (holder: NodeName) => Promise<void>; heal: (holder: NodeName) => Promise<void> };
const link = (state: 'up' | 'down') => async (h: NodeName) => void (await lab.ip(h, 'link', 'set', 'eth0', state));
const ALL_FAULTS: Fault[] = [
  { name: "holder's kube-apiserver killed", moves: VARIANT === 'keepalived', apply: (h) => vip.apiServers.get(h)!.kill(), heal: (h) => vip.startApiServer(h) },
  ...(VARIANT === 'haproxy' ? [{ name: "holder's haproxy SIGKILLed", moves: true, apply: (h: NodeName) => haproxies.get(h)!.kill(), heal: async (h: NodeName) => startHaproxy(h) }] : []),
  { name: "holder's keepalived SIGTERM (graceful stop)", moves: true, apply: async (h) => void (await keepaliveds.get(h)!.terminate()), heal: async (h) => startKeepalived(h) },
  {
    name: "holder's keepalived SIGKILLed (all its processes)",
    moves: true,
    apply: killKeepalived,
    heal: async (h) => {
      if (await removeLeftVip(h)) leftVips += 1;
      startKeepalived(h);
    },
  },
  { name: "holder's link down", moves: true, apply: link('down'), heal: link('up') },
  {
    name: "holder's kube-apiserver hung (SIGSTOP: port kept, no answer)",
    moves: VARIANT === 'keepalived',
    apply: async (h) => void process.kill(vip.apiServers.get(h)!.pid, 'SIGSTOP'),
    heal: async (h) => void process.kill(vip.apiServers.get(h)!.pid, 'SIGCONT'),
  },
  {
    // All traffic between them dropped, VRRP's multicast adverts (224.0.0.18) included; the client reaches all three.
    name: 'the other two hosts partitioned from the holder',
    moves: true,
    apply: (h) => partitionHost(lab, h, NODES.filter((n) => n !== h).map((n) => vip.site.nodes[n].lanIPv4), ['224.0.0.18']),
    heal: (h) => healHostPartition(lab, h),
  },
];
const FAULTS = ALL_FAULTS.filter((f) => !ONLY || ONLY.some((part) => f.name.includes(part)));

const fmt = (xs: number[]) => `p50 ${percentile(xs, 50)} ms, max ${Math.max(...xs)} ms`;

try {
  await Promise.all(NODES.map((n) => vip.startApiServer(n)));
  if (VARIANT === 'haproxy') for (const n of NODES) startHaproxy(n);
  for (const n of NODES) startKeepalived(n);
  const startedAt = Date.now();
  await eventually(`${MASTER} holds the VIP (${keepaliveds.get(MASTER)!.logPath})`, () => holderOf(prober.probes().at(-1)) === MASTER, 60_000);
  console.log(`keepalived (${VARIANT}) start of all three: first ARP answer from ${MASTER} after ${prober.probes().find((p) => p.t >= startedAt && p.macs.length > 0)!.t - startedAt} ms`);
  const requester = (async () => {
    while (requesting) {
      const t = Date.now();
      requests.push({ t, ok: await requestOk() });
      await Bun.sleep(Math.max(0, 100 - (Date.now() - t)));
    }
  })();
  for (const fault of FAULTS) {
    const arp: number[] = [];
    const request: number[] = [];
    const failed: number[] = [];
    let faultDoubles = 0;
    let faultProbes = 0;
    let healDoubles = 0;
    let moved = 0;
    for (let run = 0; run < RUNS; run++) {
      await Bun.sleep(2000);
      const holder = holderOf(prober.probes().at(-1));
      if (!holder) throw new Error(`no single holder before run ${run} of ${fault.name}`);
      const faultAt = Date.now();
      await fault.apply(holder);
      const fromAnother = () => prober.probes().find((p) => p.t >= faultAt && p.macs.some((m) => vip.nodeOfMac(m) !== holder));
      if (fault.moves) {
        // The API-server fault waits out fall 10 x interval 3 s by design.
        await eventually(`another host answers for the VIP (${fault.name})`, () => !!fromAnother(), 60_000);
        const first = fromAnother()!;
        await eventually('a request succeeds after the move', () => requests.some((r) => r.t > first.t && r.ok), 30_000);
        await Bun.sleep(HOLD_MS);
      } else {
        await Bun.sleep(OBSERVE_MS);
      }
      const first = fromAnother();
      if (first) {
        arp.push(first.t - faultAt);
        moved += 1;
      }
      const firstFailed = requests.find((r) => r.t >= faultAt && !r.ok);
      const firstOkAfter = firstFailed && requests.find((r) => r.t > firstFailed.t && r.ok);
      request.push(firstOkAfter ? firstOkAfter.t - faultAt : 0);
      failed.push(requests.filter((r) => r.t >= faultAt && !r.ok && (!firstOkAfter || r.t < firstOkAfter.t)).length);
      const healAt = Date.now();
      faultDoubles += doublesIn(faultAt, healAt);
      faultProbes += probesIn(first?.t ?? healAt, healAt);
      await fault.heal(holder);
      // Healed: the MASTER (priority 101) preempts once its check passes again (rise 2 x 3 s).
      await eventually(`${MASTER} holds the VIP alone again`, () => prober.probes().slice(-5).every((p) => holderOf(p) === MASTER), 90_000);
      healDoubles += doublesIn(healAt, Date.now());
    }
    const arpText = moved === 0 ? `the VIP never left the holder (${OBSERVE_MS / 1000} s watched per run)` : `first ARP answer from another host ${fmt(arp)} (${moved} of ${RUNS} runs moved)`;
    console.log(`keepalived (${VARIANT}): ${fault.name}: ${RUNS} runs; ${arpText}; first good request after a failed one ${fmt(request)}; failed requests p50 ${percentile(failed, 50)}, max ${Math.max(...failed)}; probes answered by two MACs: ${faultDoubles} during the fault (${faultProbes} probes from the new holder's first answer to the heal), ${healDoubles} while healing`);
  }
  requesting = false;
  await requester;
  const all = prober.probes();
  console.log(`keepalived (${VARIANT}) bench total: ${all.length} probes, ${all.filter((p) => p.macs.length > 1).length} answered by two MACs; ${requests.length} requests, ${requests.filter((r) => !r.ok).length} failed; VIPs a killed keepalived left on eth0, removed before its restart: ${leftVips}`);
} finally {
  requesting = false;
  await prober.stop();
  // What keepalived warned about (the lab dir goes with the lab).
  for (const [node, p] of keepaliveds) {
    const warnings = new Set(readFileSync(p.logPath, 'utf8').split('\n').filter((l) => /warn|secur|error|fail/i.test(l) && !/check_apiserver.*(failed|succeeded)/i.test(l)).map((l) => l.replace(/^\w{3} \w{3} +\d+ [\d:]+ \d{4}: /, '')));
    for (const w of [...warnings].slice(0, 10)) console.error(`keepalived log ${node}: ${w}`);
  }
  await Promise.all([...keepaliveds.values()].map((p) => p.terminate(3000)));
  await Promise.all([...haproxies.values()].map((p) => p.kill()));
  await vip.destroy();
}
