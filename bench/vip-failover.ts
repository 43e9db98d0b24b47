/**
 * Control-plane VIP failover (issue 28), RUNS times per fault kind: three control-plane hosts in
 * network namespaces on one switch (test/harness/vip-lab.ts: a kube-apiserver each, one shared
 * etcd, the compiled `edge-ccm vip` on each), a raw-ARP prober every 100 ms and a client asking
 * https://VIP:6443/readyz every 100 ms (0.3 s timeout). For each fault of the holder: the time
 * from the fault to the first ARP answer from the new holder, to the first successful request
 * after the first failed one (0 when no request failed), to the first successful request after
 * that ARP answer, the failed requests; every probe answered by two MACs is counted (must stay
 * 0). Then: the holder on the majority side of a partition (no move, no failed request), load,
 * the cold start of all three at once, the bootstrap (one host first, the others joining), and
 * the kill fault over IPv6 (Neighbor Solicitations every 100 ms, requests to the IPv6 VIP).
 * Usage: bun bench/vip-failover.ts [RUNS=10] [SECTIONS=faults,majority,load,cold,bootstrap,ipv6]
 *   [--vip-binary=PATH] [--vip-env=K=V,...]   (the vips' binary and variables, theirs alone)
 * [--side=edge-ccm|kube-vip] [--kube-vip=BINARY] [--kube-vip-lease=15,10,2] (root; after bun
 * scripts/build.ts). BENCHMARKS.md.
 * --side=kube-vip runs the anchor of issue 38 in edge-ccm's place, judged alike: kube-vip's
 * control-plane ARP mode on the same three hosts for the same VIP (VipLab.startKubeVip), the
 * faults it shares with ours (the API server killed, SIGKILL, SIGTERM, link down), section
 * `faults` only, the VIP on no host's lo (kube-vip adds it to its holder's eth0). kube-vip exits
 * when it loses its lease (its pod's restart brings it back): started again 1 s after such an
 * exit, as the kubelet would (startSide).
 * VIP_BENCH_KEEP_LOGS=DIR copies the vip processes' and the prober's logs there before cleanup.
 */
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { rankNodes } from '../src/net/l2/election.ts';
import { ArpProber, percentile, type Probe } from '../test/harness/arp-probes.ts';
import { eventually } from '../test/harness/eventually.ts';
import { NODES, type NodeName } from '../test/harness/l2-lab.ts';
import type { LoggedProcess } from '../test/harness/processes.ts';
import { VIP, VIP6, VIP_KEY, VipLab } from '../test/harness/vip-lab.ts';
import { describeOverlaps, holderOverlaps } from '../test/harness/vip-probes.ts';
import { healHostPartition, partitionHost } from '../test/harness/host-partition.ts';
import { CpuLoad } from './cpu-load.ts';
import { anchors } from './anchors.ts';
import { option, stringOption as opt } from './args.ts';

