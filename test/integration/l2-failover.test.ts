import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { V1Node, V1Service } from '@kubernetes/client-node';
import { NODES, ResourceClient, SERVICES } from '../../src/kube/resources.ts';
import type { KubeTransport } from '../../src/kube/transport.ts';
import { electNode } from '../../src/net/l2/election.ts';
import { LOAD_BALANCER_IPS_ANNOTATION } from '../../src/lb/requests.ts';
import { ApiBridge } from '../harness/api-bridge.ts';
import { ArpProber, failoverFigures, percentile, PROBE_INTERVAL_MS, type Probe } from '../harness/arp-probes.ts';
import { CcmProcess } from '../harness/ccm-process.ts';
import { startControlPlane, type ControlPlane } from '../harness/control-plane.ts';
import { eventually } from '../harness/eventually.ts';
import { transportFor } from '../harness/kubeconfig.ts';
import { applyL2Fault, restoreL2Node, type L2Fault } from '../harness/l2-faults.ts';
import { L2Lab, NODES as ROLES, SERVICE_IPV4, SERVICE_PORT, type NodeName } from '../harness/l2-lab.ts';
import { requireTools } from '../harness/netns.ts';
import { setReady, UNINITIALIZED } from '../harness/nodes.ts';
import type { LoggedProcess } from '../harness/processes.ts';

/**
 * L2 failover under the failures of issue 29, judged by frames: three compiled speakers in node
 * namespaces on one switch (harness/l2-lab.ts), the real kube-apiserver, and a client on the
 * switch asking for the service address with a raw ARP request every 100 ms, recording which MACs
 * answered each probe (harness/arp-probes.ts). Every test fails if any probe is ever answered by
 * two MACs, and prints the failover gap (fault to the new holder's first answer) and the probes
 * nobody answered. The speakers run at their default heartbeat interval and timeout.
 *
 * The gap is also asserted under 2 s (the issue's acceptance figure): the probe resolution is
 * 100 ms and the defaults give 0.75-1.05 s plus the takeover, so 2 s leaves ~0.9 s for a loaded
 * machine. L2_FAILOVER_RUNS=N repeats each fault kind N times and prints p50/p90/max (the bench,
 * scripts/bench-l2-failover); L2_SPEAKER_BINARY runs another build (the old code, to see it fail).
 */
const ROOT = resolve(import.meta.dir, '../..');
const BINARY = process.env.L2_SPEAKER_BINARY ?? join(ROOT, 'dist/edge-ccm');
const RUNS = Number(process.env.L2_FAILOVER_RUNS ?? 1);
const ID = `l2f-${process.pid}`;
const NS = `edge-ccm-${ID}`;
const MAX_GAP_MS = 2000;
const TEST_TIMEOUT_MS = 120_000 + RUNS * 60_000;

const k8sName = (role: NodeName) => `${ID}-${role}`;
const roleOf = (name: string) => name.slice(ID.length + 1) as NodeName;

let cp: ControlPlane;
let admin: KubeTransport;
let nodes: ResourceClient<V1Node>;
let services: ResourceClient<V1Service>;
let site: L2Lab;
let bridge: ApiBridge | undefined;
let ccm: CcmProcess | undefined;
let speakerArgs: string[];
const speakers = new Map<NodeName, LoggedProcess>();
let probeSeq = 0;
const deafTable = 'edge_ccm_l2_deaf';

