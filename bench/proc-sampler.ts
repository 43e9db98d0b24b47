import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';

/**
 * Memory and CPU of one process from /proc: VmRSS sampled on an interval (for the steady
 * figure), VmHWM for the peak, utime+stime for CPU seconds. Linux only, as the bench is.
 */

const CLOCK_TICKS_PER_SECOND = 100; // USER_HZ, 100 on every Linux the bench runs on

/** One reading of /proc/PID/status: the resident set, and its anonymous and file-backed parts (the executable's pages are file-backed). */
export interface ProcSample { at: number; rssKiB: number; anonKiB: number; fileKiB: number }

/** A sample's resident set as "anonymous + file-backed", in MiB. */
export function anonPlusFileMiB(s: Pick<ProcSample, 'anonKiB' | 'fileKiB'>): string {
  return `${(s.anonKiB / 1024).toFixed(1)} + ${(s.fileKiB / 1024).toFixed(1)}`;
}

function statusField(pid: number, field: string, status = readFileSync(`/proc/${pid}/status`, 'utf8')): number {
  const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status);
  return match?.[1] ? Number(match[1]) : 0;
}

/** The resident set and its anonymous and file-backed parts now, in MiB. */
export function residentMiB(pid: number): { rss: number; anon: number; file: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return { rss: statusField(pid, 'VmRSS', status) / 1024, anon: statusField(pid, 'RssAnon', status) / 1024, file: statusField(pid, 'RssFile', status) / 1024 };
}

/** CPU seconds (user + system) the process has used so far. */
export function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name, which may hold spaces, start after the last ')'.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS_PER_SECOND;
}

/**
 * Times the process's threads went to sleep and were woken (voluntary context switches, summed
 * over /proc/PID/task/*): its wake-ups, a timer's or a socket's, on any thread. Threads that
 * ended are not counted, so a difference over a window only holds for long-lived threads.
 */
export function voluntarySwitches(pid: number): number {
  let total = 0;
  for (const task of readdirSync(`/proc/${pid}/task`)) {
    try {
      total += Number(/^voluntary_ctxt_switches:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/task/${task}/status`, 'utf8'))?.[1] ?? 0);
    } catch {
      // the thread ended meanwhile
    }
  }
  return total;
}

/** The main thread alone (its task id is the pid): CPU nanoseconds (schedstat) and times it went to sleep and was woken. */
export function mainThreadFigures(pid: number): { cpuNs: number; sleeps: number } {
  const cpuNs = Number(readFileSync(`/proc/${pid}/task/${pid}/schedstat`, 'utf8').split(' ')[0]);
  const sleeps = Number(/^voluntary_ctxt_switches:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/task/${pid}/status`, 'utf8'))?.[1] ?? 0);
  return { cpuNs, sleeps };
}

/** `read(task directory)` summed by thread name (threads of one name summed); threads that ended meanwhile left out. */
function byThreadName(pid: number, read: (dir: string) => { name: string; value: number }): Map<string, number> {
  const out = new Map<string, number>();
  for (const task of readdirSync(`/proc/${pid}/task`)) {
    try {
      const { name, value } = read(`/proc/${pid}/task/${task}`);
      out.set(name, (out.get(name) ?? 0) + value);
    } catch {
      // the thread ended meanwhile
    }
  }
  return out;
}

/** voluntarySwitches by thread name: which thread wakes up. */
export function voluntarySwitchesByThread(pid: number): Map<string, number> {
  return byThreadName(pid, (dir) => {
    const status = readFileSync(`${dir}/status`, 'utf8');
    return { name: /^Name:\s+(.*)$/m.exec(status)?.[1] ?? '?', value: Number(/^voluntary_ctxt_switches:\s+(\d+)/m.exec(status)?.[1] ?? 0) };
  });
}

/**
 * CPU nanoseconds by thread name, from /proc/PID/task/TID/schedstat: which thread the idle CPU goes
 * to, at nanosecond resolution (the stat file counts 10 ms ticks).
 */
export function cpuNanosByThread(pid: number): Map<string, number> {
  return byThreadName(pid, (dir) => ({ name: readFileSync(`${dir}/comm`, 'utf8').trim(), value: Number(readFileSync(`${dir}/schedstat`, 'utf8').split(' ')[0]) }));
}