const positional = process.argv.slice(2).filter((a) => !a.startsWith('--'));
const RUNS = Number(positional[0] ?? 10);
const SECTIONS = ['faults', 'majority', 'load', 'cold', 'bootstrap', 'ipv6'] as const;
/** A comma-separated subset of SECTIONS (default: all, in that order). */
const only = new Set(positional[1]?.split(',') ?? SECTIONS);
for (const s of only) if (!(SECTIONS as readonly string[]).includes(s)) throw new Error(`unknown section ${s}: one of ${SECTIONS.join(', ')}`);
/** Who holds the VIP: edge-ccm's `vip` mode, or kube-vip's control-plane ARP mode. */
const SIDE = opt('side', 'edge-ccm');
if (SIDE !== 'edge-ccm' && SIDE !== 'kube-vip') throw new Error(`--side=${SIDE}: edge-ccm or kube-vip`);
const KUBE_VIP = (opt('kube-vip', '') || anchors().kubeVip);
const KUBE_VIP_LEASE = opt('kube-vip-lease', '15,10,2').split(',').map(Number) as [number, number, number];
if (SIDE === 'kube-vip') {
  if (!existsSync(KUBE_VIP)) throw new Error(`--kube-vip=${KUBE_VIP} is missing: build kube-vip there (BENCHMARKS.md, footprint, says how)`);
  if (KUBE_VIP_LEASE.length !== 3 || KUBE_VIP_LEASE.some((n) => !(n > 0))) throw new Error(`--kube-vip-lease=${opt('kube-vip-lease', '')}: three positive seconds, duration,renew,retry`);
  if ([...only].some((s) => s !== 'faults')) throw new Error(`--side=kube-vip runs section faults only (the others read edge-ccm's metrics and logs), not ${[...only].join(',')}`);
}
const holderName = SIDE === 'kube-vip' ? `kube-vip (lease ${KUBE_VIP_LEASE.join('/')} s)` : 'edge-ccm';
/** The order every host elects in when all three are eligible. */
const ORDER = rankNodes(VIP_KEY, NODES) as NodeName[];
const HEARTBEAT_PORT = 7948;
/** Pause between two /readyz polls of the bootstrap's API server (the poll itself adds its own few ms). */
const READYZ_POLL_PAUSE_MS = 5;
const READYZ_WATCH = join(import.meta.dir, '..', 'test', 'fakes', 'readyz-watch-main.ts');

const vip = await VipLab.build();
vip.vipProcess = { binary: option('vip-binary'), env: envList(option('vip-env')) };
if (vip.vipProcess.binary || option('vip-env')) console.log(`vips: ${vip.vipProcess.binary ?? 'dist/edge-ccm'} ${option('vip-env') ?? ''}`);
const prober = ArpProber.start(vip.site, VIP, 'vip-bench-prober');

interface Request { t: number; ok: boolean }

/** Requests https://ADDRESS:6443/readyz from the client every 100 ms (0.3 s timeout) until stopped. */
function requestLoop(address: string): { requests: Request[]; stop: () => Promise<void> } {
  const requests: Request[] = [];
  let on = true;
  const loop = (async () => {
    while (on) {
      const t = Date.now();
      requests.push({ t, ok: await vip.readyz('client', address, 0.3) });
      await Bun.sleep(Math.max(0, 100 - (Date.now() - t)));
    }
  })();
  return { requests, stop: async () => { on = false; await loop; } };
}

/** What a family is watched through: its probes (ARP or NDP) and the requests to its VIP. */
interface Watch { probes: () => Probe[]; requests: Request[] }

const answering = (w: Watch): NodeName | undefined => {
  const last = w.probes().at(-1);
  return last?.macs.length === 1 ? vip.nodeOfMac(last.macs[0]!) : undefined;
};
const doubles = (w: Watch, from = 0, to = Infinity) => w.probes().filter((p) => p.t >= from && p.t <= to && p.macs.length > 1).length;
const failedRequests = (w: Watch, from: number, to: number) => w.requests.filter((r) => r.t >= from && r.t < to && !r.ok).length;
const fmt = (xs: number[]) => `p50 ${percentile(xs, 50)} ms, max ${Math.max(...xs)} ms`;
/** Occurrences of `text` in a process's whole log (its file is appended to by every restart). */
const logCount = (p: LoggedProcess, text: string) => readFileSync(p.logPath, 'utf8').split(text).length - 1;

/** edge-ccm logs every take and release; kube-vip's logs are not read. */
const overlapText = (from: number) => SIDE === 'edge-ccm' ? describeOverlaps(holderOverlaps(vip, from, Date.now())) : 'takes while another host held it: not read from kube-vip\'s logs';