beforeAll(async () => {
  requireTools({ '/usr/sbin/nft': 'nftables' });
  cp = await startControlPlane();
  admin = transportFor(cp.adminKubeconfig);
  nodes = new ResourceClient<V1Node>(admin, NODES);
  services = new ResourceClient<V1Service>(admin, SERVICES);
  site = await L2Lab.build();
  bridge = await ApiBridge.start(site.lab, cp.server);
  for (const role of ROLES) await bridge.into(site.lab, role);

  await admin.request({ method: 'POST', path: '/api/v1/namespaces', body: { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS } } });
  // The speakers' RBAC is l2-speaker.test.ts's subject; here they use the admin credentials.
  const speakerKubeconfig = cp.adminKubeconfig;
  const configPath = join(site.lab.dir, 'cloud-config.yaml');
  writeFileSync(configPath, `# written by test/integration/l2-failover.test.ts
inventory:
  machines:
${ROLES.map((r, i) => `    - id: ${ID}-m${i + 1}
      nodeName: ${k8sName(r)}
      addresses:
        - { type: InternalIP, address: 198.51.100.${11 + i} }`).join('\n')}
loadBalancer:
  pools:
    - name: lan
      addresses: [198.51.100.200-198.51.100.203]
      namespaces: [${NS}]
      announce: l2
`);
  const keyPath = join(site.lab.dir, 'liveness.key');
  writeFileSync(keyPath, randomBytes(32).toString('hex'), { mode: 0o600 });
  for (const role of ROLES) {
    await nodes.create({ apiVersion: 'v1', kind: 'Node', metadata: { name: k8sName(role), labels: { 'kubernetes.io/hostname': k8sName(role) } }, spec: { taints: [UNINITIALIZED] } });
    await setReady(nodes, k8sName(role), 'True');
  }
  ccm = CcmProcess.binary(['--cloud-provider=static', `--cloud-config=${configPath}`, `--kubeconfig=${cp.adminKubeconfig}`, '--secure-port=0', '--leader-elect=false', '--configure-cloud-routes=false']);
  for (const role of ROLES) {
    await eventually(`node ${role} initialised (edge-ccm log:\n${ccm.logs().slice(-2000)})`, async () => {
      const n = await nodes.get(k8sName(role));
      return (n.status?.addresses ?? []).some((a) => a.type === 'InternalIP') && !(n.spec?.taints ?? []).some((t) => t.key === UNINITIALIZED.key);
    }, 60_000);
  }
  speakerArgs = ['speaker', `--cloud-config=${configPath}`, `--kubeconfig=${speakerKubeconfig}`, `--liveness-key-file=${keyPath}`, '--v=2'];
  for (const role of ROLES) startSpeaker(role);
  await services.create({
    apiVersion: 'v1', kind: 'Service',
    metadata: { name: 'web', namespace: NS, annotations: { [LOAD_BALANCER_IPS_ANNOTATION]: SERVICE_IPV4 } },
    spec: { type: 'LoadBalancer', selector: { app: 'web' }, ports: [{ port: SERVICE_PORT, protocol: 'TCP' }] },
  }, { namespace: NS });
  await announcedOnlyBy(owner(ROLES));
}, 400_000);

afterAll(async () => {
  for (const s of speakers.values()) await s.kill();
  await ccm?.stop();
  await bridge?.stop();
  await site?.destroy();
  await cp?.stop();
}, 120_000);

function startSpeaker(role: NodeName): void {
  speakers.set(role, site.lab.spawnLogged(role, `speaker-${role}-${Date.now()}`, [BINARY, ...speakerArgs, `--node-name=${k8sName(role)}`]));
}

const owner = (among: Iterable<NodeName>) => roleOf(electNode(SERVICE_IPV4, [...among].map(k8sName))!);
const macOf = (role: NodeName) => site.nodes[role].lanMac;
const roleOfMac = (mac: string) => ROLES.find((r) => macOf(r) === mac) ?? mac;
const speakerLogs = () => [...speakers].map(([role, s]) => `speaker ${role}'s log:\n${s.logTail(30)}`).join('\n');
const show = (probes: readonly Probe[]) => probes.map((p) => `#${p.i}@${p.t}:${p.macs.map(roleOfMac).join('+') || '-'}`).join(' ');

async function metricsOf(role: NodeName): Promise<string> {
  return (await site.lab.exec(role, ['curl', '-s', '--max-time', '2', 'http://127.0.0.1:7472/metrics'])).stdout;
}

/** One prober run: answered by `role` alone for `probes` probes in a row. */
async function announcedOnlyBy(role: NodeName, probes = 5): Promise<void> {
  const prober = ArpProber.start(site, SERVICE_IPV4, `prober-${probeSeq++}`);
  try {
    await eventually(`${SERVICE_IPV4} answered by ${role} alone (${speakerLogs()})`, () => {
      const last = prober.probes().slice(-probes);
      return last.length === probes && last.every((p) => p.macs.length === 1 && p.macs[0] === macOf(role));
    }, 60_000);
  } finally {
    await prober.stop();
  }
}

