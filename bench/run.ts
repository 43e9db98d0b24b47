/**
 * The bench: edge-ccm and the upstream Go framework's CCM (bench/reference) side by side on the
 * harness's real control plane, and the floor (bench/floor.ts). Run through scripts/bench, which
 * builds the binaries first. Flags:
 *   --quick               nodes 100 and 1000 only (default also 5000)
 *   --steady-seconds=N    length of the steady-state window (default 300)
 *   --only=nodes,services,steady   a subset of the workloads
 *   --sides=edge-ccm,reference,floor   a subset of the sides (also reference-json: the reference asking for JSON; edge-ccm-h1: edge-ccm with DISABLE_HTTP2; floor-lifecycle: the floor keeping every node it watches, with a lifecycle pass every 5 s and a Lease, bench/floor.ts)
 *   --timeout-seconds=N   give up on one run after N seconds (default 900)
 *   --settle-max-seconds=N  steady state: wait at most N s for a side to stop writing (default 900)
 *   --profiles=defaults,raised,unbound   client limits (unbound: 20 syncs, qps/burst 100000)
 *   --repeat=N            run every workload N times; odd repetitions run the sides in reverse order
 *   --steady=5000x5000,1000x1000   steady-state sizes (nodes x services)
 *   --apiserver-profile-dir=DIR   bursts: a CPU profile of kube-apiserver over the burst's first
 *                         --apiserver-profile-seconds (default 12) into DIR/SIDE-REP.pprof, for
 *                         `go tool pprof -top`: where the API server spends on each side
 * Every run records the machine's load average and the CPU kube-apiserver and etcd spent in it.
 * Results: a Markdown table on stdout and JSON in $EDGE_CCM_BENCH_DIR/results-*.json.
 */
import type { V1Lease, V1Node, V1Service } from '@kubernetes/client-node';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { LEASES, NODES, ResourceClient, SERVICES } from '../src/kube/resources.ts';
import type { BunKubeTransport, KubeTransport } from '../src/kube/transport.ts';
import { startControlPlane, type ControlPlane } from '../test/harness/control-plane.ts';
import { transportFor } from '../test/harness/kubeconfig.ts';
import { freeLoopbackPorts } from '../test/harness/ports.ts';
import { AuditTail, countRequests, isWrite, type RequestCount } from './audit.ts';
import { ProcSampler, cpuSeconds } from './proc-sampler.ts';
import { LoadSampler, controlPlaneCpu } from './machine.ts';
import { renderMarkdown, type RunResult } from './report.ts';
import { BENCH_CACHE, DEFAULTS, PROFILES, launchSide, writeEdgeFakeConfig, type Profile, type SideName, type SideProcess } from './sides.ts';
import { option as opt } from './args.ts';
import {
  DoneWatcher, NAMESPACE, createAll, initialisedNode, loadBalancerService, objectName, percentile, prepareSteadyState, uninitialisedNode, type Kind,
} from './workloads.ts';

const argv = process.argv.slice(2);
const quick = argv.includes('--quick');
const steadySeconds = Number(opt('steady-seconds') ?? 300);
const timeoutMs = Number(opt('timeout-seconds') ?? 900) * 1000;
const settleMaxMs = Number(opt('settle-max-seconds') ?? 900) * 1000;
const sides = new Set((opt('sides') ?? 'edge-ccm,reference,floor').split(','));
const only = new Set((opt('only') ?? 'nodes,services,steady').split(','));
const nodeSizes = (opt('nodes') ?? (quick ? '100,1000' : '100,1000,5000')).split(',').map(Number);
const serviceSizes = (opt('services') ?? '100,1000').split(',').map(Number);
const profiles = (opt('profiles') ?? 'defaults,raised,unbound').split(',').map((name) => {
  const p = PROFILES[name];
  if (!p) throw new Error(`--profiles: unknown profile ${JSON.stringify(name)} (known: ${Object.keys(PROFILES).join(', ')})`);
  return p;
});
const repeat = Number(opt('repeat') ?? 1);
const apiserverProfileDir = opt('apiserver-profile-dir');
const apiserverProfileSeconds = Number(opt('apiserver-profile-seconds') ?? 12);
const steadySizes = (opt('steady') ?? '5000x5000').split(',').map((s) => {
  const [n, m] = s.split('x').map(Number);
  if (!Number.isInteger(n) || !Number.isInteger(m)) throw new Error(`--steady: ${JSON.stringify(s)} is not NODESxSERVICES`);
  return { nodes: n as number, services: m as number };
});
/** The sides in the order of repetition `rep`: every other repetition reversed, so neither side always runs first on a warm machine. */
function sidesInOrder(all: readonly SideName[], rep: number): SideName[] {
  const chosen = all.filter((x) => sides.has(x));
  return rep % 2 === 0 ? chosen : chosen.reverse();
}
/** How long a side is watched with nothing to do, for its idle request rate. */
const IDLE_WINDOW_MS = 20_000;
const SERVICE_BACKEND_NODES = 10;