/** Loads an nft table into the node's namespace (deleted by name on heal). */
async function nftTable(node: NodeName, table: string, chains: string): Promise<void> {
  const path = join(vip.site.lab.dir, `${table}-${node}.nft`);
  writeFileSync(path, `table inet ${table} {\n${chains}}\n`);
  const r = await vip.site.lab.exec(node, ['nft', '-f', path]);
  if (r.code !== 0) throw new Error(r.stderr);
}
async function deleteTable(node: NodeName, table: string): Promise<void> {
  const r = await vip.site.lab.exec(node, ['nft', 'delete', 'table', 'inet', table]);
  if (r.code !== 0) throw new Error(r.stderr);
}

/** Drops every packet between `node` and the two other hosts (the client still reaches all three). */
function partition(node: NodeName): Promise<void> {
  return partitionHost(vip.site.lab, node, NODES.filter((n) => n !== node).map((n) => vip.site.nodes[n].lanIPv4));
}
const healPartition = (node: NodeName) => healHostPartition(vip.site.lab, node);
const DEAF = 'vipbenchdeaf';

/** Nodes whose VIP process a fault killed: not restarted until the fault heals. */
const heldDown = new Set<NodeName>();
let stopping = false;
/**
 * Starts the side's VIP process on the node (kept in vip.vips, where the faults find it).
 * kube-vip exits when it loses its lease and its pod's restart brings it back: restarted here 1 s
 * after it exits by itself, as the kubelet would (not after a fault's kill, until the heal).
 */
function startSide(node: NodeName): void {
  if (SIDE === 'edge-ccm') {
    vip.startVip(node);
    return;
  }
  const proc = vip.startKubeVip(node, { binary: KUBE_VIP, address: VIP, lease: KUBE_VIP_LEASE });
  vip.vips.set(node, proc);
  void proc.exited.then(async () => {
    await Bun.sleep(1000);
    if (!stopping && !heldDown.has(node) && vip.vips.get(node) === proc) startSide(node);
  });
}
/** A fault's kill of the holder's VIP process: held down until healed. */
async function killHolder(node: NodeName, how: 'SIGKILL' | 'SIGTERM'): Promise<void> {
  heldDown.add(node);
  if (how === 'SIGKILL') await vip.vips.get(node)!.kill();
  else await vip.vips.get(node)!.terminate(5000);
}
function restartHolder(node: NodeName): void {
  heldDown.delete(node);
  startSide(node);
}

/** `anchors`: whether the fault also runs with --side=kube-vip. */
type Fault = { name: string; apply: (holder: NodeName) => Promise<void>; heal: (holder: NodeName) => Promise<void>; anchors?: true };
let woken: Promise<void> = Promise.resolve();
const FAULTS: Fault[] = [
  { name: "holder's kube-apiserver killed", apply: (h) => vip.apiServers.get(h)!.kill(), heal: (h) => vip.startApiServer(h), anchors: true },
  {
    name: "holder's kube-apiserver hung (SIGSTOP: port kept, no answer)",
    apply: async (h) => void process.kill(vip.apiServers.get(h)!.pid, 'SIGSTOP'),
    heal: async (h) => void process.kill(vip.apiServers.get(h)!.pid, 'SIGCONT'),
  },
  { name: `holder's ${holderName} SIGKILLed`, apply: (h) => killHolder(h, 'SIGKILL'), heal: async (h) => restartHolder(h), anchors: true },
  { name: `holder's ${holderName} SIGTERMed${SIDE === 'edge-ccm' ? " (release, 'leaving')" : ''}`, apply: (h) => killHolder(h, 'SIGTERM'), heal: async (h) => restartHolder(h), anchors: true },
  {
    name: "holder's edge-ccm paused (SIGSTOP 3 s, then SIGCONT)",
    apply: async (h) => {
      const pid = vip.vips.get(h)!.pid;
      process.kill(pid, 'SIGSTOP');
      woken = Bun.sleep(3000).then(() => void process.kill(pid, 'SIGCONT'));
    },
    // Woken: watched 3 s more (it must answer nothing queued while it slept) before the next run.
    heal: async () => {
      await woken;
      await Bun.sleep(3000);
    },
  },
  { name: "holder's link down", apply: async (h) => void (await vip.site.lab.ip(h, 'link', 'set', 'eth0', 'down')), heal: async (h) => void (await vip.site.lab.ip(h, 'link', 'set', 'eth0', 'up')), anchors: true },
  { name: 'the other two hosts partitioned from the holder (the client reaches all three)', apply: partition, heal: healPartition },
  {
    name: `holder deaf to heartbeats (nft drops inbound UDP to ${HEARTBEAT_PORT})`,
    apply: (h) => nftTable(h, DEAF, ` chain input {\n  type filter hook input priority 0; policy accept;\n  udp dport ${HEARTBEAT_PORT} drop\n }\n`),
    heal: (h) => deleteTable(h, DEAF),
  },
];

