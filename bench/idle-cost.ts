/**
 * Idle CPU of edge-ccm builds side by side on one control plane: N initialised NotReady nodes
 * (no Ready condition, as bench/workloads.ts prepares them), each variant started in turn
 * (alternating order every repetition), left to settle, then its CPU-s (utime + stime from
 * /proc) counted over a window, with the load average. For A/B of idle-cost changes (build each
 * variant as scripts/bench builds edge-ccm-fake); not part of scripts/bench's figures.
 *
 * Usage: bun bench/idle-cost.ts --variant=LABEL:PATH[:FLAG,FLAG...[:ENV=VALUE,ENV=VALUE...]] [--variant=...]
 *          [--nodes=5000] [--services=0] [--settle-seconds=30] [--window-seconds=60] [--repeat=2]
 *          [--cpu-prof-dir=DIR]   (PATH ending in .ts runs from source under this Bun; with
 *                                  --cpu-prof-dir it writes a .cpuprofile there, for DevTools)
 */
import { mkdirSync, mkdtempSync, readFileSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startControlPlane } from '../test/harness/control-plane.ts';
import { transportFor } from '../test/harness/kubeconfig.ts';
import { freeLoopbackPorts } from '../test/harness/ports.ts';
import { LoadSampler, controlPlaneCpu } from './machine.ts';
import { ProcSampler, cpuSeconds, stopProcess } from './proc-sampler.ts';
import { writeEdgeFakeConfig } from './sides.ts';
import { prepareSteadyState } from './workloads.ts';
import { option as opt } from './args.ts';

const argv = process.argv.slice(2);
const num = (name: string, dflt: number) => Number(opt(name) ?? dflt);
const variants = argv.filter((a) => a.startsWith('--variant=')).map((a) => {
  const [label, path, flags, env] = a.slice('--variant='.length).split(':');
  if (!label || !path) throw new Error(`--variant: ${JSON.stringify(a)} is not LABEL:PATH[:FLAG,FLAG[:ENV=VALUE,...]]`);
  return { label, path, flags: flags ? flags.split(',') : [], env: Object.fromEntries((env ? env.split(',') : []).map((e) => e.split('=') as [string, string])) };
});
if (variants.length === 0) throw new Error('give at least one --variant=LABEL:PATH');
const nodes = num('nodes', 5000);
const services = num('services', 0);
const settleMs = num('settle-seconds', 30) * 1000;
const windowMs = num('window-seconds', 60) * 1000;
const repeat = num('repeat', 2);
const profDir = opt('cpu-prof-dir');

/** CPU-s and sleeps (voluntary context switches: each a wakeup after) per thread name (JS thread, GC helpers, JIT workers, ...): where a native cost goes. */
function threadCpu(pid: number): Map<string, { cpu: number; wakeups: number }> {
  const out = new Map<string, { cpu: number; wakeups: number }>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')).replace(/[0-9]+$/, '#');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const wakeups = Number(/^voluntary_ctxt_switches:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/task/${tid}/status`, 'utf8'))?.[1] ?? 0);
      const entry = out.get(comm) ?? { cpu: 0, wakeups: 0 };
      entry.cpu += (Number(f[11]) + Number(f[12])) / 100;
      entry.wakeups += wakeups;
      out.set(comm, entry);
    } catch {
      // the thread ended meanwhile
    }
  }
  return out;
}
const threadRows: string[] = [];

