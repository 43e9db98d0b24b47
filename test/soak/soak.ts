import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { V1Node, V1Service } from '@kubernetes/client-node';
import { isAlreadyExists } from '../../src/kube/errors.ts';
import { EVENTS, NODES, ResourceClient, SERVICES } from '../../src/kube/resources.ts';
import type { KubeTransport } from '../../src/kube/transport.ts';
import { startControlPlane, type ControlPlane } from '../harness/control-plane.ts';
import { replaceFile } from '../harness/files.ts';
import { transportFor } from '../harness/kubeconfig.ts';
import { ownDir, removeOwnedDir } from '../harness/processes.ts';
import { ProxmoxResponder } from '../fakes/proxmox-responder.ts';
import { RedfishResponder } from '../fakes/redfish-responder.ts';
import { AuditTail, auditTime, isWriteVerb, type AuditEvent } from './audit-tail.ts';
import { CANARY_NAMESPACE, Canaries } from './canary.ts';
import { bgpConditions, DeadHopWatch, l2Conditions, nodeBgpConditions, servesLoadBalancers, TwoMacWatch, type L2ProbeRound } from './check-network.ts';
import { insertSorted, judgeWrite, type LeaseWrite, type ReplicaWrite } from './check-terms.ts';
import { type Condition, Persistence, serviceConditions } from './check-services.ts';
import { FAULT_KINDS, groupOf, inject, NETWORK_FAULT_KINDS, resourceOf, type FaultKind, type FaultTargets, type RecoveryProbe } from './faults.ts';
import { NetSwitch } from './net-switch.ts';
import { bgpSection, SoakNetwork } from './network.ts';
import { DEAD_HOP_SAMPLE_MS, TIMING, TOLERANCE, type SoakOptions } from './options.ts';
import { Random } from './random.ts';
import { type ExitRecord, leaseName, refusedBrokenConfig, ReplicaSlot } from './replicas.ts';
import { median, type NetworkFigures, type ReplicaFigures, type SoakReport, type Violation } from './report.ts';
import { GROUPS, L2_NODES, present, type Group, World } from './world.ts';
import { NAMESPACES, Workload } from './workload.ts';

const ROOT = resolve(import.meta.dir, '../..');
export const BINARY = join(ROOT, 'dist/edge-ccm');
const PROXMOX_TOKEN = { id: 'ccm@pve!soak', secret: '5f0c3a52-soak-4c1e-9d7e-2b1f00000000' };
const REDFISH = { username: 'admin', password: 'soak-bmc-password' };

/** The line a replica logs when its lease was lost and it ends the term in-process (and campaigns again). */
const TERM_LOST_LINE = 'leader lease lost: ending this term';

/** Our two Leases at level Request (their holder is in the request body); everything else at Metadata. */
const AUDIT_POLICY = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Request
    resources: [{ group: coordination.k8s.io, resources: [leases], resourceNames: [${GROUPS.map(leaseName).join(', ')}] }]
  - level: Metadata