interface MoveRun { arp: number; afterFailed: number; afterArp: number; failed: number }

/**
 * From `faultAt`: the first probe another host answered, and the requests until one succeeded
 * after it. Alone or not: an old holder that still answers beside it (kube-vip's address left on
 * a killed process's interface) is counted in the probes answered by two MACs.
 */
async function measureMove(w: Watch, holder: NodeName, faultAt: number, what: string): Promise<MoveRun> {
  const movedProbe = () => w.probes().find((p) => p.t >= faultAt && p.macs.some((m) => vip.nodeOfMac(m) !== holder));
  // kube-vip's lease (15 s by default) must run out first.
  const timeoutMs = SIDE === 'edge-ccm' ? 20_000 : 60_000;
  const moved = await eventually(`the VIP leaves ${holder} (${what})`, movedProbe, timeoutMs);
  const firstOkAfterArp = await eventually('a request succeeds after the move', () => w.requests.find((r) => r.t > moved.t && r.ok), timeoutMs);
  const firstFailed = w.requests.find((r) => r.t >= faultAt && !r.ok);
  const firstOkAfterFailed = firstFailed && w.requests.find((r) => r.t > firstFailed.t && r.ok)!;
  return {
    arp: moved.t - faultAt,
    afterFailed: firstOkAfterFailed ? firstOkAfterFailed.t - faultAt : 0,
    afterArp: firstOkAfterArp.t - faultAt,
    failed: firstFailed ? failedRequests(w, faultAt, Math.max(firstOkAfterFailed!.t, firstOkAfterArp.t)) : 0,
  };
}

/**
 * kube-vip's holder before a run: the one host that answered every probe of the last 3 s, waited
 * for (up to 90 s: its lease can change hands more than once after a heal); the wait in ms.
 */
async function steadyHolder(w: Watch): Promise<{ holder: NodeName; waitedMs: number }> {
  const at = Date.now();
  const holder = await eventually('one steady holder (3 s of probes answered by one host)', () => {
    const last = w.probes().slice(-30);
    const node = last[0]?.macs.length === 1 ? vip.nodeOfMac(last[0].macs[0]!) : undefined;
    return last.length === 30 && node && last.every((p) => p.macs.length === 1 && vip.nodeOfMac(p.macs[0]!) === node) ? node : undefined;
  }, 90_000);
  return { holder, waitedMs: Date.now() - at };
}