// The default range (/24) has 254 addresses: too few for 1000 services.
// The harness starts kube-apiserver with --profiling=false; a later flag wins.
const CONTROL_PLANE_FLAGS = ['--service-cluster-ip-range=10.0.0.0/16', ...(apiserverProfileDir ? ['--profiling=true'] : [])];

const log = (msg: string) => console.error(`[bench ${new Date().toISOString().slice(11, 19)}] ${msg}`);

/** Until the side holds its lease (the CCMs) or says it is watching (the floor). */
async function waitReady(side: SideProcess, admin: KubeTransport, leaseName: string): Promise<number> {
  const leases = new ResourceClient<V1Lease>(admin, LEASES);
  const deadline = Date.now() + 120_000;
  for (;;) {
    if (side.proc.exitCode !== null) throw new Error(`${side.side} exited (${side.proc.exitCode}):\n${readFileSync(side.logPath, 'utf8').slice(-3000)}`);
    if (Date.now() > deadline) throw new Error(`${side.side} not ready within 120s:\n${readFileSync(side.logPath, 'utf8').slice(-3000)}`);
    if (side.side === 'floor' || side.side === 'floor-lifecycle') {
      if (readFileSync(side.logPath, 'utf8').includes('ready')) return Date.now() - side.startedAt;
    } else {
      const lease = await leases.get(leaseName, { namespace: 'kube-system' }).catch(() => undefined);
      if (lease?.spec?.holderIdentity) return Date.now() - side.startedAt;
    }
    await Bun.sleep(25);
  }
}

interface Session { cp: ControlPlane; admin: KubeTransport; user: string; kubeconfig: string; dir: string; fakeConfig: string }

async function withControlPlane<T>(fn: (cp: ControlPlane, admin: BunKubeTransport) => Promise<T>): Promise<T> {
  const cp = await startControlPlane({ extraApiServerFlags: CONTROL_PLANE_FLAGS });
  try {
    return await fn(cp, transportFor(cp.adminKubeconfig));
  } finally {
    await cp.stop();
  }
}

async function session(cp: ControlPlane, admin: KubeTransport, side: SideName, tag: string): Promise<Session> {
  const user = `bench-${side}-${tag}`;
  const dir = join(BENCH_CACHE, 'runs', runId);
  mkdirSync(dir, { recursive: true });
  return { cp, admin, user, dir, kubeconfig: await cp.clientCertKubeconfig(user, ['system:masters']), fakeConfig: writeEdgeFakeConfig(dir) };
}

async function startSide(s: Session, side: SideName, profile: Profile, leaseName: string): Promise<{ proc: SideProcess; sampler: ProcSampler; readyMs: number }> {
  const [port] = (await freeLoopbackPorts(1)) as [number];
  const proc = launchSide({ side, kubeconfig: s.kubeconfig, leaseName, port, profile, dir: s.dir, fakeConfig: s.fakeConfig });
  const sampler = new ProcSampler(proc.pid);
  try {
    return { proc, sampler, readyMs: await waitReady(proc, s.admin, leaseName) };
  } catch (e) {
    sampler.stop();
    await proc.stop();
    throw e;
  }
}