/** The change between two by-thread readings, scaled and rounded to one decimal, as "name 12.3, ..." (largest first, below `least` left out). */
function threadChanges(before: Map<string, number>, after: Map<string, number>, scale: number, least: number): string {
  return [...after].map(([name, n]) => [name, (n - (before.get(name) ?? 0)) * scale] as const)
    .filter(([, v]) => v >= least).sort((a, b) => b[1] - a[1]).map(([name, v]) => `${name} ${v.toFixed(1)}`).join(', ');
}

/** Per second between two voluntarySwitchesByThread readings (busiest first). */
export function threadWakeups(before: Map<string, number>, after: Map<string, number>, seconds: number): string {
  return threadChanges(before, after, 1 / seconds, 0.05);
}

/** CPU-ms a minute between two cpuNanosByThread readings (busiest first). */
export function threadCpu(before: Map<string, number>, after: Map<string, number>, seconds: number): string {
  return threadChanges(before, after, 60 / seconds / 1e6, 0.05);
}

/**
 * Forgets which pages the process has touched (the accessed bits of its page tables, `echo 1 >
 * /proc/PID/clear_refs`), so that referencedMiB later says what it touched since. Needs root or
 * the process's owner, as the benches run.
 */
export function clearReferenced(pid: number): void {
  writeFileSync(`/proc/${pid}/clear_refs`, '1');
}

/**
 * Resident MiB the process touched since clearReferenced, from /proc/PID/smaps: in all, and of it
 * in machine code mapped from files (executable mappings: the program's text and its libraries).
 * A resident set counts every page mapped, also those the kernel mapped around a fault (up to 16
 * neighbours of each page faulted in) and those touched once at start; what was referenced over
 * an idle window is what the process keeps using, which the kernel keeps resident under memory
 * pressure while it reclaims the rest of the file-backed pages.
 */
export function referencedMiB(pid: number): { total: number; code: number } {
  let total = 0;
  let code = 0;
  for (const m of smapsMappings(pid)) {
    const referenced = (m.kiB.get('Referenced') ?? 0) / 1024;
    total += referenced;
    if (m.perms[2] === 'x' && m.file) code += referenced;
  }
  return { total, code };
}

/**
 * The file-backed resident MiB of each file mapping, by file and permissions ("edge-ccm r-xp":
 * the program's machine code; "r--p": its read-only data, ICU's tables among them; "rw-p": its data
 * and, in a Bun executable, the bundle and its bytecode), from /proc/PID/smaps. Pages a process
 * wrote in a private file mapping are anonymous and left out: they are counted as RssAnon.
 */
export function fileResidentByMapping(pid: number): Map<string, number> {
  const out = new Map<string, number>();
  for (const m of smapsMappings(pid)) {
    const fileKiB = (m.kiB.get('Rss') ?? 0) - (m.kiB.get('Anonymous') ?? 0);
    if (!m.file || fileKiB <= 0) continue;
    const key = `${m.path.split('/').pop()} ${m.perms}`;
    out.set(key, (out.get(key) ?? 0) + fileKiB / 1024);
  }
  return out;
}

/** One mapping of /proc/PID/smaps: its permissions, whether a file backs it (inode not 0), its path, its "Name: N kB" fields. */
interface SmapsMapping { perms: string; file: boolean; path: string; kiB: Map<string, number> }

function smapsMappings(pid: number): SmapsMapping[] {
  const out: SmapsMapping[] = [];
  for (const line of readFileSync(`/proc/${pid}/smaps`, 'utf8').split('\n')) {
    const mapping = /^[0-9a-f]+-[0-9a-f]+ (\S{4}) \S+ \S+ (\d+)\s*(.*)$/.exec(line);
    if (mapping) {
      out.push({ perms: mapping[1]!, file: mapping[2] !== '0', path: mapping[3]!, kiB: new Map() });
      continue;
    }
    const field = /^(\w+):\s+(\d+) kB/.exec(line);
    if (field && out.length) out[out.length - 1]!.kiB.set(field[1]!, Number(field[2]));
  }
  return out;
}

