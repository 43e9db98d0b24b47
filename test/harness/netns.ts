import { appendFileSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { BunFile, Subprocess } from 'bun';
import { DIR_CLEANUP_SCRIPT, LoggedProcess, ownDir, removeOwnedDir } from './processes.ts';

/**
 * Network namespaces a test builds its own networks in. Everything a lab creates lives inside its
 * namespaces (bridges and veth pairs are made there, never in the machine's own namespace), so
 * deleting the namespaces removes it all. The lab's dir holds a cleanup script listing them: the
 * dir's watchdog (processes.ts) runs it however the test process ends, and destroy() runs it on
 * the normal path. Only documentation ranges and loopback belong on these links.
 */

export interface CommandResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs a command to its end (killed by pid after `timeoutMs`); a non-zero exit is returned, not thrown. */
export async function runCommand(cmd: string[], timeoutMs = 30_000): Promise<CommandResult> {
  const proc = Bun.spawn({ cmd, stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' });
  const timer = setTimeout(() => proc.kill('SIGKILL'), timeoutMs);
  try {
    const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    return { code, stdout, stderr };
  } finally {
    clearTimeout(timer);
  }
}

/** As runCommand; a non-zero exit throws with the command and what it printed. */
export async function mustRun(cmd: string[], timeoutMs?: number): Promise<string> {
  const result = await runCommand(cmd, timeoutMs);
  if (result.code !== 0) throw new Error(`${cmd.join(' ')} exited ${result.code}: ${(result.stderr || result.stdout).trim()}`);
  return result.stdout;
}

/** Fails, naming the install command, when one of `tools` (path -> Debian package) is missing. */
export function requireTools(tools: Record<string, string>, install = 'bash scripts/install-network-tools.sh'): void {
  const missing = Object.entries(tools).filter(([path]) => !existsSync(path));
  if (missing.length > 0) {
    throw new Error(`missing ${missing.map(([path, pkg]) => `${path} (Debian package ${pkg})`).join(', ')}: run \`${install}\` (as root)`);
  }
}

/** Network namespaces need root (CAP_SYS_ADMIN, CAP_NET_ADMIN): say so instead of failing obscurely. */
export function requireRoot(): void {
  if (process.getuid?.() !== 0) throw new Error('network namespace tests need root (they create namespaces, bridges and veth pairs)');
}

export type PipedProcess = Subprocess<'pipe', 'pipe', BunFile>;

export class NetnsLab {
  private readonly namespaces = new Map<string, string>();
  private readonly piped = new Set<PipedProcess>();

  private constructor(
    readonly dir: string,
    private readonly prefix: string,
  ) {}

  /** A lab whose namespaces are named `<label>-<pid><random>-<role>`, unique across concurrent tests. */
  static create(label: string): NetnsLab {
    requireRoot();
    const dir = mkdtempSync(join(tmpdir(), `edge-ccm-${label}-`));
    ownDir(dir);
    writeFileSync(join(dir, DIR_CLEANUP_SCRIPT), '');
    const unique = `${process.pid.toString(36)}${Math.floor(Math.random() * 36 ** 3).toString(36)}`;
    return new NetnsLab(dir, `${label}-${unique}`);
  }

  /** The namespace name of a role added with addNamespace. */
  ns(role: string): string {
    const name = this.namespaces.get(role);
    if (!name) throw new Error(`no namespace ${role} in this lab (have ${[...this.namespaces.keys()].join(', ')})`);
    return name;
  }

  /** Creates a namespace with loopback up; it is deleted with the lab. */
  async addNamespace(role: string): Promise<string> {
    const name = `${this.prefix}-${role}`;
    // Listed before it exists: a test killed right after `ip netns add` still loses it.
    appendFileSync(join(this.dir, DIR_CLEANUP_SCRIPT), `ip netns pids ${name} 2>/dev/null | xargs -r kill -9; ip netns del ${name} 2>/dev/null\n`);
    await mustRun(['ip', 'netns', 'add', name]);
    this.namespaces.set(role, name);
    await this.ip(role, 'link', 'set', 'lo', 'up');
    return name;
  }

  /** `ip -n NS ...`; throws on failure. */
  ip(role: string, ...args: string[]): Promise<string> {
    return mustRun(['ip', '-n', this.ns(role), ...args]);
  }

  /** A command run to its end inside the namespace. */
  exec(role: string, cmd: string[], timeoutMs?: number): Promise<CommandResult> {
    return runCommand(['ip', 'netns', 'exec', this.ns(role), ...cmd], timeoutMs);
  }

  async sysctl(role: string, settings: Record<string, string | number>): Promise<void> {
    await mustRun(['ip', 'netns', 'exec', this.ns(role), 'sysctl', '-qw', ...Object.entries(settings).map(([k, v]) => `${k}=${v}`)]);
  }

  /** A bridge, up, in `role`'s namespace. */
  async addBridge(role: string, name: string, ...options: string[]): Promise<void> {
    await this.ip(role, 'link', 'add', name, 'type', 'bridge', ...options);
    await this.ip(role, 'link', 'set', name, 'up');
  }

  /**
   * A veth pair made inside `from`'s namespace with its peer moved into `to`'s; both ends up,
   * `fromName` enslaved to `bridge` when given, `mac` set on the `to` end when given.
   */
  async addVeth(link: { from: string; fromName: string; to: string; toName: string; bridge?: string; mac?: string }): Promise<void> {
    await this.ip(link.from, 'link', 'add', link.fromName, 'type', 'veth', 'peer', 'name', link.toName, 'netns', this.ns(link.to));
    if (link.bridge) await this.ip(link.from, 'link', 'set', link.fromName, 'master', link.bridge);
    await this.ip(link.from, 'link', 'set', link.fromName, 'up');
    if (link.mac) await this.ip(link.to, 'link', 'set', link.toName, 'address', link.mac);
    await this.ip(link.to, 'link', 'set', link.toName, 'up');
  }

  /** A long-running process in the namespace, its output in DIR/NAME.log, killed with the lab at the latest. */
  spawnLogged(role: string, name: string, cmd: string[]): LoggedProcess {
    return LoggedProcess.spawn(name, ['ip', 'netns', 'exec', this.ns(role), ...cmd], this.dir);
  }

  /**
   * A process in the namespace talking over stdin and stdout (stderr to DIR/NAME.log). `ip netns
   * exec` execs the command, so the pid is the command's own; it is recorded for the watchdog.
   */
  spawnPiped(role: string, name: string, cmd: string[]): PipedProcess {
    const pidFile = join(this.dir, `${name}.pid`);
    const log = Bun.file(join(this.dir, `${name}.log`));
    const proc = Bun.spawn({ cmd: ['ip', 'netns', 'exec', this.ns(role), ...cmd], stdin: 'pipe', stdout: 'pipe', stderr: log });
    writeFileSync(pidFile, String(proc.pid));
    this.piped.add(proc);
    void proc.exited.then(() => {
      rmSync(pidFile, { force: true });
      this.piped.delete(proc);
    });
    return proc;
  }

  /** Kills every process the lab started (by pid) and deletes its namespaces and dir. */
  async destroy(): Promise<void> {
    for (const proc of this.piped) proc.kill('SIGKILL');
    await Promise.all([...this.piped].map((p) => p.exited));
    await runCommand(['sh', join(this.dir, DIR_CLEANUP_SCRIPT)]);
    this.namespaces.clear();
    removeOwnedDir(this.dir);
  }
}