const log = (msg: string) => console.error(`[idle ${new Date().toISOString().slice(11, 19)}] ${msg}`);
const dir = mkdtempSync(join(tmpdir(), 'edge-ccm-idle-'));
const cp = await startControlPlane({ extraApiServerFlags: ['--service-cluster-ip-range=10.0.0.0/16'] });
const rows: string[] = [];
try {
  log(`preparing ${nodes} nodes, ${services} services`);
  await prepareSteadyState(transportFor(cp.adminKubeconfig), nodes, services);
  const kubeconfig = await cp.clientCertKubeconfig('bench-idle', ['system:masters']);
  const fakeConfig = writeEdgeFakeConfig(dir);
  for (let rep = 0; rep < repeat; rep++) {
    for (const v of rep % 2 === 0 ? variants : [...variants].reverse()) {
      const [port] = (await freeLoopbackPorts(1)) as [number];
      const runDir = join(dir, `${v.label}-${rep + 1}`);
      mkdirSync(runDir);
      const prof = v.path.endsWith('.ts') ? (profDir ? ['--cpu-prof', `--cpu-prof-dir=${join(profDir, `${v.label}-${rep + 1}`)}`] : []) : [];
      const cmd = [
        ...(v.path.endsWith('.ts') ? [process.execPath, ...prof] : []), v.path,
        '--cloud-provider=fake', `--cloud-config=${fakeConfig}`, `--kubeconfig=${kubeconfig}`,
        `--authentication-kubeconfig=${kubeconfig}`, `--authorization-kubeconfig=${kubeconfig}`,
        '--bind-address=127.0.0.1', `--secure-port=${port}`, '--configure-cloud-routes=false',
        `--leader-elect-resource-name=bench-idle-${v.label}-${rep}`, ...v.flags,
      ];
      const proc = Bun.spawn({ cmd, env: { ...process.env, ...v.env }, stdout: Bun.file(join(runDir, 'out.log')), stderr: Bun.file(join(runDir, 'err.log')) });
      const sampler = new ProcSampler(proc.pid);
      try {
        await Bun.sleep(settleMs);
        if (proc.exitCode !== null) throw new Error(`${v.label} exited (${proc.exitCode}): ${readFileSync(join(runDir, 'err.log'), 'utf8').slice(-2000)}`);
        const cpu0 = cpuSeconds(proc.pid);
        const threads0 = threadCpu(proc.pid);
        const cp0 = controlPlaneCpu(cp.dir);
        const load = new LoadSampler();
        const from = Date.now();
        await Bun.sleep(windowMs);
        const to = Date.now();
        const cpu = cpuSeconds(proc.pid) - cpu0;
        const threads = [...threadCpu(proc.pid)]
          .map(([name, t]) => ({ name, cpu: t.cpu - (threads0.get(name)?.cpu ?? 0), wakeups: t.wakeups - (threads0.get(name)?.wakeups ?? 0) }))
          .filter((t) => t.cpu > 0 || t.wakeups > 0).sort((a, b) => b.cpu - a.cpu);
        threadRows.push(`${v.label} ${rep + 1}: ${threads.map((t) => `${t.name} ${t.cpu.toFixed(2)} s (${t.wakeups} wakeups)`).join(', ')}`);
        const cp1 = controlPlaneCpu(cp.dir);
        const l = load.stop();
        const row = `| ${v.label} | ${rep + 1} | ${cpu.toFixed(2)} | ${(sampler.meanKiB(from, to) / 1024).toFixed(1)} | ${(sampler.peakKiB() / 1024).toFixed(1)} | ${(cp1.apiserver - cp0.apiserver).toFixed(2)} | ${l.mean.toFixed(1)}/${l.max.toFixed(1)} |`;
        log(row);
        rows.push(row);
      } finally {
        sampler.stop();
        await stopProcess(proc);
      }
    }
  }
} finally {
  await cp.stop();
}
console.log(`${nodes} nodes, ${services} services; settle ${settleMs / 1000} s, window ${windowMs / 1000} s\n`);
console.log('| variant | rep | CPU-s in window | steady RSS MiB | peak RSS MiB | apiserver CPU-s | load avg mean/max |');
console.log('|---|---|---|---|---|---|---|');
for (const r of rows) console.log(r);
console.log('\nCPU-s and wakeups in the window by thread name (threads started during the window count whole):');
for (const r of threadRows) console.log(`- ${r}`);
console.log(`\nlogs in ${dir}`);