interface Figures { gapMs: number; unanswered: number; handbackUnanswered: number; windowMs: number }

/** From the incumbent's "no longer announcing" to the returning speaker's "announcing" (both logs, ms timestamps of one clock). */
function handoverWindow(incumbent: LoggedProcess, returning: LoggedProcess, since: number): number {
  const at = (p: LoggedProcess, message: string) => p.logTail(400).split('\n').filter((l) => l.includes(message) && l.includes(SERVICE_IPV4)).map((l) => Date.parse(l.slice(0, 24))).filter((t) => t >= since).at(-1);
  const released = at(incumbent, '"no longer announcing"');
  const taken = at(returning, '"announcing"');
  return released !== undefined && taken !== undefined ? taken - released : NaN;
}
const results: Record<string, Figures[]> = {};

/**
 * Applies `fault` to the holder, records the probes until the next node has answered for 1 s,
 * then `restore`s the node (its speaker starts again: the preferred speaker returns) and
 * records the handback until the old holder has answered for 1 s.
 */
async function failover(kind: L2Fault): Promise<void> {
  const failed = owner(ROLES);
  const next = owner(ROLES.filter((r) => r !== failed));
  const prober = ArpProber.start(site, SERVICE_IPV4, `prober-${probeSeq++}`);
  let probes: Probe[] = [];
  let faultAt = 0;
  try {
    await eventually(`probes answered by ${failed}`, () => prober.probes().filter((p) => p.macs.includes(macOf(failed))).length >= 5, 20_000);
    faultAt = Date.now();
    const exitCode = await applyL2Fault(site, failed, speakers.get(failed)!, kind);
    if (kind === 'SIGTERM') expect(exitCode).toBe(0);
    await eventually(`${next} answering for 1 s after the ${kind} of ${failed}'s ${kind === 'link down' ? 'link' : 'speaker'} (${speakerLogs()})`, () =>
      prober.probes().filter((p) => p.t >= faultAt && p.macs.includes(macOf(next))).length >= 10, 30_000);
  } finally {
    probes = await prober.stop();
  }
  const f = failoverFigures(probes, faultAt, macOf(failed), macOf(next));
  if (process.env.L2_DEBUG) console.log(`fault at ${new Date(faultAt).toISOString()}\n${speakerLogs()}`);
  const during = probes.filter((p) => p.t >= faultAt - 500);

  // The node comes back: after a link failure the node "reboots" (its speaker is restarted), so the preferred speaker returns in every case.
  await restoreL2Node(site, failed, speakers.get(failed)!, kind);
  const back = ArpProber.start(site, SERVICE_IPV4, `prober-${probeSeq++}`);
  let handback: Probe[] = [];
  let restartAt = 0;
  try {
    await eventually(`probes answered by ${next}`, () => back.probes().filter((p) => p.macs.includes(macOf(next))).length >= 3, 20_000);
    restartAt = Date.now();
    startSpeaker(failed);
    await eventually(`${failed} answering again for 1 s after its speaker returned (${speakerLogs()})`, () =>
      back.probes().filter((p) => p.t >= restartAt && p.macs.includes(macOf(failed))).length >= 10, 30_000);
  } finally {
    handback = await back.stop();
  }
  const h = failoverFigures(handback, restartAt, macOf(next), macOf(failed));
  const windowMs = handoverWindow(speakers.get(next)!, speakers.get(failed)!, restartAt);
  if (process.env.L2_DEBUG) console.log(`restart at ${new Date(restartAt).toISOString()}\n${show(handback.filter((p) => p.t >= restartAt))}\n${speakerLogs()}`);
  const handbackDoubles = h.doubles;
  const takenBack = handback.find((p) => p.t >= restartAt && p.macs.includes(macOf(failed)))!;
  console.log(
    `l2 failover (${kind}) ${failed} -> ${next}: ${f.gapMs} ms from the fault to the first probe ${next} answered, ` +
      `${f.unanswered} probes unanswered, ${f.doubles.length} answered twice (of ${probes.length}, every ${PROBE_INTERVAL_MS} ms); ` +
      `handback to the returning speaker ${takenBack.t - restartAt} ms after its start, ${h.unanswered} probes unanswered, ${handbackDoubles.length} answered twice, ` +
      `${windowMs} ms from the incumbent's release to the returning speaker's first announcement (its logs)`,
  );
  (results[kind] ??= []).push({ gapMs: f.gapMs ?? Infinity, unanswered: f.unanswered, handbackUnanswered: h.unanswered, windowMs });
  expect({ kind, doubleAnswers: show(f.doubles) }).toEqual({ kind, doubleAnswers: '' });
  expect({ kind, handbackDoubleAnswers: show(handbackDoubles) }).toEqual({ kind, handbackDoubleAnswers: '' });
  expect({ kind, strangers: show([...f.strangers, ...h.strangers]) }).toEqual({ kind, strangers: '' });
  expect({ kind, gapMs: f.gapMs, probes: f.gapMs !== undefined && f.gapMs < MAX_GAP_MS ? '' : show(during) }).toEqual({ kind, gapMs: expect.any(Number), probes: '' });
  expect(f.gapMs!).toBeLessThan(MAX_GAP_MS);
  // The handback releases first, then the returning speaker takes the address: between the two
  // (one heartbeat's trip and a reconcile: a few ms, tens on this loaded machine) a request is
  // not answered. A probe every 100 ms lands in that window now and then: at most one may.
  expect({ kind, handbackUnanswered: h.unanswered <= 1 ? '' : show(handback.filter((p) => p.t >= restartAt && p.macs.length === 0)) }).toEqual({ kind, handbackUnanswered: '' });
}