/** RUNS times: the fault applied to the holder, the move measured, then healed (the host returns to standby: sticky). */
async function faultRuns(w: Watch, fault: Fault, label: string): Promise<void> {
  const runs: MoveRun[] = [];
  const waits: number[] = [];
  const from = Date.now();
  for (let run = 0; run < RUNS; run++) {
    await Bun.sleep(2000);
    let holder = answering(w);
    // edge-ccm's holder must be single 3.5 s after a heal; kube-vip's is waited for (and the wait reported).
    if (SIDE === 'kube-vip') {
      const steady = await steadyHolder(w);
      holder = steady.holder;
      waits.push(steady.waitedMs);
    }
    if (!holder) throw new Error(`no single holder before run ${run} of ${fault.name}`);
    const faultAt = Date.now();
    await fault.apply(holder);
    runs.push(await measureMove(w, holder, faultAt, fault.name));
    await fault.heal(holder);
    await Bun.sleep(1500);
    await eventually('one holder again', () => !!answering(w), 30_000);
  }
  const failed = runs.map((r) => r.failed);
  console.log(`vip failover${SIDE === 'edge-ccm' ? '' : ` (${SIDE})`}${label}: ${fault.name}: ${RUNS} runs; first ${label ? 'NDP' : 'ARP'} answer from the new holder ${fmt(runs.map((r) => r.arp))}; first good request after a failed one ${fmt(runs.map((r) => r.afterFailed))}; first good request after the new holder's first answer ${fmt(runs.map((r) => r.afterArp))}; failed requests p50 ${percentile(failed, 50)}, max ${Math.max(...failed)}, total ${failed.reduce((a, b) => a + b, 0)}; probes answered by two MACs ${doubles(w, from)}; ${overlapText(from)}${waits.length ? `; waited for one steady holder before each run (3 s of single answers) p50 ${percentile(waits, 50)} ms, max ${Math.max(...waits)} ms` : ''}`);
}

/** The holder on the majority side: the lone host (each non-holder in turn) partitioned for 5 s: no move, no failed request. */
async function majorityRuns(w: Watch): Promise<void> {
  const from = Date.now();
  let notHolder = 0, failed = 0, requests = 0, probes = 0, loneWithoutQuorum = 0;
  for (let run = 0; run < RUNS; run++) {
    await Bun.sleep(2000);
    const holder = answering(w);
    if (!holder) throw new Error(`no single holder before run ${run} of the majority-side partition`);
    const lone = NODES.filter((n) => n !== holder)[run % 2]!;
    const faultAt = Date.now();
    await partition(lone);
    await Bun.sleep(5000);
    // Evidence the partition took: the lone host has lost quorum.
    if (/^edge_ccm_vip_quorum 0$/m.test((await vip.vipEndpoint(lone, '/metrics')) ?? '')) loneWithoutQuorum += 1;
    const healAt = Date.now();
    await healPartition(lone);
    const window = w.probes().filter((p) => p.t >= faultAt && p.t < healAt);
    probes += window.length;
    notHolder += window.filter((p) => p.macs.length !== 1 || vip.nodeOfMac(p.macs[0]!) !== holder).length;
    failed += failedRequests(w, faultAt, healAt);
    requests += w.requests.filter((r) => r.t >= faultAt && r.t < healAt).length;
    await Bun.sleep(1500);
    await eventually('one holder again', () => !!answering(w), 30_000);
  }
  console.log(`vip majority side: the holder kept with the majority, one other host partitioned from the two for 5 s: ${RUNS} runs; ${probes} probes during the partitions, ${notHolder} not answered by the holder alone; requests ${failed} failed of ${requests}; the lone host without quorum at the end of ${loneWithoutQuorum} of ${RUNS} partitions; probes answered by two MACs ${doubles(w, from)} (partitions, heals and handbacks); ${overlapText(from)}`);
}