/** One side, one workload, on a fresh control plane: N objects created at once until all are done. */
async function burstRun(kind: Kind, count: number, side: SideName, profile: Profile, rep: number): Promise<RunResult> {
  log(`${kind} ${count}: ${side} (${profile.name}), repetition ${rep + 1}`);
  return withControlPlane(async (cp, admin) => {
    const s = await session(cp, admin, side, `${kind}-${count}`);
    if (kind === 'services') {
      const nodes = new ResourceClient<V1Node>(admin, NODES);
      await createAll(SERVICE_BACKEND_NODES, (i) => nodes.create(initialisedNode(objectName('nodes', i))));
    }
    const watcher = new DoneWatcher(admin, kind);
    await watcher.start();
    const leaseName = `bench-${side}`;
    const { proc, sampler, readyMs } = await startSide(s, side, profile, leaseName);
    try {
      const cpuBefore = cpuSeconds(proc.pid);
      const cpBefore = controlPlaneCpu(cp.dir);
      const load = new LoadSampler();
      const started = Date.now();
      const profiled = apiserverProfileDir ? profileApiServer(admin, `${side}-${kind}-${count}-${rep + 1}`) : undefined;
      const nodes = new ResourceClient<V1Node>(admin, NODES);
      const services = new ResourceClient<V1Service>(admin, SERVICES);
      await createAll(count, (i): Promise<unknown> => kind === 'nodes'
        ? nodes.create(uninitialisedNode(objectName('nodes', i)))
        : services.create(loadBalancerService(objectName('services', i)), { namespace: NAMESPACE }));
      const allDone = await watcher.waitFor(count, timeoutMs);
      const finished = Date.now();
      const cpu = cpuSeconds(proc.pid) - cpuBefore;
      const cpAfter = controlPlaneCpu(cp.dir);
      await profiled; // after the figures: a profile longer than the burst does not stretch them
      const loadavg = load.stop();
      const peakKiB = sampler.peakKiB();
      const peakAnon = sampler.peakSample('anonKiB');
      // Idle: nothing left to do; only lease renewal and watches should remain.
      await Bun.sleep(IDLE_WINDOW_MS);
      const idleEnd = Date.now();
      const latencies = watcher.latencies();
      const syncedEvents = kind === 'nodes' ? await countSynced(admin) : undefined;
      const requests = await countRequests(cp.auditLogPath, s.user, { from: started, to: finished });
      const idle = await countRequests(cp.auditLogPath, s.user, { from: idleEnd - IDLE_WINDOW_MS, to: idleEnd });
      const result: RunResult = {
        workload: kind, count, side, profile: profile.name, done: watcher.doneAt.size, allDone,
        totalMs: finished - started, p50Ms: percentile(latencies, 50), p99Ms: percentile(latencies, 99),
        requests, idleRps: idle.total / (IDLE_WINDOW_MS / 1000), idleRequests: idle,
        peakRssMiB: peakKiB / 1024, peakAnonMiB: peakAnon.anonKiB / 1024, fileAtPeakAnonMiB: peakAnon.fileKiB / 1024,
        steadyRssMiB: sampler.meanKiB(idleEnd - IDLE_WINDOW_MS, idleEnd) / 1024,
        cpuSeconds: cpu, readyMs, rep, syncedEvents,
        apiserverCpuSeconds: cpAfter.apiserver - cpBefore.apiserver, etcdCpuSeconds: cpAfter.etcd - cpBefore.etcd,
        loadavgMean: loadavg.mean, loadavgMax: loadavg.max,
      };
      log(`  done ${result.done}/${count} in ${(result.totalMs / 1000).toFixed(1)}s, p50 ${result.p50Ms}ms p99 ${result.p99Ms}ms, ${requests.total} requests, cpu ${cpu.toFixed(1)}s, peak ${result.peakRssMiB.toFixed(0)} MiB, apiserver cpu ${result.apiserverCpuSeconds?.toFixed(1)}s, load ${loadavg.mean.toFixed(1)}`);
      return result;
    } finally {
      sampler.stop();
      await proc.stop();
      await watcher.stop();
    }
  });
}

/** kube-apiserver's own CPU profile (Go pprof, /debug/pprof/profile) over the burst's first seconds, into the profile dir. */
async function profileApiServer(admin: BunKubeTransport, name: string): Promise<void> {
  const res = await admin.sendRaw({ method: 'GET', path: '/debug/pprof/profile', query: { seconds: apiserverProfileSeconds } });
  if (!res.ok) throw new Error(`kube-apiserver profile: HTTP ${res.status}: ${(await res.text()).slice(0, 200)}`);
  mkdirSync(apiserverProfileDir as string, { recursive: true });
  writeFileSync(join(apiserverProfileDir as string, `${name}.pprof`), new Uint8Array(await res.arrayBuffer()));
}

/** The Synced Events in the API (node events go to "default"): objects, their counts summed, and combined ones. */
async function countSynced(admin: KubeTransport): Promise<{ objects: number; count: number; combined: number }> {
  const events = await admin.request<{ items: { reason?: string; count?: number; message?: string }[] }>({
    method: 'GET', path: `/api/v1/namespaces/${NAMESPACE}/events`, query: { fieldSelector: 'reason=Synced' },
  });
  const synced = events.items.filter((e) => e.reason === 'Synced');
  return {
    objects: synced.length,
    count: synced.reduce((sum, e) => sum + (e.count ?? 1), 0),
    combined: synced.filter((e) => e.message?.startsWith('(combined')).length,
  };
}