function summary(kind: string): void {
  const r = results[kind] ?? [];
  if (r.length < 2) return;
  const gaps = r.map((x) => x.gapMs);
  console.log(`l2 failover (${kind}) over ${r.length} runs: gap p50 ${percentile(gaps, 50)} ms, p90 ${percentile(gaps, 90)} ms, max ${Math.max(...gaps)} ms; ` +
    `unanswered probes per run max ${Math.max(...r.map((x) => x.unanswered))}; at the handback: unanswered probes in total ${r.reduce((a, x) => a + x.handbackUnanswered, 0)}, ` +
    `release-to-take window p50 ${percentile(r.map((x) => x.windowMs), 50)} ms, max ${Math.max(...r.map((x) => x.windowMs))} ms`);
}

describe('failover, judged by ARP probes every 100 ms', () => {
  test('SIGKILL of the holder\'s speaker alone (node, link and kernel up): one node takes over, never two; the returning speaker takes it back without a gap', async () => {
    for (let i = 0; i < RUNS; i++) await failover('SIGKILL');
    summary('SIGKILL');
  }, TEST_TIMEOUT_MS);

  test('SIGTERM of the holder\'s speaker (a rolling update): it releases and says so; the next takes over at once', async () => {
    for (let i = 0; i < RUNS; i++) await failover('SIGTERM');
    summary('SIGTERM');
  }, TEST_TIMEOUT_MS);

  test('the holder\'s link goes down (the node dies): the others take over; it returns as a restarted node', async () => {
    for (let i = 0; i < RUNS; i++) await failover('link down');
    summary('link down');
  }, TEST_TIMEOUT_MS);
});

