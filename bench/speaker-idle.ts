/**
 * Where an idle `edge-ccm speaker` spends its CPU, and how that changes with the services it
 * holds (issue 38): node-footprint's lab (bench/node-footprint-lab.ts: three node namespaces on
 * one switch, a real kube-apiserver), one variant at a time on the three nodes, from no service
 * to each step of --services; per step, once every address is announced and --settle-seconds
 * have passed, an idle window of --window-seconds with, per node, CPU-s/min and RSS; on n2 a
 * `perf record` (499 Hz) whose samples are split by thread (the main thread, mimalloc's
 * scavenger, JSC's GC and JIT threads); with --strace, `strace -f -c` of n1 (its CPU figure then
 * counts strace's cost). A variant whose environment sets BUN_JSC_logGC=1 also gets the
 * collections counted from its log. A variant's BINARY may be a script that execs the speaker
 * from source with a --preload (bench/timer-census.ts counts timers, microtasks and heartbeat
 * datagrams by call site; SIGUSR2, sent at both ends of every window, writes and resets it).
 *
 *   flock /tmp/l2-lab.lock bun bench/speaker-idle.ts [--services=10,100] [--settle-seconds=20] [--window-seconds=60]
 *     [--phase=edge-ccm-l2|bgp] [--strace] [--census] --variant=NAME:BINARY[::ENV=V,...]...
 *
 * --census: every variant must run with bench/timer-census.ts preloaded (SIGUSR2 ends a speaker without it).
 *
 * Needs root, the network tools (scripts/install-network-tools.sh), BIRD, perf and strace.
 */
import { readFileSync, statSync, writeFileSync } from 'node:fs';
import { homedir, loadavg } from 'node:os';
import { join, resolve } from 'node:path';
import { eventually } from '../test/harness/eventually.ts';
import { NODES } from '../test/harness/l2-lab.ts';
import { NodeFootprintLab } from './node-footprint-lab.ts';
import { phases } from './node-footprint-sides.ts';
import { cpuSeconds, residentMiB } from './proc-sampler.ts';
import { parseVariants } from './variants.ts';
import { stringOption as opt } from './args.ts';

const ROOT = resolve(import.meta.dir, '..');
const ANCHORS = join(homedir(), '.cache/edge-ccm/anchors');
const args = process.argv.slice(2);
const STEPS = opt('services', '10,100').split(',').map(Number);
const WINDOW_S = Number(opt('window-seconds', '60'));
const SETTLE_S = Number(opt('settle-seconds', '20'));
const PHASE = opt('phase', 'edge-ccm-l2');
const STRACE = args.includes('--strace');
const CENSUS = args.includes('--census');
const variants = parseVariants(args, [`edge-ccm:${join(ROOT, 'dist/edge-ccm')}::BUN_JSC_useDFGJIT=0`]);
const OUT = `/tmp/speaker-idle-${process.pid}`;
const load = () => loadavg().map((l) => l.toFixed(1)).join(' ');

/** perf samples of `data` by thread name. */
async function samplesByThread(data: string): Promise<string> {
  const report = await new Response(Bun.spawn(['perf', 'report', '-i', data, '--no-children', '--sort', 'comm', '--stdio', '-n'], { stdout: 'pipe', stderr: 'ignore' }).stdout).text();
  return [...report.matchAll(/^\s+[\d.]+%\s+(\d+)\s+(.+?)\s*$/gm)].map((m) => `${m[2]} ${m[1]}`).join(', ');
}

/** Collections in a BUN_JSC_logGC=1 log: count and summed cycle time, Eden and Full. */
function collections(log: string): string {
  let kind = '';
  const sum = { Eden: [0, 0], Full: [0, 0] } as Record<string, [number, number]>;
  for (const line of log.split('\n')) {
    kind = /=> (Eden|Full)Collection/.exec(line)?.[1] ?? kind;
    const end = /cycle ([\d.]+)ms END/.exec(line);
    if (end && kind) {
      sum[kind]![0] += 1;
      sum[kind]![1] += Number(end[1]);
    }
  }
  return `eden ${sum.Eden![0]} (${sum.Eden![1].toFixed(1)} ms), full ${sum.Full![0]} (${sum.Full![1].toFixed(1)} ms)`;
}