/** Writes (leases aside) by `user` in the audit log; waits until there were none for `quietMs`. */
async function waitQuiet(tail: AuditTail, quietMs: number, maxMs: number): Promise<number> {
  const started = Date.now();
  let lastWrite = Date.now();
  while (Date.now() - lastWrite < quietMs) {
    if (Date.now() - started > maxMs) break;
    await Bun.sleep(2000);
    const events = await tail.read();
    if (events.some(isWrite)) lastWrite = Date.now();
  }
  return Date.now() - started;
}

/** 5000 initialised nodes and 5000 LoadBalancer services, already done: each side starts, settles, and is watched idle. */
async function steadyRuns(nodeCount: number, serviceCount: number, rep: number): Promise<RunResult[]> {
  return withControlPlane(async (cp, admin) => {
    log(`steady state: preparing ${nodeCount} nodes and ${serviceCount} services`);
    await prepareSteadyState(admin, nodeCount, serviceCount);
    const results: RunResult[] = [];
    for (const side of sidesInOrder(['edge-ccm', 'edge-ccm-h1', 'reference', 'reference-json', 'floor-lifecycle'], rep)) {
      log(`steady state ${nodeCount}+${serviceCount}: ${side}, repetition ${rep + 1}`);
      const s = await session(cp, admin, side, 'steady');
      const { proc, sampler, readyMs } = await startSide(s, side, DEFAULTS, `bench-${side}-steady`);
      try {
        const settleMs = await waitQuiet(new AuditTail(cp.auditLogPath, s.user), 15_000, settleMaxMs);
        const cpuBefore = cpuSeconds(proc.pid);
        const cpBefore = controlPlaneCpu(cp.dir);
        const load = new LoadSampler();
        const from = Date.now();
        await Bun.sleep(steadySeconds * 1000);
        const to = Date.now();
        const cpAfter = controlPlaneCpu(cp.dir);
        const loadavg = load.stop();
        const window = await countRequests(cp.auditLogPath, s.user, { from, to });
        const result: RunResult = {
          workload: 'steady', count: nodeCount, services: serviceCount, side, profile: DEFAULTS.name, done: 0, allDone: true,
          totalMs: to - from, settleMs, p50Ms: NaN, p99Ms: NaN,
          requests: window, idleRps: window.total / ((to - from) / 1000), idleRequests: window,
          peakRssMiB: sampler.peakKiB() / 1024, steadyRssMiB: sampler.meanKiB(from, to) / 1024,
          cpuSeconds: cpuSeconds(proc.pid) - cpuBefore, readyMs, rep,
          settled: settleMs < settleMaxMs,
          apiserverCpuSeconds: cpAfter.apiserver - cpBefore.apiserver, etcdCpuSeconds: cpAfter.etcd - cpBefore.etcd,
          loadavgMean: loadavg.mean, loadavgMax: loadavg.max,
        };
        log(`  settled in ${(settleMs / 1000).toFixed(0)}s; steady RSS ${result.steadyRssMiB.toFixed(0)} MiB, peak ${result.peakRssMiB.toFixed(0)} MiB, ${result.idleRps.toFixed(2)} req/s, cpu ${result.cpuSeconds.toFixed(1)}s`);
        results.push(result);
      } finally {
        sampler.stop();
        await proc.stop();
      }
    }
    return results;
  });
}

const runId = new Date().toISOString().replace(/[:.]/g, '-');
const results: RunResult[] = [];
const save = () => {
  mkdirSync(BENCH_CACHE, { recursive: true });
  const path = join(BENCH_CACHE, `results-${runId}.json`);
  writeFileSync(path, JSON.stringify({ argv, results }, null, 2));
  return path;
};

try {
  if (only.has('nodes')) {
    for (const n of nodeSizes) for (const profile of profiles) for (let rep = 0; rep < repeat; rep++) {
      for (const side of sidesInOrder(['edge-ccm', 'edge-ccm-h1', 'reference', 'reference-json', 'floor', 'floor-lifecycle'], rep)) {
        results.push(await burstRun('nodes', n, side, profile, rep));
        save();
      }
    }
  }
  if (only.has('services')) {
    for (const m of serviceSizes) for (const profile of profiles) for (let rep = 0; rep < repeat; rep++) {
      for (const side of sidesInOrder(['edge-ccm', 'edge-ccm-h1', 'reference', 'reference-json'], rep)) {
        results.push(await burstRun('services', m, side, profile, rep));
        save();
      }
    }
  }
  if (only.has('steady')) {
    for (const size of steadySizes) for (let rep = 0; rep < repeat; rep++) {
      results.push(...(await steadyRuns(size.nodes, size.services, rep)));
      save();
    }
  }
} finally {
  const path = save();
  console.log(renderMarkdown(results, { steadySeconds }));
  log(`results in ${path}`);
}
