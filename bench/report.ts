import { type RequestCount, writes } from './audit.ts';

/** The bench's Markdown tables, from the results run.ts collects. */

export interface RunResult {
  workload: 'nodes' | 'services' | 'steady';
  count: number;
  services?: number;
  side: string;
  profile: string;
  done: number;
  allDone: boolean;
  totalMs: number;
  settleMs?: number;
  p50Ms: number;
  p99Ms: number;
  /** Requests by the side during the workload (creation of the first object to the last done). */
  requests: RequestCount;
  idleRps: number;
  idleRequests: RequestCount;
  peakRssMiB: number;
  /** The sample with the most anonymous memory, and the file-backed memory then (older results lack it). */
  peakAnonMiB?: number;
  fileAtPeakAnonMiB?: number;
  steadyRssMiB: number;
  cpuSeconds: number;
  readyMs: number;
  /** Repetition index (0-based); odd repetitions ran the sides in reverse order. */
  rep?: number;
  /** CPU kube-apiserver and etcd spent during the workload (steady: during the window). */
  apiserverCpuSeconds?: number;
  etcdCpuSeconds?: number;
  /** The machine's 1-minute load average over the run, sampled every 5 s. */
  loadavgMean?: number;
  loadavgMax?: number;
  /** Steady state: whether the side stopped writing within --settle-max-seconds. */
  settled?: boolean;
  /** Nodes burst: Synced Events in the API at the end (objects; the sum of their counts; combined ones). */
  syncedEvents?: { objects: number; count: number; combined: number };
}

const VERBS = ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete'];
const f1 = (n: number) => (Number.isFinite(n) ? n.toFixed(1) : '–');
const f2 = (n: number) => (Number.isFinite(n) ? n.toFixed(2) : '–');
const secs = (ms: number) => (Number.isFinite(ms) ? (ms / 1000).toFixed(ms < 10_000 ? 2 : 1) : '–');

/**
 * Everything the side sent from the first object created to the end of the idle window: events
 * are sent asynchronously and may trail the last object done. Lease renewals are time, not work.
 */
function workRequests(r: RunResult): Record<string, number> {
  const all: Record<string, number> = { ...r.requests.byVerbResource };
  if (r.workload !== 'steady') for (const [key, n] of Object.entries(r.idleRequests.byVerbResource)) all[key] = (all[key] ?? 0) + n;
  for (const key of Object.keys(all)) if (key.endsWith(' leases')) delete all[key];
  return all;
}

function perObject(r: RunResult): string {
  const parts: string[] = [];
  for (const verb of VERBS) {
    let n = 0;
    for (const [key, c] of Object.entries(workRequests(r))) if (key.startsWith(`${verb} `)) n += c;
    if (n) parts.push(`${verb} ${f2(n / r.count)}`);
  }
  return parts.join(', ') || '–';
}

function writesPerObject(r: RunResult): string {
  return f2(writes({ byVerb: {}, byVerbResource: workRequests(r), total: 0 }) / r.count);
}

function idleBreakdown(c: RequestCount): string {
  return Object.entries(c.byVerbResource).sort((a, b) => b[1] - a[1]).map(([k, n]) => `${k} ${n}`).join(', ') || 'none';
}

/** Which state the side was in during the window: settled and idle, or still working (and how hard). */
function steadyState(r: RunResult): string {
  const w = writes({ byVerb: {}, byVerbResource: workRequests(r), total: 0 });
  const cpuShare = r.cpuSeconds / (r.totalMs / 1000);
  if (r.settled === false || w > 0) return `still writing (${w} writes, ${f2(cpuShare)} cores)`;
  return cpuShare > 0.1 ? `settled, busy (${f2(cpuShare)} cores)` : 'settled, idle';
}

export function renderMarkdown(results: RunResult[], opts: { steadySeconds: number }): string {
  const out: string[] = [];
  const bursts = results.filter((r) => r.workload !== 'steady');
  if (bursts.length) {
    out.push('| workload | side | profile | rep | done | total s | p50 s | p99 s | API requests per object (leases aside, to the end of the idle window) | writes/object | CPU s | CPU ms/object | apiserver CPU s | etcd CPU s | Synced events: objects / count (combined) | peak RSS MiB | peak anonymous + file-backed then MiB | idle RSS MiB | idle req/s | start→ready s | load avg mean/max |');
    out.push('|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|');
    for (const r of bursts) {
      const synced = r.syncedEvents ? `${r.syncedEvents.objects} / ${r.syncedEvents.count} (${r.syncedEvents.combined})` : '–';
      out.push(`| ${r.count} ${r.workload} | ${r.side} | ${r.profile} | ${(r.rep ?? 0) + 1} | ${r.done}/${r.count}${r.allDone ? '' : ' (timeout)'} | ${secs(r.totalMs)} | ${secs(r.p50Ms)} | ${secs(r.p99Ms)} | ${perObject(r)} | ${writesPerObject(r)} | ${f1(r.cpuSeconds)} | ${f2((r.cpuSeconds * 1000) / r.count)} | ${f1(r.apiserverCpuSeconds ?? NaN)} | ${f1(r.etcdCpuSeconds ?? NaN)} | ${synced} | ${f1(r.peakRssMiB)} | ${r.peakAnonMiB === undefined ? '-' : `${f1(r.peakAnonMiB)} + ${f1(r.fileAtPeakAnonMiB ?? NaN)}`} | ${f1(r.steadyRssMiB)} | ${f2(r.idleRps)} | ${secs(r.readyMs)} | ${f1(r.loadavgMean ?? NaN)}/${f1(r.loadavgMax ?? NaN)} |`);
    }
    out.push('');
  }
  const steady = results.filter((r) => r.workload === 'steady');
  if (steady.length) {
    out.push(`Steady state (window ${opts.steadySeconds}s after the side settled, or after --settle-max-seconds if it did not):`);
    out.push('');
    out.push('| nodes + services | side | rep | state | settle s | steady RSS MiB | peak RSS MiB | CPU s in window | apiserver CPU s in window | req/s in window | requests in window | start→ready s | load avg mean/max |');
    out.push('|---|---|---|---|---|---|---|---|---|---|---|---|---|');
    for (const r of steady) {
      out.push(`| ${r.count} + ${r.services} | ${r.side} | ${(r.rep ?? 0) + 1} | ${steadyState(r)} | ${secs(r.settleMs ?? NaN)} | ${f1(r.steadyRssMiB)} | ${f1(r.peakRssMiB)} | ${f1(r.cpuSeconds)} | ${f1(r.apiserverCpuSeconds ?? NaN)} | ${f2(r.idleRps)} | ${idleBreakdown(r.requests)} | ${secs(r.readyMs)} | ${f1(r.loadavgMean ?? NaN)}/${f1(r.loadavgMax ?? NaN)} |`);
    }
    out.push('');
  }
  const idle = bursts.filter((r) => r.side !== 'floor' && r.idleRequests.total > 0);
  if (idle.length) {
    out.push('Requests in the idle window (the 20 s after the last object was done; trailing events land here too):');
    out.push('');
    for (const r of idle) out.push(`- ${r.count} ${r.workload}, ${r.side} (${r.profile}): ${idleBreakdown(r.idleRequests)}`);
    out.push('');
  }
  return out.join('\n');
}