/** Load: the holder's API server busy for 30 s (16 clients fetching the OpenAPI document back to back from the client's namespace): the VIP must not move while it stays ready. */
async function loadRun(w: Watch): Promise<void> {
  await Bun.sleep(2000);
  const holder = answering(w)!;
  const at = Date.now();
  let loading = true;
  let served = 0;
  const url = `https://${vip.site.nodes[holder].lanIPv4}:6443/openapi/v2`;
  const clients = Array.from({ length: 16 }, async () => {
    while (loading) {
      const r = await vip.site.lab.exec('client', ['curl', '-sk', '-o', '/dev/null', '-w', '%{http_code}', '--max-time', '10', '-H', `Authorization: Bearer ${vip.adminToken}`, url]);
      if (r.stdout.trim() === '200') served += 1;
    }
  });
  await Bun.sleep(30_000);
  loading = false;
  await Promise.all(clients);
  const during = w.probes().filter((p) => p.t >= at);
  const others = during.filter((p) => p.macs.length !== 1 || vip.nodeOfMac(p.macs[0]!) !== holder).length;
  console.log(`vip under load: the holder's API server served ${served} OpenAPI documents (16 clients, 30 s); ${during.length} probes, ${others} not answered by the holder alone; requests through the VIP meanwhile: ${failedRequests(w, at, Infinity)} failed of ${w.requests.filter((r) => r.t >= at).length}`);
}

/** Times (ms) of the log lines of `node`'s vip from `from` on that match `text`. */
function logTimes(node: NodeName, text: string, from: number): number[] {
  return readFileSync(vip.vips.get(node)!.logPath, 'utf8').split('\n').flatMap((l) => {
    const m = /^(\S+Z) /.exec(l);
    const t = m ? Date.parse(m[1]!) : NaN;
    return t >= from && l.includes(text) ? [t] : [];
  });
}

/**
 * Cold start: every edge-ccm at once (the API servers up): from the start to the first ARP
 * answer, and from the vips' own logs the take (start to "vip taken", and the taker's "liveness
 * warm-up over" to its take: the wait for the others' answers, issue 39) and every take while
 * another host still held it. VIP_BENCH_CPU_LOAD=N busy loops beside it.
 */
async function coldStartRuns(w: Watch): Promise<void> {
  const cold: number[] = [], taken: number[] = [], answerWait: number[] = [];
  const takers = new Map<NodeName, number>();
  let runsWithOverlap = 0;
  const from = Date.now();
  const load = Number(process.env.VIP_BENCH_CPU_LOAD ?? 0) > 0 ? CpuLoad.start(Number(process.env.VIP_BENCH_CPU_LOAD)) : undefined;
  try {
    for (let run = 0; run < RUNS; run++) {
      await Promise.all(NODES.map((n) => vip.vips.get(n)!.kill()));
      await Bun.sleep(1500);
      const at = Date.now();
      for (const n of NODES) vip.startVip(n);
      const first = await eventually('a holder after the cold start', () => w.probes().find((p) => p.t >= at && p.macs.length === 1), 20_000);
      cold.push(first.t - at);
      // Settled: 2 s more for a late second take to show in the logs.
      await Bun.sleep(2000);
      const takes = NODES.flatMap((n) => logTimes(n, '"vip taken"', at).map((t) => ({ n, t }))).sort((a, b) => a.t - b.t);
      const take = takes[0];
      if (take) {
        taken.push(take.t - at);
        takers.set(take.n, (takers.get(take.n) ?? 0) + 1);
        const warm = logTimes(take.n, 'liveness warm-up over', at)[0];
        if (warm !== undefined) answerWait.push(take.t - warm);
      }
      if (holderOverlaps(vip, at, Date.now()).count > 0) runsWithOverlap += 1;
    }
  } finally {
    await load?.stop();
  }
  console.log(`vip cold start of all three: ${RUNS} runs${load ? ` beside ${load.describe()}` : ''}; first ARP answer ${fmt(cold)} (includes process start and the 1 s warm-up); start to "vip taken" (logs) ${fmt(taken)}; the taker's warm-up end to its take (waiting for the others' answers) ${fmt(answerWait)}; taken by ${[...takers].map(([n, c]) => `${n} ${c}`).join(', ')} (order ${ORDER.join(', ')}); runs with a take while another host held it ${runsWithOverlap}; probes answered by two MACs ${doubles(w, from)}; ${overlapText(from)}`);
}