describe('asymmetric heartbeat loss', () => {
  test('a speaker that can send but not receive heartbeats (nft drops inbound UDP 7947 on its node) takes nothing: never two answers', async () => {
    const holder = owner(ROLES);
    const deaf = ROLES.find((r) => r !== holder)!;
    const prober = ArpProber.start(site, SERVICE_IPV4, `prober-${probeSeq++}`);
    let probes: Probe[] = [];
    let at = 0;
    let isolatedWhileDeaf = false;
    let isolatedAfter = true;
    try {
      await eventually('probes answered', () => prober.probes().length >= 5, 20_000);
      at = Date.now();
      const rules = `table inet ${deafTable} {\n chain input {\n  type filter hook input priority 0; policy accept;\n  udp dport 7947 drop\n }\n}\n`;
      const rulesPath = join(site.lab.dir, 'deaf.nft');
      writeFileSync(rulesPath, rules);
      const added = await site.lab.exec(deaf, ['nft', '-f', rulesPath]);
      expect(added.code).toBe(0);
      // Deaf for five liveness timeouts (longer than the old code's 3 s timeout: it elected itself everywhere).
      await Bun.sleep(5000);
      isolatedWhileDeaf = /^edge_ccm_l2_isolated 1$/m.test(await metricsOf(deaf));
      const removed = await site.lab.exec(deaf, ['nft', 'delete', 'table', 'inet', deafTable]);
      expect(removed.code).toBe(0);
      await Bun.sleep(3000);
      isolatedAfter = /^edge_ccm_l2_isolated 1$/m.test(await metricsOf(deaf));
    } finally {
      probes = await prober.stop();
      await site.lab.exec(deaf, ['nft', 'delete', 'table', 'inet', deafTable]);
    }
    const after = probes.filter((p) => p.t >= at);
    console.log(`l2 asymmetric loss: ${deaf} deaf for 5 s then hearing again (isolated while deaf: ${isolatedWhileDeaf}, after: ${isolatedAfter}); ${after.length} probes, ${after.filter((p) => p.macs.length > 1).length} answered twice, ${after.filter((p) => p.macs.length === 0).length} unanswered, ${after.filter((p) => p.macs[0] === macOf(holder)).length} by the holder ${holder}`);
    expect(show(probes.filter((p) => p.macs.length > 1))).toBe('');
    expect(show(after.filter((p) => p.macs.length !== 1 || p.macs[0] !== macOf(holder)))).toBe('');
    // It knew it heard nobody, and knew when it heard again.
    expect({ isolatedWhileDeaf, isolatedAfter }).toEqual({ isolatedWhileDeaf: true, isolatedAfter: false });
  }, TEST_TIMEOUT_MS);
});

describe('a paused speaker', () => {
  test('SIGSTOP of the holder\'s speaker for 3 s (a frozen cgroup, a stopped debugger): the next takes over; woken, it answers none of the requests queued meanwhile and takes the address back by the ordered handback: never two answers', async () => {
    const paused = owner(ROLES);
    const next = owner(ROLES.filter((r) => r !== paused));
    const pid = speakers.get(paused)!.pid;
    const pausesBefore = Number(/^edge_ccm_l2_pauses_total (\d+)$/m.exec(await metricsOf(paused))?.[1] ?? 0);
    const prober = ArpProber.start(site, SERVICE_IPV4, `prober-${probeSeq++}`);
    let probes: Probe[] = [];
    let stoppedAt = 0;
    let wokeAt = 0;
    try {
      await eventually(`probes answered by ${paused}`, () => prober.probes().filter((p) => p.macs.includes(macOf(paused))).length >= 5, 20_000);
      stoppedAt = Date.now();
      process.kill(pid, 'SIGSTOP');
      try {
        await eventually(`${next} answering for 1 s while ${paused}'s speaker is stopped (${speakerLogs()})`, () =>
          prober.probes().filter((p) => p.t >= stoppedAt && p.macs.includes(macOf(next))).length >= 10, 30_000);
        // Paused three liveness timeouts in all: its socket queues the client's requests meanwhile.
        await Bun.sleep(Math.max(0, stoppedAt + 3000 - Date.now()));
      } finally {
        process.kill(pid, 'SIGCONT');
      }
      wokeAt = Date.now();
      await eventually(`${paused} answering again for 1 s after it woke (${speakerLogs()})`, () =>
        prober.probes().filter((p) => p.t >= wokeAt && p.macs.includes(macOf(paused))).length >= 10, 30_000);
    } finally {
      probes = await prober.stop();
    }
    const metrics = await metricsOf(paused);
    const dropped = Number(/^edge_ccm_l2_requests_dropped_total (\d+)$/m.exec(metrics)?.[1] ?? 0);
    const woken = probes.filter((p) => p.t >= wokeAt);
    const firstBack = woken.find((p) => p.macs.includes(macOf(paused)));
    console.log(`l2 pause: ${paused} stopped ${wokeAt - stoppedAt} ms; ${probes.filter((p) => p.macs.length > 1).length} probes answered twice, ` +
      `${woken.filter((p) => p.macs.length === 0).length} unanswered after it woke; it answered again ${firstBack ? firstBack.t - wokeAt : NaN} ms after waking; ${dropped} queued requests dropped`);
    expect(show(probes.filter((p) => p.macs.length > 1))).toBe('');
    // It noticed the pause (and so joined again through the handback, not by answering beside the new holder).
    expect(Number(/^edge_ccm_l2_pauses_total (\d+)$/m.exec(metrics)?.[1] ?? 0)).toBe(pausesBefore + 1);
    expect(speakers.get(paused)!.logTail(400)).toContain('joining again as a returning speaker');
  }, TEST_TIMEOUT_MS);
});

