/**
 * Where edge-ccm's peak RSS in the node burst goes: N uninitialised nodes created at once (the
 * `unbound` profile of scripts/bench unless --profile says otherwise) against each variant in
 * turn, on a fresh control plane each; RSS sampled every 100 ms and the kernel's high-water mark,
 * then, once every node is done and `--after-seconds` have passed, RSS before and after a heap
 * snapshot from /debug/pprof/heap (which collects garbage first), and 10 s after that. With --snapshot-dir the
 * snapshot is kept and summarised: the biggest classes of live objects by their own size.
 * Not part of scripts/bench's figures.
 *
 * Each variant runs with the Deployment's environment (the chart's, as scripts/bench runs it), its
 * own ENV added. `--floor=PATH` adds the floor (bench/floor.ts compiled: `bun scripts/compile.ts
 * bench/floor.ts PATH`) as a side, under the same environment and limits; it has no heap snapshot.
 * Each row is preceded by the burst's CPU by thread (the JS thread, Bun's HTTP client, the
 * collector's helpers...) in the log.
 *
 * Usage: bun bench/burst-memory.ts --variant=LABEL:PATH[:FLAG,FLAG...[:ENV=VALUE,...]] [--variant=...]
 *          [--floor=PATH [--floor-env=ENV=VALUE,...]] [--nodes=5000] [--repeat=1] [--profile=unbound] [--after-seconds=10] [--snapshot-dir=DIR]
 */
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { V1Node } from '@kubernetes/client-node';
import { NODES, ResourceClient } from '../src/kube/resources.ts';
import { startControlPlane } from '../test/harness/control-plane.ts';
import { transportFor } from '../test/harness/kubeconfig.ts';
import { freeLoopbackPorts } from '../test/harness/ports.ts';
import { LoadSampler } from './machine.ts';
import { ProcSampler, anonPlusFileMiB, cpuNanosByThread, cpuSeconds, stopProcess, threadCpu } from './proc-sampler.ts';
import { PROFILES, writeEdgeFakeConfig } from './sides.ts';
import { chartEnvironment } from './deployed-env.ts';
import { DoneWatcher, createAll, objectName, uninitialisedNode } from './workloads.ts';
import { option as opt } from './args.ts';

const argv = process.argv.slice(2);
const variants = argv.filter((a) => a.startsWith('--variant=')).map((a) => {
  const [label, path, flags, env] = a.slice('--variant='.length).split(':');
  if (!label || !path) throw new Error(`--variant: ${JSON.stringify(a)} is not LABEL:PATH[:FLAG,FLAG[:ENV=VALUE,...]]`);
  return { label, path, floor: false, flags: flags ? flags.split(',') : [], env: Object.fromEntries((env ? env.split(',') : []).map((e) => e.split('=') as [string, string])) };
});
const floorPath = opt('floor');
if (floorPath) variants.push({ label: 'floor', path: floorPath, floor: true, flags: [], env: Object.fromEntries((opt('floor-env')?.split(',') ?? []).map((e) => e.split('=') as [string, string])) });
if (variants.length === 0) throw new Error('give at least one --variant=LABEL:PATH or --floor=PATH');
/** What the chart's Deployment sets (bench/deployed-env.ts): every side runs under it, as in scripts/bench. */
const DEPLOYED_ENV = chartEnvironment('deployment.yaml');
const count = Number(opt('nodes') ?? 5000);
const repeat = Number(opt('repeat') ?? 1);
const afterMs = Number(opt('after-seconds') ?? 10) * 1000;
const profile = PROFILES[opt('profile') ?? 'unbound'];
if (!profile) throw new Error(`--profile: one of ${Object.keys(PROFILES).join(', ')}`);
const snapshotDir = opt('snapshot-dir');

const log = (msg: string) => console.error(`[burst ${new Date().toISOString().slice(11, 19)}] ${msg}`);
const dir = mkdtempSync(join(tmpdir(), 'edge-ccm-burst-'));
const rssMiB = (pid: number) => Number(/^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) / 1024;
const rows: string[] = [];

