import { closeSync, openSync, readFileSync, rmSync } from 'node:fs';
import type { Subprocess } from 'bun';

/**
 * Child processes and temp dirs the harness owns. Everything is tracked by pid and path, so a
 * failed test, a Ctrl-C or a plain process exit still ends the processes and removes the dirs:
 * the 'exit' handler can only run synchronous code, hence SIGKILL and rmSync there.
 */

const livePids = new Set<number>();
const ownedDirs = new Set<string>();
let handlersInstalled = false;

function cleanUpSync(): void {
  for (const pid of livePids) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  livePids.clear();
  for (const dir of ownedDirs) rmSync(dir, { recursive: true, force: true });
  ownedDirs.clear();
}

function installHandlers(): void {
  if (handlersInstalled) return;
  handlersInstalled = true;
  process.on('exit', cleanUpSync);
  for (const [signal, code] of [['SIGINT', 130], ['SIGTERM', 143]] as const) {
    // Our handler replaces the default "die", so it has to exit itself after cleaning up.
    process.on(signal, () => {
      cleanUpSync();
      process.exit(code);
    });
  }
}

/** Registers a temp dir to be removed at process exit unless released earlier. */
export function ownDir(dir: string): void {
  installHandlers();
  ownedDirs.add(dir);
}

export function removeOwnedDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
  ownedDirs.delete(dir);
}

/** A child process whose stdout and stderr go to a log file. */
export class LoggedProcess {
  private constructor(
    readonly name: string,
    readonly logPath: string,
    private readonly proc: Subprocess,
  ) {}

  static spawn(name: string, cmd: string[], logPath: string): LoggedProcess {
    installHandlers();
    const fd = openSync(logPath, 'a');
    let proc: Subprocess;
    try {
      proc = Bun.spawn({ cmd, stdin: 'ignore', stdout: fd, stderr: fd });
    } finally {
      closeSync(fd); // the child holds its own copy
    }
    livePids.add(proc.pid);
    void proc.exited.then(() => livePids.delete(proc.pid));
    return new LoggedProcess(name, logPath, proc);
  }

  get pid(): number {
    return this.proc.pid;
  }

  /** Resolves with the exit code (or signal number) once the process has ended. */
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
    livePids.delete(this.proc.pid);
  }

  /** The last lines of the log, for error messages. */
  logTail(lines = 40): string {
    try {
      return readFileSync(this.logPath, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
    } catch (e) {
      return `(no log at ${this.logPath}: ${String(e)})`;
    }
  }
}