/** What one process did over an idle window. */
export interface IdleFigures {
  /** Resident MiB when the window opened, and when it closed (with its anonymous part). */
  rssStart: number;
  rssEnd: number;
  anonEnd: number;
  cpuPerMinute: number;
  /** Voluntary context switches a second, all threads. */
  wakeupsPerSecond: number;
  /** The same by thread name, busiest first (threadWakeups). */
  byThread: string;
  /** CPU-ms a minute by thread name, busiest first (threadCpu). */
  cpuByThread: string;
  /** Resident MiB touched in the window (referencedMiB), and of it machine code from files. */
  referenced: number;
  referencedCode: number;
}

/**
 * Sleeps `seconds` and says what each of `pids` did meanwhile, with the 1-minute load average
 * at both ends ("1.2-0.8"): the figures of the footprint benches, side by side in one window.
 */
export async function idleWindow(pids: readonly number[], seconds: number): Promise<{ figures: IdleFigures[]; load: string }> {
  const rss0 = pids.map(residentMiB);
  const cpu0 = pids.map(cpuSeconds);
  const woken0 = pids.map(voluntarySwitches);
  const byThread0 = pids.map(voluntarySwitchesByThread);
  const cpuByThread0 = pids.map(cpuNanosByThread);
  const load0 = loadavg()[0]!;
  for (const pid of pids) clearReferenced(pid);
  await Bun.sleep(seconds * 1000);
  const load1 = loadavg()[0]!;
  const figures = pids.map((pid, i) => {
    const end = residentMiB(pid);
    const touched = referencedMiB(pid);
    return {
      rssStart: rss0[i]!.rss,
      rssEnd: end.rss,
      anonEnd: end.anon,
      cpuPerMinute: ((cpuSeconds(pid) - cpu0[i]!) * 60) / seconds,
      wakeupsPerSecond: (voluntarySwitches(pid) - woken0[i]!) / seconds,
      byThread: threadWakeups(byThread0[i]!, voluntarySwitchesByThread(pid), seconds),
      cpuByThread: threadCpu(cpuByThread0[i]!, cpuNanosByThread(pid), seconds),
      referenced: touched.total,
      referencedCode: touched.code,
    };
  });
  return { figures, load: `${load0.toFixed(1)}-${load1.toFixed(1)}` };
}

export class ProcSampler {
  readonly samples: ProcSample[] = [];
  private readonly timer: ReturnType<typeof setInterval>;

  constructor(readonly pid: number, intervalMs = 250) {
    this.timer = setInterval(() => this.sample(), intervalMs);
  }

  private sample(): void {
    try {
      const status = readFileSync(`/proc/${this.pid}/status`, 'utf8');
      this.samples.push({ at: Date.now(), rssKiB: statusField(this.pid, 'VmRSS', status), anonKiB: statusField(this.pid, 'RssAnon', status), fileKiB: statusField(this.pid, 'RssFile', status) });
    } catch {
      // the process has exited; stop() is coming
    }
  }

  /** Peak resident set since the process started (the kernel's high-water mark). */
  peakKiB(): number {
    try {
      return statusField(this.pid, 'VmHWM');
    } catch {
      return Math.max(0, ...this.samples.map((s) => s.rssKiB));
    }
  }

  /**
   * The sample with the most resident memory (`rssKiB`) or the most anonymous memory (`anonKiB`:
   * the heap, the allocator, buffers, what the process itself holds). The rest of RSS is
   * file-backed: pages of the executable, clean and shared, which the kernel can drop; a 116 MB
   * single-file Bun executable keeps about 50 MiB of them.
   */
  peakSample(by: 'rssKiB' | 'anonKiB'): ProcSample {
    return this.samples.reduce((best, s) => (s[by] > best[by] ? s : best), { at: 0, rssKiB: 0, anonKiB: 0, fileKiB: 0 });
  }

  /** Mean resident set over a time window. */
  meanKiB(from: number, to: number): number {
    const inWindow = this.samples.filter((s) => s.at >= from && s.at <= to);
    return inWindow.length ? inWindow.reduce((sum, s) => sum + s.rssKiB, 0) / inWindow.length : 0;
  }

  stop(): void {
    clearInterval(this.timer);
  }
}

/** Ends a process the bench started: SIGTERM, then SIGKILL if it has not exited after `graceMs`. */
export async function stopProcess(proc: { kill(signal?: string | number): void; readonly exited: Promise<number> }, graceMs = 30_000): Promise<void> {
  proc.kill('SIGTERM');
  const timer = setTimeout(() => proc.kill('SIGKILL'), graceMs);
  await proc.exited;
  clearTimeout(timer);
}