`;

interface Sample {
  rss: number;
  sockets: number;
  fds: number;
}

/**
 * One soak run: a real control plane, both replica groups (the compiled binary), the fake
 * Redfish and Proxmox APIs behind switches, a seeded workload and fault schedule, and the
 * invariant checkers running all the time. Returns the figures; everything it started is
 * ended by pid and its directory removed, also when it fails.
 */
export async function runSoak(opts: SoakOptions, log: (line: string) => void = console.log): Promise<SoakReport> {
  const binary = opts.binary ?? BINARY;
  const unknownFault = opts.faults?.find((k) => !(FAULT_KINDS as readonly string[]).includes(k));
  if (unknownFault) throw new Error(`--faults: unknown kind ${JSON.stringify(unknownFault)}; kinds: ${FAULT_KINDS.join(', ')}`);
  const kinds = (opts.faults ?? FAULT_KINDS) as readonly FaultKind[];
  if (!existsSync(binary)) throw new Error(`${binary} is missing: run \`bun scripts/build.ts\` first (scripts/soak builds it)`);
  const rnd = new Random(opts.seed);
  const profile = opts.profile;
  const startedAt = new Date();
  const dir = mkdtempSync(join(tmpdir(), 'edge-ccm-soak-'));
  if (!opts.keep) ownDir(dir);
  const cleanups: (() => Promise<void> | void)[] = [];
  const violations: Violation[] = [];
  const violation = (kind: string, detail: string, at = Date.now()) => {
    violations.push({ kind, at: new Date(at).toISOString(), detail });
    log(`VIOLATION ${kind}: ${detail}`);
  };
  const checks: Record<string, number> = {};
  const count = (kind: string, n = 1) => (checks[kind] = (checks[kind] ?? 0) + n);
  const nearMisses: string[] = [];
  const faultCounts: Record<string, number> = {};
  let faultsSkipped = 0;
  const recoveries = new Map<string, number[]>();
  const exits = { signalled: 0, termsLost: 0, unexpected: 0, configRefused: 0 };
  const longest = new Map<string, number>();
  const samples = new Map<string, Sample[]>();
  let running = true;

  try {
    // ---- control plane ----
    const policyFile = join(dir, 'audit-policy.yaml');
    writeFileSync(policyFile, AUDIT_POLICY);
    log('starting etcd and kube-apiserver');
    // Dual stack, so the L2 pool's services get an IPv6 address too (answered by NDP).
    const cp: ControlPlane = await startControlPlane({ extraApiServerFlags: [`--audit-policy-file=${policyFile}`, '--service-cluster-ip-range=10.0.0.0/16,2001:db8:ffff::/112'] });
    cleanups.push(async () => {
      if (opts.keep) copyFileSync(cp.auditLogPath, join(dir, 'audit.log'));
      await cp.stop();
    });
    const api: KubeTransport = transportFor(cp.adminKubeconfig, { qps: 0, requestTimeoutMs: 15_000 });
    for (const ns of [...NAMESPACES, CANARY_NAMESPACE]) {
      try {
        await api.request({ method: 'POST', path: '/api/v1/namespaces', body: { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } } });
      } catch (e) {
        if (!isAlreadyExists(e)) throw e;
      }
    }

    // ---- world, provider APIs, config files ----
    const world = new World(profile.staticMachines, profile.proxmoxVms, Date.now());
    const redfish = RedfishResponder.start({
      username: REDFISH.username, password: REDFISH.password,
      systems: Object.fromEntries(world.of('static').filter((m) => m.redfish).map((m) => [m.id, 'On'])),
    });
    cleanups.push(() => redfish.stop());
    const proxmox = ProxmoxResponder.start({ tokens: { [PROXMOX_TOKEN.id]: PROXMOX_TOKEN.secret } });
    cleanups.push(() => proxmox.stop());
    const redfishLink = await NetSwitch.start(Number(new URL(redfish.url).port));
    const proxmoxLink = await NetSwitch.start(proxmox.port);
    cleanups.push(() => redfishLink.stop(), () => proxmoxLink.stop());

    const secretFile = (name: string, text: string) => {
      const path = join(dir, name);
      writeFileSync(path, `${text}\n`, { mode: 0o600 });
      chmodSync(path, 0o600);
      return path;
    };
    const redfishPasswordFile = secretFile('redfish-password', REDFISH.password);
    const tokenSecretFile = secretFile('proxmox-token', PROXMOX_TOKEN.secret);
    const configPath: Record<Group, string> = { static: join(dir, 'config', 'static.yaml'), proxmox: join(dir, 'config', 'proxmox.yaml') };
    mkdirSync(join(dir, 'config'));
    const configText: Record<Group, () => string> = {
      static: () => world.staticConfig({ redfishUrl: redfishLink.url, redfishPasswordFile, bgp: bgpSection() }),
      proxmox: () => world.proxmoxConfig({ url: proxmoxLink.url, tokenSecretFile }),
    };
    const configHeld: Record<Group, boolean> = { static: false, proxmox: false };
    /** When each config file was last repaired after a fault held it broken. */
    const configRepairedAt: Record<Group, number> = { static: -Infinity, proxmox: -Infinity };
    const writeConfig = (g: Group) => {
      if (!configHeld[g]) replaceFile(configPath[g], configText[g]());
    };
    writeConfig('static');
    writeConfig('proxmox');
    let proxmoxVisible: 'none' | 'one' | undefined;
    const syncProxmox = () => {
      const all = world.vms();
      const keep = proxmoxVisible === 'none' ? new Set<number>() : proxmoxVisible === 'one' ? new Set([rnd.pick(all.filter((v) => !v.name.includes('canary'))).vmid]) : undefined;
      const listed = new Set<number>();
      for (const vm of all) {
        if (keep && !keep.has(vm.vmid)) continue;
        proxmox.setVm(vm);
        listed.add(vm.vmid);
      }
      for (const m of world.of('proxmox')) if (!listed.has(m.vmid!)) proxmox.removeVm(m.vmid!);
    };
    syncProxmox();

    // ---- replicas and speakers ----
    // Replicas campaign again in-process after losing the lease (no exit): an exit not signalled is unexpected.
    const onExit = (e: ExitRecord) => {
      if (!running) return;
      const group: Group = e.slot.includes('proxmox') ? 'proxmox' : 'static';
      if (!e.signalled && refusedBrokenConfig(e, configHeld[group], configRepairedAt[group])) {
        exits.configRefused++;
        log(`${e.slot} (pid ${e.pid}) refused the ${group} config the soak holds broken (exit 2), as it must; started again`);
        return;
      }
      if (e.signalled) {
        exits.signalled++;
        if (e.signalled === 'SIGTERM' && e.code !== 0) violation('unclean-sigterm', `${e.slot} (pid ${e.pid}) exited ${e.code} after SIGTERM:\n${e.logTail}`, e.at);
      } else {
        exits.unexpected++;
        violation('replica-exit', `${e.slot} (pid ${e.pid}) exited ${e.code} without a signal:\n${e.logTail}`, e.at);
      }
    };
    const restartDelay = () => rnd.int(1_000, 3_000);
    log('building the BGP and L2 labs (network namespaces)');
    const net = await SoakNetwork.build({
      cp, binary, dir, staticReplicas: profile.staticReplicas, loopback: [redfishLink.url], staticConfig: configPath.static,
      onSpeakerExit: onExit, restartDelayMs: restartDelay,
    });
    cleanups.push(() => net.stop());
    const slots: ReplicaSlot[] = [];
    for (const group of GROUPS) {
      const n = group === 'static' ? profile.staticReplicas : profile.proxmoxReplicas;
      for (let i = 0; i < n; i++) {
        const user = `soak-${group}-${i}`;
        const kubeconfig = await cp.clientCertKubeconfig(user, ['system:masters']);
        const inLab = group === 'static' ? { wrap: net.wrapFor(i), address: net.replicas[i]!.v4 } : {};
        slots.push(new ReplicaSlot({ binary, group, index: i, kubeconfig, cloudConfig: configPath[group], dir, ...inLab }, onExit, restartDelay));
      }
    }
    cleanups.push(async () => {
      await Promise.all(slots.map((s) => s.stop()));
    });
    const slotByUser = new Map(slots.map((s) => [s.user, s]));
    for (const s of slots) s.start();
    net.startSpeakers();
    log(`replicas: ${slots.map((s) => `${s.name} pid ${s.pid}`).join(', ')}; speakers: ${net.speakers.map((s) => `${s.name} pid ${s.pid}`).join(', ')}; run dir ${dir}`);

    // ---- audit log: lease history and replica writes ----
    const audit = new AuditTail(cp.auditLogPath);
    const leaseWrites: Record<Group, LeaseWrite[]> = { static: [], proxmox: [] };
    const pendingWrites: { group: Group; w: ReplicaWrite }[] = [];
    let auditEvents = 0;
    let auditHorizon = 0;
    const groupOfLease = new Map(GROUPS.map((g) => [leaseName(g), g]));
    const nodeDeletions: { t: number; name: string; user: string }[] = [];
    const readAudit = () => {
      for (const e of audit.read()) {
        auditEvents++;
        auditHorizon = Math.max(auditHorizon, auditTime(e.stageTimestamp));
        handleAudit(e);
      }
    };
    const handleAudit = (e: AuditEvent) => {
      const user = e.user?.username ?? '';
      const slot = slotByUser.get(user);
      if (!slot || !isWriteVerb(e.verb)) return;
      const code = e.responseStatus?.code ?? 0;
      const t = auditTime(e.requestReceivedTimestamp);
      const ref = e.objectRef ?? {};
      if (ref.resource === 'leases') {
        const g = groupOfLease.get(ref.name ?? '');
        if (g && code >= 200 && code < 300) {
          insertSorted(leaseWrites[g], { t, user, holder: e.requestObject?.spec?.holderIdentity ?? '', durationMs: (e.requestObject?.spec?.leaseDurationSeconds ?? TIMING.leaseDurationMs / 1000) * 1000 });
        }
        return;
      }
      if (ref.resource !== 'nodes' && ref.resource !== 'services') return; // events are not the term's (flushed after it)
      if (code < 200 || code >= 300) return;
      const what = `${ref.resource}${ref.subresource ? `/${ref.subresource}` : ''} ${ref.namespace ? `${ref.namespace}/` : ''}${ref.name ?? ''}`;
      pendingWrites.push({ group: slot.group, w: { t, user, verb: e.verb, what, code } });
      if (ref.resource === 'nodes' && e.verb === 'delete' && !ref.subresource) nodeDeletions.push({ t, name: ref.name ?? '', user });
    };
    /** Judges the writes old enough that every Lease write before them is in the log. */
    const judgeWrites = (all: boolean) => {
      const lag = 60_000;
      for (let i = 0; i < pendingWrites.length;) {
        const { group, w } = pendingWrites[i]!;
        if (!all && w.t > auditHorizon - lag) {
          i++;
          continue;
        }
        pendingWrites.splice(i, 1);
        count('write-in-term');
        const verdict = judgeWrite(leaseWrites[group], w, TOLERANCE.termToleranceMs);
        if (verdict.nearMiss) nearMisses.push(`${w.user} ${w.verb} ${w.what}: ${verdict.reason}`);
        if (!verdict.ok) violation('write-outside-term', `${w.user}: ${verdict.reason}`, w.t);
      }
      for (const d of nodeDeletions.splice(0)) {
        count('node-deletion');
        const problem = world.deletionProblem(d.name, d.t, TOLERANCE.presenceToleranceMs);
        if (problem) violation('node-deleted-machine-exists', `${d.user} deleted node ${d.name} at ${new Date(d.t).toISOString()}: ${problem}`, d.t);
      }
    };
    /** The replica holding the group's lease by the lease history (paused or not). */
    const leaseHolder = (group: Group): ReplicaSlot | undefined => {
      const last = leaseWrites[group].at(-1);
      if (!last || !last.holder || Date.now() - last.t > last.durationMs) return undefined;
      return slotByUser.get(last.user);
    };
    const leaderOf = (group: Group): ReplicaSlot | undefined => {
      const last = leaseWrites[group].at(-1);
      if (!last || !last.holder || Date.now() - last.t > last.durationMs) return undefined;
      const slot = slotByUser.get(last.user);
      return slot?.pid && !slot.paused ? slot : undefined;
    };

    // ---- warm-up: leaders, nodes registered and initialised ----
    const until = async (what: string, probe: () => boolean | Promise<boolean>, ms: number) => {
      const deadline = Date.now() + ms;
      while (!(await probe())) {
        if (Date.now() > deadline) throw new Error(`soak set-up: timed out after ${ms} ms waiting for ${what}`);
        await Bun.sleep(250);
        readAudit();
      }
    };
    await until('both groups to elect a leader', () => GROUPS.every((g) => !!leaderOf(g)), 120_000);
    const workload = new Workload(api, world, rnd, profile.maxServices, {
      staticChanged: () => writeConfig('static'),
      proxmoxChanged: () => syncProxmox(),
      inventoryEditable: (g) => !configHeld[g],
    });
    await workload.seed();
    const nodes = new ResourceClient<V1Node>(api, NODES);
    await until('every seeded node to be initialised', async () => {
      const list = await nodes.list().catch(() => undefined);
      return !!list && list.items.length > 0 && list.items.every((n) => !!n.spec?.providerID);
    }, 180_000);
    log(`warm-up done: ${world.machines.size} machines, leaders ${GROUPS.map((g) => leaderOf(g)?.name).join(', ')}`);

    // ---- the run ----
    const t0 = Date.now();
    const endAt = t0 + opts.minutes * 60_000;
    const quietAt = endAt - profile.quietMs;
    const services = new ResourceClient<V1Service>(api, SERVICES);
    const events = new ResourceClient<{ metadata?: { name?: string }; involvedObject?: { uid?: string }; type?: string }>(api, EVENTS);
    let view: { nodes: V1Node[]; services: V1Service[] } = { nodes: [], services: [] };
    const persistence = new Persistence(TOLERANCE.settleMs);
    const warned = new Set<string>();
    const refreshView = async (): Promise<boolean> => {
      try {
        const [n, s, ev] = await Promise.all([
          nodes.list(),
          services.list(),
          events.list({ query: { fieldSelector: 'involvedObject.kind=Service,type=Warning' } }),
        ]);
        for (const e of ev.items) if (e.involvedObject?.uid) warned.add(e.involvedObject.uid);
        view = { nodes: n.items, services: s.items };
        return true;
      } catch {
        return false; // the API is down (a fault): checked next round
      }
    };
    const checkServices = () => {
      const { conditions, checks: n } = serviceConditions(view.services, warned);
      count('service-state', n);
      for (const v of persistence.observe(conditions, Date.now())) violation(v.kind, `${v.detail} (for ${Math.round(v.lastedMs / 1000)} s)`);
    };
    const sampleResources = () => {
      for (const s of slots) {
        const pid = s.pid;
        if (!pid) continue;
        const sample = readSample(pid);
        if (!sample) continue;
        count('replica-resources');
        const list = samples.get(s.name) ?? [];
        list.push(sample);
        samples.set(s.name, list);
        if (sample.rss > TOLERANCE.rssLimitBytes) violation('replica-rss', `${s.name} (pid ${pid}) RSS ${mib(sample.rss)} MiB > ${mib(TOLERANCE.rssLimitBytes)} MiB`);
        if (sample.sockets > TOLERANCE.socketLimit) violation('replica-sockets', `${s.name} (pid ${pid}) has ${sample.sockets} open sockets > ${TOLERANCE.socketLimit}`);
      }
    };

    const loops: Promise<void>[] = [];
    const every = (ms: number, fn: () => Promise<void> | void, stopAt: () => boolean) => loops.push((async () => {
      while (!stopAt()) {
        try {
          await fn();
        } catch (e) {
          log(`soak loop error: ${e instanceof Error ? e.stack : String(e)}`);
        }
        await Bun.sleep(ms);
      }
    })());
    let finished = false;
    every(1_000, () => {
      readAudit();
      judgeWrites(false);
    }, () => finished);
    every(3_000, async () => {
      if (await refreshView()) checkServices();
    }, () => finished);
    every(5_000, sampleResources, () => finished);

    // The network invariants: a round a second after the last, against the last view of the
    // cluster, at most 3 s old (the L2 conditions on the prober's latest round).
    // When a network condition ends: how long it lasted (from the first round that saw it to the
    // first that did not, an upper bound: rounds are about 2 s apart) goes into the figures, and
    // one that lasted over a third of its tolerance is logged (what the tolerance is spent on).
    const noteLong = (settleMs: number) => (c: Condition, lastedMs: number) => {
      longest.set(c.kind, Math.max(longest.get(c.kind) ?? 0, lastedMs));
      if (lastedMs >= settleMs / 3) log(`note: ${c.kind} for ${(lastedMs / 1000).toFixed(1)} s, until now: ${c.detail}`);
    };
    const bgpPersistence = new Persistence(TOLERANCE.bgpSettleMs, noteLong(TOLERANCE.bgpSettleMs));
    const l2Persistence = new Persistence(TOLERANCE.l2SettleMs, noteLong(TOLERANCE.l2SettleMs));
    /** Faults in force that make a part of the expected network state undefined (see check-network.ts). */
    const netFaults = { router: false, staticConfig: false };
    /** The last round of each network check: when it looked, and whether everything held. */
    const lastRound: Record<'bgp' | 'l2', { at: number; clean: boolean }> = { bgp: { at: 0, clean: false }, l2: { at: 0, clean: false } };
    const track = (p: Persistence, conditions: Condition[], now: number) => {
      for (const v of p.observe(conditions, now)) violation(v.kind, `${v.detail} (for ${Math.round(v.lastedMs / 1000)} s)`);
    };
    const checkBgp = async () => {
      const at = Date.now();
      const paths = await net.rib();
      if (!paths) {
        // gobgpd down (a fault) or not answering: nothing of the leader's to judge this round. The
        // nodes' router (BIRD, in the L2 lab) is another router: its conditions are judged still.
        if (!netFaults.router) log('note: the BGP router did not answer');
        track(bgpPersistence, checkNodeBgp() ?? [], at);
        return;
      }
      const leaderRib = bgpConditions({
        services: view.services, nodes: view.nodes, paths, leader: leaseHolder('static')?.config.address,
        extraPool: world.extraPool, excluded: world.excluded, judgeMissing: !netFaults.router && !netFaults.staticConfig,
      });
      count('bgp-rib', leaderRib.checks);
      const conditions = [...leaderRib.conditions, ...(checkNodeBgp() ?? [])];
      track(bgpPersistence, conditions, at);
      lastRound.bgp = { at, clean: conditions.length === 0 };
    };
    // "Never two MACs answer one address": every probe round of the client's prober (one ARP
    // request or Neighbor Solicitation per L2 address every 100 ms), from the run's start.
    const twoMacFigures = { rounds: 0, episodes: 0, doubleRounds: 0, longestMs: 0 };
    const twoMacs = new TwoMacWatch(opts.l2TwoMacsToleranceMs, TIMING.l2ProbePeriodMs, (m) => net.speakerOf(m), (e) => {
      violation('l2-two-macs', `${e.address} answered by ${e.who} for ${e.rounds} probe round(s) from ${new Date(e.firstAt).toISOString()} (tolerance ${opts.l2TwoMacsToleranceMs} ms)`, e.firstAt);
    }, (e) => {
      twoMacFigures.episodes++;
      twoMacFigures.doubleRounds += e.rounds;
      twoMacFigures.longestMs = Math.max(twoMacFigures.longestMs, e.lastedMs);
      log(`note: l2-two-macs for ${e.rounds} probe rounds (${(e.lastedMs / 1000).toFixed(1)} s) from ${new Date(e.firstAt).toISOString()}: ${e.address} answered by ${e.who}`);
    });
    // "A dead node leaves the router's table within 1 s" (issue 29): the nodes' router (BIRD)
    // sampled every DEAD_HOP_SAMPLE_MS against the speakers' deaths (killed, paused, link down).
    const deadHopFigures = { checks: 0, withdrawalsMs: [] as number[] };
    const deadHops = new DeadHopWatch(TOLERANCE.deadHopLimitMs + DEAD_HOP_SAMPLE_MS, (d) => {
      violation('bgp-dead-next-hop', `node ${d.node}, dead since ${new Date(d.deadSince).toISOString()}, is still a next hop of ${d.prefixes.join(', ')} in the nodes' router ${d.lateMs} ms later (limit ${TOLERANCE.deadHopLimitMs} ms + ${DEAD_HOP_SAMPLE_MS} ms sampling)`, d.deadSince);
    }, (node, ms) => {
      deadHopFigures.withdrawalsMs.push(ms);
      if (ms > TOLERANCE.deadHopLimitMs / 2) log(`note: dead node ${node}'s next hops left the nodes' router ${ms} ms after its death`);
    });
    /** The nodes' router's table at the last sample (for the per-second conditions). */
    let nodeTable: Map<string, string[]> | undefined;
    every(DEAD_HOP_SAMPLE_MS, async () => {
      const at = Date.now();
      const table = await net.nodeRib();
      if (!table) return;
      nodeTable = table;
      const n = deadHops.observe(table, net.deadNodes(), at);
      deadHopFigures.checks += n;
      count('bgp-dead-hop', n);
    }, () => finished);
    const checkNodeBgp = () => {
      const table = nodeTable;
      if (!table) return;
      const dead = net.deadNodes();
      const serving = L2_NODES.filter((n) => !dead.has(n.address) && servesLoadBalancers(view.nodes.find((x) => x.metadata?.name === n.id))).map((n) => n.address);
      const { conditions, checks: n } = nodeBgpConditions({ services: view.services, table, serving, extraPool: world.extraPool, excluded: world.excluded, judgeMissing: !netFaults.staticConfig });
      count('bgp-node-rib', n);
      return conditions;
    };
    /** The prober's latest round (each round complete: see l2-prober-main.ts). */
    let lastProbe: L2ProbeRound | undefined;
    const prober = net.startProber(TIMING.l2ProbePeriodMs, (r) => {
      lastProbe = r;
      if (r.sentAt < t0) return;
      twoMacFigures.rounds++;
      count('l2-probe', twoMacs.observe(r));
    }, (message) => {
      if (!finished) violation('fault-harness', message);
    });
    cleanups.push(() => prober.stop());
    // The conditions with l2SettleMs (silent, double, stray) on the prober's latest round.
    const checkL2 = () => {
      const probe = lastProbe;
      if (!probe) return;
      const { conditions, checks: n } = l2Conditions({ services: view.services, answers: probe.answers, speakerOf: (m) => net.speakerOf(m), judgeSilent: !netFaults.staticConfig });
      count('l2-answers', n);
      track(l2Persistence, conditions, probe.sentAt);
      lastRound.l2 = { at: probe.sentAt, clean: conditions.length === 0 };
    };
    every(1_000, async () => {
      if (!view.services.length && !view.nodes.length) return; // no view yet
      await Promise.all([checkBgp(), checkL2()]);
    }, () => finished);
    /** Ms from `since` until a round of the network check that started after it found everything holding. */
    const networkRecovered = async (which: 'bgp' | 'l2', since: number): Promise<number | undefined> => {
      while (Date.now() - since <= TOLERANCE.recoveryLimitMs) {
        const r = lastRound[which];
        if (r.at >= since && r.clean) return r.at - since;
        await Bun.sleep(200);
      }
      return undefined;
    };

    // Workload until the quiet phase.
    loops.push((async () => {
      while (Date.now() < quietAt) {
        await workload.step(view);
        await Bun.sleep(rnd.exponential(profile.workloadMeanMs));
      }
    })());

    // Faults until the quiet phase: kinds dealt from a shuffled deck, so every kind comes round.
    const canaries = new Canaries(api, TOLERANCE.recoveryLimitMs);
    const busy = new Set<string>();
    const probes: Promise<void>[] = [];
    const active: Promise<void>[] = [];
    const targets: FaultTargets = {
      leader: (g) => leaderOf(g),
      stopApiServer: () => cp.stopApiServer(),
      startApiServer: () => cp.startApiServer(),
      etcdPid: () => cp.etcdPid(),
      redfish: {
        setLink: (m) => redfishLink.set(m),
        setDelay: (ms) => (redfish.delayMs = ms),
        setFailStatus: (s) => (redfish.failStatus = s),
      },
      proxmox: {
        setLink: (m) => proxmoxLink.set(m),
        setDelay: (ms) => (proxmox.delayMs = ms),
        setFailStatus: (s) => (proxmox.failStatus = s),
        setVisible: (v) => {
          proxmoxVisible = v;
          syncProxmox();
        },
      },
      config: (g) => ({ path: configPath[g], text: configText[g] }),
      setConfigHeld: (g, held) => {
        configHeld[g] = held;
        if (!held) configRepairedAt[g] = Date.now();
        if (g === 'static') netFaults.staticConfig = held;
      },
      router: {
        leaderAddress: () => leaseHolder('static')?.config.address,
        session: async (address, action) => {
          netFaults.router = true;
          // A reset or enable: judged again once the router takes the session (see SoakNetwork.session).
          await net.session(address, action);
          if (action !== 'disable') netFaults.router = false;
        },
        kill: async () => {
          netFaults.router = true;
          await net.killRouter();
        },
        start: async () => {
          await net.startRouter();
          netFaults.router = false;
        },
      },
      speaker: (r) => {
        const running = net.speakers.filter((x) => x.pid && !x.paused);
        // Only while every one runs: the others must take over, and with three two remain (they may not split).
        return running.length === net.speakers.length ? r.pick(running) : undefined;
      },
      speakerLink: (r) => {
        const running = net.speakers.filter((x) => x.pid && !x.paused);
        if (running.length !== net.speakers.length) return undefined;
        const node = r.pick([...L2_NODES]);
        return { name: node.id, down: () => net.setSpeakerLink(node.role, false), up: () => net.setSpeakerLink(node.role, true) };
      },
    };
    let deck: FaultKind[] = [];
    const faultLog: string[] = [];
    loops.push((async () => {
      const gap = () => profile.faultMeanMs * (0.5 + rnd.next());
      await Bun.sleep(gap());
      while (Date.now() < quietAt) {
        if (!deck.length) {
          deck = rnd.shuffle(kinds);
          // A short run (CI) deals the network faults first, so each of them comes at least once.
          if (profile.networkFaultsFirst && faultLog.length === 0) deck = [...deck.filter((k) => NETWORK_FAULT_KINDS.includes(k)), ...deck.filter((k) => !NETWORK_FAULT_KINDS.includes(k))];
        }
        if (busy.size >= profile.maxConcurrentFaults) {
          await Bun.sleep(1_000);
          continue;
        }
        // The first kind in the deck whose resource is free, not only the first: the five speaker
        // faults share one resource, and waiting behind a busy one held every other fault back (a
        // 3-minute CI run dealt only 6 faults and missed speaker-sigstop, seed 2363045176).
        const candidates = deck.map((k) => ({ kind: k, group: groupOf(k, rnd) }));
        const pick = candidates.findIndex((c) => !busy.has(resourceOf(c.kind, c.group)));
        if (pick < 0) {
          await Bun.sleep(1_000);
          continue;
        }
        const { kind, group } = candidates[pick]!;
        const resource = resourceOf(kind, group);
        deck.splice(pick, 1);
        const injectedAt = Date.now();
        const fault = inject(kind, group, targets, rnd, TIMING.leaseDurationMs);
        if (!fault) {
          faultsSkipped++;
          deck.push(kind); // comes round again later
          log(`fault ${kind} (${group}) skipped: nothing to hit right now (no leader, or a speaker already down)`);
        } else {
          faultCounts[kind] = (faultCounts[kind] ?? 0) + 1;
          busy.add(resource);
          const line = `${new Date(injectedAt).toISOString()} fault ${kind}: ${fault.detail}`;
          faultLog.push(line);
          log(line);
          // Recovery: a leader or speaker fault takes the service away at once (a standby must take
          // over), so its probe starts now; any other fault's once it has been undone. A network
          // fault has recovered when a check round after that found every network invariant holding.
          const probe = (since: number) => probes.push(...fault.groups.map(async (g: RecoveryProbe) => {
            const ms = g === 'bgp' || g === 'l2' ? await networkRecovered(g, since) : await canaries.probe(g, since);
            if (ms === undefined) violation('no-recovery', `${g} did not ${g === 'bgp' || g === 'l2' ? 'hold its invariants' : 'serve a canary'} within ${TOLERANCE.recoveryLimitMs / 1000} s after ${kind} (${fault.detail})`);
            else recoveries.set(kind, [...(recoveries.get(kind) ?? []), ms]);
          }));
          const atOnce = kind.startsWith('leader-') || kind.startsWith('speaker-');
          if (atOnce) probe(injectedAt);
          active.push(fault.ended.then(async () => {
            if (!atOnce) probe(Date.now());
            // A cool-down on the resource: a true answer is read before the next lie.
            await Bun.sleep(6_000);
            busy.delete(resource);
          }, (e: unknown) => {
            violation('fault-harness', `${kind} could not be undone: ${e instanceof Error ? e.message : String(e)}`);
            busy.delete(resource);
          }));
        }
        await Bun.sleep(gap());
      }
    })());

    // Progress line every minute.
    loops.push((async () => {
      while (Date.now() < endAt) {
        await Bun.sleep(Math.min(60_000, Math.max(0, endAt - Date.now())));
        const total = Object.values(faultCounts).reduce((a, b) => a + b, 0);
        log(`${Math.round((Date.now() - t0) / 1000)} s: ${total} faults, ${workload.churned} operations, ${Object.values(checks).reduce((a, b) => a + b, 0)} checks, ${violations.length} violations`);
      }
    })());

    // ---- quiet phase, then the strict checks ----
    while (Date.now() < endAt) await Bun.sleep(500);
    await Promise.all(active);
    await Promise.all(probes);
    // Everything must have settled by now: whatever condition is still there is a violation,
    // however young (a few more rounds, in case the API was slow right at the end).
    let settled = false;
    for (let round = 0; round < 10 && !settled; round++) {
      if (await refreshView()) {
        const { conditions, checks: n } = serviceConditions(view.services, warned);
        count('service-state', n);
        settled = conditions.length === 0;
        if (!settled && round === 9) for (const c of conditions) violation(c.kind, `${c.detail} (still so after the quiet phase)`);
      }
      if (!settled) await Bun.sleep(3_000);
    }
    // The network too: a BGP and an L2 round after the quiet phase must find everything holding.
    const quietOver = Date.now();
    const networkSettled = async () => {
      while (Date.now() - quietOver < 30_000) {
        if ((['bgp', 'l2'] as const).every((w) => lastRound[w].at >= quietOver && lastRound[w].clean)) return true;
        await Bun.sleep(500);
      }
      return false;
    };
    if (!(await networkSettled())) {
      for (const c of [...bgpPersistence.current(), ...l2Persistence.current()]) violation(c.kind, `${c.detail} (still so after the quiet phase)`);
    }
    for (const e of twoMacs.current()) violation('l2-two-macs', `${e.address} answered by ${e.who} for ${e.rounds} probe rounds, still so after the quiet phase`);
    for (const m of world.machines.values()) {
      // A gone machine's node is normally deleted once the grace period passed; one still there
      // is no safety violation (held back e.g. by the breaker or as the last of its group): noted.
      const node = view.nodes.find((n) => n.metadata?.name === m.id);
      if (!present(m) && node && !m.canary && m.history.at(-1)!.t < Date.now() - TIMING.graceMs - 60_000) {
        log(`note: node ${m.id} of a machine gone since ${new Date(m.history.at(-1)!.t).toISOString()} is still there`);
      }
    }
    finished = true;
    await Promise.all(loops);
    readAudit();
    await Bun.sleep(2_000);
    readAudit();
    judgeWrites(true);
    running = false;

    const recovery = Object.fromEntries([...recoveries].map(([k, xs]) => [k, { n: xs.length, medianMs: Math.round(median(xs)), maxMs: Math.round(Math.max(...xs)) }]));
    const replicas: ReplicaFigures[] = slots.map((s) => {
      const xs = samples.get(s.name) ?? [];
      return {
        slot: s.name,
        starts: s.starts,
        rssStartMiB: mib(xs[0]?.rss ?? 0),
        rssEndMiB: mib(xs.at(-1)?.rss ?? 0),
        rssMaxMiB: mib(Math.max(0, ...xs.map((x) => x.rss))),
        socketsMax: Math.max(0, ...xs.map((x) => x.sockets)),
        fdsMax: Math.max(0, ...xs.map((x) => x.fds)),
      };
    });
    writeFileSync(join(dir, 'faults.log'), `${faultLog.join('\n')}\n`);
    // A replica that lost its lease ends the term and campaigns again in the same process: counted from the logs.
    for (const s of slots) exits.termsLost += countLines(s.logPath(), TERM_LOST_LINE);
    const network: NetworkFigures = {
      longestConditionMs: Object.fromEntries([...longest].sort()),
      speakers: net.speakers.map((x) => ({ slot: x.name, starts: x.starts })),
      l2Probe: { rounds: twoMacFigures.rounds, periodMs: TIMING.l2ProbePeriodMs, toleranceMs: opts.l2TwoMacsToleranceMs, twoMacEpisodes: twoMacFigures.episodes, twoMacRounds: twoMacFigures.doubleRounds, longestTwoMacMs: twoMacFigures.longestMs },
      deadHop: {
        samplePeriodMs: DEAD_HOP_SAMPLE_MS, limitMs: TOLERANCE.deadHopLimitMs, checks: deadHopFigures.checks,
        withdrawals: deadHopFigures.withdrawalsMs.length,
        medianMs: deadHopFigures.withdrawalsMs.length ? Math.round(median(deadHopFigures.withdrawalsMs)) : 0,
        maxMs: Math.max(0, ...deadHopFigures.withdrawalsMs),
      },
    };
    return {
      seed: opts.seed,
      profile: profile.name,
      minutes: opts.minutes,
      startedAt: startedAt.toISOString(),
      durationSeconds: Math.round((Date.now() - t0) / 1000),
      faults: faultCounts,
      faultsTotal: Object.values(faultCounts).reduce((a, b) => a + b, 0),
      faultsSkipped,
      churn: workload.done,
      churnTotal: workload.churned,
      failedOperations: Object.values(workload.failed).reduce((a, b) => a + b, 0),
      checks,
      checksTotal: Object.values(checks).reduce((a, b) => a + b, 0),
      violations,
      nearMisses,
      recovery,
      replicas,
      exits,
      network,
      auditEvents,
    };
  } finally {
    running = false;
    for (const c of cleanups.reverse()) {
      try {
        await c();
      } catch (e) {
        log(`cleanup: ${e instanceof Error ? e.message : String(e)}`);
      }
    }
    if (opts.keep) log(`run directory kept: ${dir}`);
    else removeOwnedDir(dir);
  }
}

/** How many lines of a file contain `text` (0 when there is no file). */
function countLines(path: string, text: string): number {
  try {
    return readFileSync(path, 'utf8').split('\n').filter((l) => l.includes(text)).length;
  } catch {
    return 0;
  }
}

function mib(bytes: number): number {
  return Math.round(bytes / 1024 / 1024);
}

/** RSS and open descriptors of a process, from /proc; undefined once it is gone. */
function readSample(pid: number): Sample | undefined {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const rss = Number(/^VmRSS:\s+(\d+) kB/m.exec(status)?.[1] ?? 0) * 1024;
    let sockets = 0;
    const fds = readdirSync(`/proc/${pid}/fd`);
    for (const fd of fds) {
      try {
        if (readlinkSync(`/proc/${pid}/fd/${fd}`).startsWith('socket:')) sockets++;
      } catch {
        // closed meanwhile
      }
    }
    return { rss, sockets, fds: fds.length };
  } catch {
    return undefined;
  }
}