/**
 * Bootstrap: every edge-ccm vip and kube-apiserver stopped (etcd stays); one host (each in turn)
 * starts its vip, then its API server: from that server's first 200 on /readyz (polled inside its
 * namespace) to the first ARP answer and the first good request through the VIP. Then the other
 * two join (vip + API server): until both are eligible and 2 s more, the first host must keep the
 * VIP (sticky: no handback), probes answered twice and failed requests are counted.
 */
async function bootstrapRuns(w: Watch): Promise<void> {
  const arp: number[] = [], request: number[] = [], pollIntervals: number[] = [];
  let early = 0, joinDoubles = 0, joinFailed = 0, joinRequests = 0, moved = 0;
  const from = Date.now();
  for (let run = 0; run < RUNS; run++) {
    const first = NODES[run % NODES.length]!;
    await Promise.all(NODES.flatMap((n) => [vip.vips.get(n)!.kill(), vip.apiServers.get(n)!.kill()]));
    const quietFrom = Date.now();
    await eventually('the VIP unanswered', () => w.probes().filter((p) => p.t > quietFrom).length >= 3 && w.probes().slice(-3).every((p) => p.macs.length === 0), 10_000);
    const startAt = Date.now();
    const warmUps = logCount(vip.vips.get(first)!, 'liveness warm-up over');
    const proc = vip.startVip(first);
    await eventually(`${first}'s vip warmed up`, () => logCount(proc, 'liveness warm-up over') > warmUps, 20_000);
    const watch = vip.site.lab.spawnLogged(first, `readyz-watch-${first}-${run}`, [process.execPath, READYZ_WATCH, 'https://127.0.0.1:6443/readyz', String(READYZ_POLL_PAUSE_MS)]);
    await vip.startApiServer(first);
    await watch.exited;
    const ready = JSON.parse(watch.logTail(1)) as { readyAt: number; polls: number; meanIntervalMs: number };
    pollIntervals.push(ready.meanIntervalMs);
    const firstAnswer = await eventually(`${first} answers for the VIP`, () => w.probes().find((p) => p.t >= startAt && p.macs.length > 0), 20_000);
    const firstOk = await eventually('a request through the VIP succeeds', () => w.requests.find((r) => r.t >= startAt && r.ok), 20_000);
    early += w.probes().filter((p) => p.t >= startAt && p.t < ready.readyAt && p.macs.length > 0).length;
    arp.push(firstAnswer.t - ready.readyAt);
    request.push(firstOk.t - ready.readyAt);

    const joinAt = Date.now();
    const joiners = NODES.filter((n) => n !== first);
    for (const n of joiners) vip.startVip(n);
    await Promise.all(joiners.map((n) => vip.startApiServer(n)));
    await eventually('the joiners eligible', async () => (await Promise.all(joiners.map(async (n) => /^edge_ccm_vip_quorum 1$/m.test((await vip.vipEndpoint(n, '/metrics')) ?? '') && (await vip.vipEndpoint(n, '/readyz')) === 'ok'))).every(Boolean), 30_000);
    await Bun.sleep(2000);
    const joinEnd = Date.now();
    if (w.probes().some((p) => p.t >= joinAt && p.t < joinEnd && p.macs.length === 1 && vip.nodeOfMac(p.macs[0]!) !== first)) moved += 1;
    joinDoubles += doubles(w, joinAt, joinEnd);
    joinFailed += failedRequests(w, joinAt, joinEnd);
    joinRequests += w.requests.filter((r) => r.t >= joinAt && r.t < joinEnd).length;
  }
  console.log(`vip bootstrap, one host first (each in turn): ${RUNS} runs; from its API server's first 200 on /readyz (polled in its namespace every ${percentile(pollIntervals, 50)} ms p50, ${Math.max(...pollIntervals)} ms max) to the first ARP answer ${fmt(arp)}, to the first good request through the VIP ${fmt(request)}; probes answered before that first 200: ${early}`);
  console.log(`vip bootstrap, the other two joining: ${RUNS} runs, ${moved} in which the VIP left the first host (sticky: expected 0); probes answered by two MACs ${joinDoubles}; requests ${joinFailed} failed of ${joinRequests} (from the join to 2 s after both joiners are eligible); ${overlapText(from)}`);
}