const rows: string[] = [];
const lab = await NodeFootprintLab.build(join(ANCHORS, 'src/metallb/config/crd/bases'));
try {
  for (const v of variants) {
    // The lab's processes get the environment this process started with, less SPEAKER_ENV's names: a wrapper sets the variant's.
    const wrapper = `${OUT}-${v.name.replace(/\W/g, '_')}.sh`;
    const env = { ...(v.env ?? {}), ...(CENSUS ? { CENSUS_OUT: `${wrapper}.census` } : {}) };
    writeFileSync(wrapper, `#!/bin/sh\n${Object.entries(env).map(([k, x]) => `export ${k}='${x}'\n`).join('')}exec ${v.binary} "$@"\n`, { mode: 0o755 });
    const side = phases({ edgeCcm: wrapper, metallb: join(ANCHORS, 'metallb-speaker'), kubeVip: join(ANCHORS, 'kube-vip'), addressProbes: 3, edgeCcmEnv: [] })[PHASE]!.sides[0]!;
    await side.setUp?.(lab);
    const procs = new Map(NODES.map((n) => [n, side.start(lab, n)]));
    try {
      await Bun.sleep(SETTLE_S * 1000);
      for (const step of [0, ...STEPS]) {
        if (step > 0) {
          await lab.addServices(step);
          await eventually(`${v.name}: every address of ${step} services announced`, async () => (await side.missing(lab)) === undefined, { timeoutMs: 600_000, intervalMs: 1000 });
          await Bun.sleep(SETTLE_S * 1000);
        }
        const logAt = new Map([...procs].map(([n, p]) => [n, statSync(p.logPath).size]));
        if (CENSUS) for (const p of procs.values()) process.kill(p.pid, 'SIGUSR2');
        const cpu0 = new Map([...procs].map(([n, p]) => [n, cpuSeconds(p.pid)]));
        const load0 = load();
        const strace = STRACE ? Bun.spawn(['strace', '-f', '-c', '-p', String(procs.get('n1')!.pid), '-o', `${wrapper}.strace-${step}`], { stderr: 'ignore' }) : undefined;
        const perfData = `${wrapper}.perf-${step}`;
        const perf = Bun.spawn(['perf', 'record', '-F', '499', '-p', String(procs.get('n2')!.pid), '-o', perfData, '--', 'sleep', String(WINDOW_S)], { stdout: 'ignore', stderr: 'ignore' });
        await Bun.sleep(WINDOW_S * 1000);
        strace?.kill('SIGINT');
        await Promise.all([strace?.exited, perf.exited]);
        if (CENSUS) for (const p of procs.values()) process.kill(p.pid, 'SIGUSR2');
        for (const [n, p] of procs) {
          if (!p.running) throw new Error(`${v.name} on ${n} exited:\n${p.logTail(30)}`);
          const cpu = ((cpuSeconds(p.pid) - cpu0.get(n)!) * 60) / WINDOW_S;
          const gc = v.env?.BUN_JSC_logGC ? ` ${collections(readFileSync(p.logPath).subarray(logAt.get(n)!).toString())} |` : '';
          const threads = n === 'n2' ? await samplesByThread(perfData) : n === 'n1' && STRACE ? `strace: ${wrapper}.strace-${step}` : '';
          const row = `| ${v.name} | ${step} | ${n} | ${cpu.toFixed(3)} | ${residentMiB(p.pid).rss.toFixed(1)} | ${threads} |${gc} ${load0} -> ${load()} |`;
          rows.push(row);
          console.log(row);
        }
      }
    } finally {
      for (const p of procs.values()) await p.terminate(10_000);
      await side.tearDown?.(lab);
      await lab.deleteServices();
    }
  }
} finally {
  await lab.destroy();
}
console.log(`\n| variant | services | node | idle CPU-s/min | RSS (MiB) | n2: perf samples by thread (499 Hz) | load avg (window start -> end) |\n|---|---|---|---|---|---|---|\n${rows.join('\n')}\n(files: ${OUT}-*)`);