for (let rep = 0; rep < repeat; rep++) {
  for (const v of rep % 2 === 0 ? variants : [...variants].reverse()) {
    const cp = await startControlPlane({ extraApiServerFlags: ['--service-cluster-ip-range=10.0.0.0/16'] });
    try {
      const admin = transportFor(cp.adminKubeconfig);
      const kubeconfig = await cp.clientCertKubeconfig('bench-burst', ['system:masters']);
      const token = /token: (\S+)/.exec(readFileSync(cp.tokenKubeconfig('admin'), 'utf8'))?.[1];
      const runDir = join(dir, `${v.label}-${rep + 1}`);
      mkdirSync(runDir);
      const [port] = (await freeLoopbackPorts(1)) as [number];
      const watcher = new DoneWatcher(admin, 'nodes');
      await watcher.start();
      const limits = [`--concurrency=${profile.concurrency}`, `--qps=${profile.qps}`, `--burst=${profile.burst}`];
      const program = [...(v.path.endsWith('.ts') ? [process.execPath] : []), v.path];
      const cmd = v.floor ? [...program, `--kubeconfig=${kubeconfig}`, ...limits] : [
        ...program,
        '--cloud-provider=fake', `--cloud-config=${writeEdgeFakeConfig(runDir)}`, `--kubeconfig=${kubeconfig}`,
        `--authentication-kubeconfig=${kubeconfig}`, `--authorization-kubeconfig=${kubeconfig}`,
        '--bind-address=127.0.0.1', `--secure-port=${port}`, '--configure-cloud-routes=false',
        `--concurrent-node-syncs=${profile.concurrency}`, `--concurrent-service-syncs=${profile.concurrency}`,
        `--kube-api-qps=${profile.qps}`, `--kube-api-burst=${profile.burst}`, ...v.flags,
      ];
      const proc = Bun.spawn({ cmd, env: { ...process.env, ...DEPLOYED_ENV, ...v.env }, stdout: Bun.file(join(runDir, 'out.log')), stderr: Bun.file(join(runDir, 'err.log')) });
      const sampler = new ProcSampler(proc.pid, 100);
      try {
        await Bun.sleep(3000); // started, lease taken
        const startRss = rssMiB(proc.pid);
        const startSample = sampler.samples.at(-1);
        const cpu0 = cpuSeconds(proc.pid);
        const threads0 = cpuNanosByThread(proc.pid);
        const load = new LoadSampler();
        const started = Date.now();
        const nodes = new ResourceClient<V1Node>(admin, NODES);
        await createAll(count, (i) => nodes.create(uninitialisedNode(objectName('nodes', i))));
        const allDone = await watcher.waitFor(count, 600_000);
        const seconds = (Date.now() - started) / 1000;
        const cpu = cpuSeconds(proc.pid) - cpu0;
        // CPU-ms of the burst by thread (a thread that ended during it, as the collector's helpers do, is missing)
        log(`${v.label} rep ${rep + 1}: CPU-ms by thread in the burst: ${threadCpu(threads0, cpuNanosByThread(proc.pid), 60)}`);
        const peak = sampler.peakKiB() / 1024;
        const peakAt = sampler.peakSample('rssKiB');
        await Bun.sleep(afterMs);
        const before = rssMiB(proc.pid);
        // The floor serves no heap snapshot: its row leaves those columns empty.
        const res = v.floor ? undefined : await fetch(`https://127.0.0.1:${port}/debug/pprof/heap`, { headers: { authorization: `Bearer ${token}` }, tls: { rejectUnauthorized: false } });
        const snapshot = await res?.text();
        const after = res ? rssMiB(proc.pid) : undefined;
        if (res) await Bun.sleep(10_000); // what the allocator gives back once the snapshot's own garbage is gone
        const settled = res ? rssMiB(proc.pid) : undefined;
        if (snapshotDir && snapshot !== undefined) {
          mkdirSync(snapshotDir, { recursive: true });
          writeFileSync(join(snapshotDir, `${v.label}-${rep + 1}.heapsnapshot`), snapshot);
          summarise(snapshot, `${v.label} rep ${rep + 1}`);
        }
        const l = load.stop();
        const row = `| ${v.label} | ${rep + 1} | ${allDone ? '' : 'NOT '}done ${seconds.toFixed(1)} s | ${cpu.toFixed(1)} | ${startRss.toFixed(1)} | ${peak.toFixed(1)} (at +${((peakAt.at - started) / 1000).toFixed(1)} s) | ${startSample ? anonPlusFileMiB(startSample) : '-'} | ${anonPlusFileMiB(peakAt)} | ${before.toFixed(1)} | ${after?.toFixed(1) ?? '-'} | ${settled?.toFixed(1) ?? '-'} | ${res?.status ?? '-'} | ${l.mean.toFixed(1)}/${l.max.toFixed(1)} |`;
        log(row);
        rows.push(row);
      } finally {
        sampler.stop();
        await stopProcess(proc);
        await watcher.stop();
      }
    } finally {
      await cp.stop();
    }
  }
}
console.log(`${count} nodes, profile ${profile.name}; RSS after: ${afterMs / 1000} s after the last node was done\n`);
console.log('| variant | rep | burst | CPU-s | RSS at start MiB | peak RSS MiB | anonymous + file-backed at start MiB | the same at the sampled peak MiB | RSS after MiB | RSS right after a heap snapshot (which collects first) MiB | RSS 10 s later MiB | snapshot | load avg mean/max |');
console.log('|---|---|---|---|---|---|---|---|---|---|---|---|---|');
for (const r of rows) console.log(r);
console.log(`\nlogs in ${dir}`);

/** The live objects of a V8-format heap snapshot by class (node name for objects, type otherwise): count and own size. */
function summarise(text: string, title: string): void {
  const snap = JSON.parse(text) as { snapshot: { meta: { node_fields: string[]; node_types: [string[]] } }; nodes: number[]; strings: string[] };
  const fields = snap.snapshot.meta.node_fields;
  const types = snap.snapshot.meta.node_types[0];
  const [iType, iName, iSize] = ['type', 'name', 'self_size'].map((f) => fields.indexOf(f)) as [number, number, number];
  const byClass = new Map<string, { count: number; bytes: number }>();
  let total = 0;
  for (let i = 0; i < snap.nodes.length; i += fields.length) {
    const type = types[snap.nodes[i + iType] as number] ?? '?';
    const key = type === 'object' || type === 'closure' ? `${type} ${snap.strings[snap.nodes[i + iName] as number]}` : type;
    const size = snap.nodes[i + iSize] as number;
    total += size;
    const entry = byClass.get(key) ?? { count: 0, bytes: 0 };
    entry.count++;
    entry.bytes += size;
    byClass.set(key, entry);
  }
  console.error(`\n${title}: ${(total / 1048576).toFixed(1)} MiB live in the JS heap`);
  for (const [key, e] of [...byClass].sort((a, b) => b[1].bytes - a[1].bytes).slice(0, 25)) {
    console.error(`  ${(e.bytes / 1048576).toFixed(2).padStart(7)} MiB ${String(e.count).padStart(8)}  ${key.slice(0, 100)}`);
  }
}