/** The kill fault over IPv6: the prober's Neighbor Solicitations every 100 ms (only solicited advertisements count), requests to the IPv6 VIP. */
async function ipv6Runs(): Promise<void> {
  const ndp = ArpProber.start(vip.site, VIP6, 'vip-bench-ndp-prober');
  const requests6 = requestLoop(VIP6);
  const v6: Watch = { probes: () => ndp.probes(), requests: requests6.requests };
  try {
    await eventually('an NDP answer and a request through the IPv6 VIP', () => !!answering(v6) && requests6.requests.some((r) => r.ok), {
      timeoutMs: 20_000,
      explain: () => `NDP probes: ${JSON.stringify(ndp.probes().slice(-5))}; requests: ${JSON.stringify(requests6.requests.slice(-5))}`,
    });
    await faultRuns(v6, FAULTS[0]!, ' over IPv6 (NDP)');
    console.log(`vip IPv6: ${ndp.probes().length} NDP probes, ${doubles(v6)} answered by two MACs; ${requests6.requests.length} requests, ${requests6.requests.filter((r) => !r.ok).length} failed`);
  } finally {
    await requests6.stop();
    await ndp.stop();
  }
}

const requests4 = requestLoop(VIP);
const v4: Watch = { probes: () => prober.probes(), requests: requests4.requests };
try {
  // The link-down fault must not cost the hosts their IPv6 addresses (Linux flushes them on down by default).
  for (const n of NODES) await vip.site.lab.sysctl(n, { 'net.ipv6.conf.eth0.keep_addr_on_down': 1 });
  // kube-vip puts the VIP on its holder's interface alone: no host keeps it on lo (as edge-ccm's
  // install guide has it), so a stale ARP cache entry costs kube-vip's requests as it would.
  if (SIDE === 'kube-vip') for (const n of NODES) await vip.site.lab.ip(n, 'addr', 'del', `${VIP}/32`, 'dev', 'lo');
  for (const n of NODES) startSide(n);
  await Promise.all(NODES.map((n) => vip.startApiServer(n)));
  await eventually('a holder', () => !!answering(v4), 60_000);
  if (only.has('faults')) for (const fault of FAULTS.filter((f) => SIDE === 'edge-ccm' || f.anchors)) await faultRuns(v4, fault, '');
  if (only.has('majority')) await majorityRuns(v4);
  if (only.has('load')) await loadRun(v4);
  if (only.has('cold')) await coldStartRuns(v4);
  if (only.has('bootstrap')) await bootstrapRuns(v4);
  if (only.has('ipv6')) await ipv6Runs();
  await requests4.stop();
  console.log(`vip bench total: ${prober.probes().length} probes, ${doubles(v4)} answered by two MACs; ${requests4.requests.length} requests, ${requests4.requests.filter((r) => !r.ok).length} failed`);
} finally {
  await requests4.stop();
  await prober.stop();
  const keep = process.env.VIP_BENCH_KEEP_LOGS;
  if (keep) {
    mkdirSync(keep, { recursive: true });
    for (const f of readdirSync(vip.site.lab.dir).filter((f) => /^(vip-|kube-vip-|readyz-watch-).*\.log$/.test(f))) copyFileSync(join(vip.site.lab.dir, f), join(keep, f));
    console.log(`vip bench logs kept in ${keep}`);
  }
  stopping = true;
  await vip.destroy();
}

/** K=V,K=V as an environment. */
function envList(text: string | undefined): Record<string, string> {
  return Object.fromEntries((text ? text.split(',') : []).map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]));
}