describe('a link that comes back', () => {
  test('the holder\'s switch port goes down for 3 s and comes back with its speaker running (a cable, a switch port): the next takes over; at the heal two answers for at most the stated heal limit (one heartbeat interval), then the handback', async () => {
    for (let i = 0; i < RUNS; i++) await linkBack();
  }, TEST_TIMEOUT_MS);
});

async function linkBack(): Promise<void> {
  {
    const holder = owner(ROLES);
    const next = owner(ROLES.filter((r) => r !== holder));
    const prober = ArpProber.start(site, SERVICE_IPV4, `prober-${probeSeq++}`);
    let probes: Probe[] = [];
    let downAt = 0;
    let upAt = 0;
    try {
      await eventually(`probes answered by ${holder}`, () => prober.probes().filter((p) => p.macs.includes(macOf(holder))).length >= 5, 20_000);
      downAt = Date.now();
      // Its switch port goes down (a cable, a port): its eth0 stays up without carrier, its speaker runs.
      await site.lab.ip('sw', 'link', 'set', `${holder}-lan`, 'down');
      try {
        await eventually(`${next} answering for 1 s while ${holder}'s link is down (${speakerLogs()})`, () =>
          prober.probes().filter((p) => p.t >= downAt && p.macs.includes(macOf(next))).length >= 10, 30_000);
        await Bun.sleep(Math.max(0, downAt + 3000 - Date.now()));
      } finally {
        await site.lab.ip('sw', 'link', 'set', `${holder}-lan`, 'up');
      }
      upAt = Date.now();
      // A change of the cluster right then (the API is not behind the switch): the holder
      // reconciles with its link back before it has heard a peer, as the soak saw it happen.
      await services.patch('web', 'merge', { metadata: { annotations: { 'example.com/link-back': String(upAt) } } }, { namespace: NS });
      await eventually(`${holder} answering again for 1 s after its link came back (${speakerLogs()})`, () =>
        prober.probes().filter((p) => p.t >= upAt && p.macs.includes(macOf(holder))).length >= 10, 30_000);
    } finally {
      probes = await prober.stop();
    }
    const healed = probes.filter((p) => p.t >= upAt);
    console.log(`l2 link back: ${holder}'s link down ${upAt - downAt} ms; ${probes.filter((p) => p.macs.length > 1).length} probes answered twice, ` +
      `${healed.filter((p) => p.macs.length === 0).length} unanswered after the link came back`);
    // Before the heal, never two answers. At the heal, l2.md's stated limit: the node whose link
    // came back may answer until it hears its first peer, at most one heartbeat interval (250 ms)
    // and a probe round; seen in CI once (one round) after the heal fixes. Longer is a split.
    expect(show(probes.filter((p) => p.t < upAt && p.macs.length > 1))).toBe('');
    const healDoubles = healed.filter((p) => p.macs.length > 1);
    const spanMs = healDoubles.length ? healDoubles.at(-1)!.t - healDoubles[0]!.t + PROBE_INTERVAL_MS : 0;
    expect({ spanMs: spanMs <= HEAL_LIMIT_MS ? 0 : spanMs, doubles: spanMs <= HEAL_LIMIT_MS ? '' : show(healDoubles) }).toEqual({ spanMs: 0, doubles: '' });
  }
}

/** l2.md's partition-heal limit: one heartbeat interval and a probe round. */
const HEAL_LIMIT_MS = 350;
