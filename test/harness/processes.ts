import { closeSync, existsSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Subprocess } from 'bun';

/**
 * Child processes and temp dirs the harness owns, cleaned up however the test process ends:
 * - stop() paths kill by pid and remove the dir;
 * - a plain `bun script.ts` that ends or is interrupted runs the 'exit' / SIGINT / SIGTERM
 *   handlers below (synchronous code only there, hence SIGKILL and rmSync);
 * - `bun test` emits no 'exit' event, and a SIGKILLed process runs nothing at all, so each
 *   owned dir also gets a watchdog: a shell blocked reading a pipe from this process. The
 *   kernel closes the pipe when this process dies, however it dies; the watchdog then kills
 *   the pids recorded in the dir's *.pid files and removes the dir.
 */

const livePids = new Set<number>();
const watchdogs = new Map<string, Subprocess>();
let handlersInstalled = false;

/**
 * An owned dir may hold this shell script: run when the owner dies, after the dir's processes were
 * killed and before the dir is removed, for what is not a process or a file (network namespaces).
 */
export const DIR_CLEANUP_SCRIPT = 'cleanup.sh';

const WATCHDOG_SCRIPT = `cat >/dev/null; for f in "$1"/*.pid; do [ -f "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null; done; [ -f "$1/${DIR_CLEANUP_SCRIPT}" ] && sh "$1/${DIR_CLEANUP_SCRIPT}" >/dev/null 2>&1; rm -rf "$1"`;

function cleanUpSync(): void {
  for (const pid of livePids) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  livePids.clear();
  for (const [dir, watchdog] of watchdogs) {
    watchdog.kill('SIGKILL');
    if (existsSync(join(dir, DIR_CLEANUP_SCRIPT))) Bun.spawnSync({ cmd: ['sh', join(dir, DIR_CLEANUP_SCRIPT)], stdout: 'ignore', stderr: 'ignore' });
    rmSync(dir, { recursive: true, force: true });
  }
  watchdogs.clear();
}

function installHandlers(): void {
  if (handlersInstalled) return;
  handlersInstalled = true;
  process.on('exit', cleanUpSync);
  for (const [signal, code] of [['SIGINT', 130], ['SIGTERM', 143]] as const) {
    process.on(signal, () => {
      // A program with its own handler (a demo's graceful shutdown) decides when to exit; the
      // 'exit' handler and the watchdogs clean up then. Alone, ours replaces the default "die".
      if (process.listenerCount(signal) > 1) return;
      cleanUpSync();
      process.exit(code);
    });
  }
}

/** Takes charge of a temp dir: it is removed, and processes spawned into it killed, when this process ends. */
export function ownDir(dir: string): void {
  installHandlers();
  if (watchdogs.has(dir)) return;
  const watchdog = Bun.spawn({ cmd: ['sh', '-c', WATCHDOG_SCRIPT, 'edge-ccm-watchdog', dir], stdin: 'pipe', stdout: 'ignore', stderr: 'ignore' });
  watchdog.unref(); // it must never keep the test process alive; the Map keeps its pipe open
  watchdogs.set(dir, watchdog);
}

/** Removes an owned dir now and dismisses its watchdog. */
export function removeOwnedDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
  watchdogs.get(dir)?.kill('SIGKILL');
  watchdogs.delete(dir);
}

let pidsDir: string | undefined;

/**
 * Records the pid of a child spawned elsewhere, so it is killed however this process ends (the
 * handlers above, and an owned dir's watchdog when `bun test` dies). Call the returned forget()
 * once it has exited: its pid may be reused.
 */
export function ownPid(pid: number): () => void {
  if (pidsDir === undefined) {
    pidsDir = mkdtempSync(join(tmpdir(), 'edge-ccm-processes-'));
    ownDir(pidsDir);
  }
  const pidFile = join(pidsDir, `${pid}.pid`);
  writeFileSync(pidFile, String(pid));
  livePids.add(pid);
  return () => {
    livePids.delete(pid);
    rmSync(pidFile, { force: true });
  };
}

/** A child process whose stdout and stderr go to DIR/NAME.log, its pid in DIR/NAME.pid while it runs. */
export class LoggedProcess {
  private constructor(
    readonly name: string,
    readonly logPath: string,
    private readonly pidFile: string,
    private readonly proc: Subprocess,
  ) {}

  static spawn(name: string, cmd: string[], dir: string): LoggedProcess {
    installHandlers();
    const logPath = join(dir, `${name}.log`);
    const pidFile = join(dir, `${name}.pid`);
    const fd = openSync(logPath, 'a');
    let proc: Subprocess;
    try {
      proc = Bun.spawn({ cmd, stdin: 'ignore', stdout: fd, stderr: fd });
    } finally {
      closeSync(fd); // the child holds its own copy
    }
    // Unreferenced: a script that forgets stop() still ends, and the 'exit' handler cleans up.
    proc.unref();
    livePids.add(proc.pid);
    writeFileSync(pidFile, String(proc.pid));
    const child = new LoggedProcess(name, logPath, pidFile, proc);
    void proc.exited.then(() => child.forget());
    return child;
  }

  get pid(): number {
    return this.proc.pid;
  }

  /** Resolves with the exit code once the process has ended. */
  get exited(): Promise<number> {
    return this.proc.exited;
  }

  get running(): boolean {
    return this.proc.exitCode === null && this.proc.signalCode === null;
  }

  /** SIGKILL by pid and wait until the process is really gone (its port free again). */
  async kill(): Promise<void> {
    if (this.running) this.proc.kill('SIGKILL');
    await this.proc.exited;
    this.forget();
  }

  /** SIGTERM by pid (a graceful stop) and wait for the exit; SIGKILL if it has not ended after `graceMs`. */
  async terminate(graceMs = 10_000): Promise<number> {
    if (this.running) this.proc.kill('SIGTERM');
    const timer = setTimeout(() => this.running && this.proc.kill('SIGKILL'), graceMs);
    try {
      return await this.proc.exited;
    } finally {
      clearTimeout(timer);
      this.forget();
    }
  }

  /** The last lines of the log, for error messages. */
  logTail(lines = 40): string {
    try {
      return readFileSync(this.logPath, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
    } catch (e) {
      return `(no log at ${this.logPath}: ${String(e)})`;
    }
  }

  /** Once it has exited its pid may be reused: nothing may kill it any more. */
  private forget(): void {
    livePids.delete(this.proc.pid);
    rmSync(this.pidFile, { force: true });
  }
}
