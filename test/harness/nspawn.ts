import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { removeCgroup, removeCgroupCommand } from './cgroups.ts';
import { eventually } from './eventually.ts';
import { DIR_CLEANUP_SCRIPT, LoggedProcess } from './processes.ts';

/**
 * systemd booted for real as PID 1 with systemd-nspawn, in a Debian root of its own (never the
 * host's root: its boot-time tmpfiles would empty the host's /tmp). The root is unpacked from a
 * cached mmdebstrap tarball (scripts/debian-root.sh) into the test's owned dir.
 *
 * Networking is the host's (nspawn without --private-network): the test's API server on loopback
 * is reachable. So nothing in the booted system may change the host's network or kernel: the units
 * that would (networkd, resolved, timesyncd, sysctl, binfmt, modules) are masked, and nspawn mounts
 * /proc/sys read-only. No machined on the host: --register=no --keep-unit, the payload in a cgroup
 * of its own under this process's, removed afterwards. stop() halts it; the owned dir's watchdog
 * kills nspawn and the container's init and removes the cgroup if the test process dies.
 */
export const NSPAWN_INSTALL_HINT = 'run scripts/install-test-deps.sh (Debian systemd-container, mmdebstrap)';

/** Units of the booted root that would touch the host (shared network, kernel) or wait on a console. */
const MASKED_UNITS = [
  'systemd-networkd.service', 'systemd-networkd.socket', 'systemd-network-generator.service',
  'systemd-networkd-wait-online.service', 'systemd-resolved.service', 'systemd-timesyncd.service',
  'systemd-sysctl.service', 'systemd-binfmt.service', 'proc-sys-fs-binfmt_misc.automount',
  'proc-sys-fs-binfmt_misc.mount', 'systemd-modules-load.service', 'systemd-firstboot.service',
  'console-getty.service', 'getty@.service', 'e2scrub_reap.service', 'fstrim.timer',
  'apt-daily.timer', 'apt-daily-upgrade.timer', 'dpkg-db-backup.timer',
];

/** The cgroup this process is in, in a hierarchy (v1 `name=systemd`, or v2 `0::`). */
function ownCgroup(controller: 'name=systemd' | ''): string | undefined {
  for (const line of readFileSync('/proc/self/cgroup', 'utf8').split('\n')) {
    const [, list, path] = line.split(':') as [string, string, string];
    if (list === controller) return path;
  }
  return undefined;
}

function childOf(parent: number, comm?: string): number | undefined {
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === parent && (!comm || name === comm)) return Number(entry);
    } catch {
      // gone meanwhile
    }
  }
  return undefined;
}

export interface RunResult { code: number; stdout: string; stderr: string }

export class BootedRoot {
  private constructor(
    readonly root: string,
    readonly machine: string,
    private readonly nspawn: LoggedProcess,
    /** The container's systemd, as this host sees it. */
    readonly initPid: number,
    private readonly cgroup: string,
    /** The cgroups the payload's was made under (this process's, per hierarchy). */
    private readonly cgroupParents: (string | undefined)[],
    private readonly dir: string,
  ) {}

  /**
   * Unpacks `tarball` into DIR/root, lets `prepare` install files into it, masks the units above and
   * boots it; resolves once systemd reports the boot finished (running or degraded).
   */
  static async boot(dir: string, tarball: string, prepare: (root: string) => void): Promise<BootedRoot> {
    for (const tool of ['systemd-nspawn', 'nsenter', 'tar']) {
      if (!Bun.which(tool)) throw new Error(`${tool} is missing: ${NSPAWN_INSTALL_HINT}`);
    }
    const root = join(dir, 'root');
    mkdirSync(root, { mode: 0o755 });
    const untar = Bun.spawnSync(['tar', '-xpf', tarball, '-C', root, '--numeric-owner']);
    if (untar.exitCode !== 0) throw new Error(`unpacking ${tarball}: ${untar.stderr.toString()}`);
    for (const unit of MASKED_UNITS) {
      const path = join(root, 'etc/systemd/system', unit);
      rmSync(path, { force: true });
      symlinkSync('/dev/null', path);
    }
    prepare(root);

    const machine = `edge-ccm-${process.pid}-${Math.floor(Math.random() * 1e6)}`;
    // The payload's cgroup: under this process's own, in the hierarchies nspawn uses.
    const cgroup = machine;
    const procsFiles: string[] = [];
    const v1 = ownCgroup('name=systemd');
    const v2 = ownCgroup('');
    const hierarchies = existsSync('/sys/fs/cgroup/cgroup.procs')
      ? [['/sys/fs/cgroup', v2]]
      : [['/sys/fs/cgroup/systemd', v1], ['/sys/fs/cgroup/unified', v2]];
    for (const [mount, own] of hierarchies) {
      if (own === undefined || !existsSync(mount as string)) continue;
      const path = join(mount as string, own, cgroup);
      mkdirSync(path, { recursive: true });
      procsFiles.push(join(path, 'cgroup.procs'));
    }
    // Whatever happens to this process: kill what runs, drop the cgroup and nspawn's own state.
    writeFileSync(join(dir, DIR_CLEANUP_SCRIPT), [
      removeCgroupCommand(cgroup, [v1, v2]),
      `rm -rf /run/systemd/nspawn/propagate/${machine} /run/systemd/nspawn/unix-export/${machine}`,
      '',
    ].join('\n'));
    const script = 'for f in $EDGE_CCM_CGROUP_PROCS; do echo $$ > "$f"; done; exec systemd-nspawn "$@"';
    const nspawn = LoggedProcess.spawn('nspawn', ['env', `EDGE_CCM_CGROUP_PROCS=${procsFiles.join(' ')}`, 'sh', '-c', script, 'nspawn',
      '--directory', root, '--boot', '--machine', machine, '--register=no', '--keep-unit', '--console=pipe', '--quiet',
    ], dir);
    let initPid: number;
    try {
      initPid = await eventually('the container\'s systemd', () => {
        if (!nspawn.running) throw new Error(`systemd-nspawn exited:\n${nspawn.logTail()}`);
        return childOf(nspawn.pid, 'systemd');
      }, 60_000);
    } catch (e) {
      await nspawn.kill();
      throw e;
    }
    writeFileSync(join(dir, 'container-init.pid'), String(initPid));
    const booted = new BootedRoot(root, machine, nspawn, initPid, cgroup, [v1, v2], dir);
    // Until its manager listens, systemctl cannot connect and prints no state: ask again.
    let state: RunResult;
    try {
      state = await eventually('systemd to answer is-system-running', async () => {
        if (!nspawn.running) throw new Error(`systemd-nspawn exited:\n${nspawn.logTail()}`);
        const r = await booted.run(['systemctl', 'is-system-running', '--wait']);
        return r.stdout.trim() ? r : undefined;
      }, 120_000);
    } catch (e) {
      await booted.stop();
      throw e;
    }
    if (!['running', 'degraded'].includes(state.stdout.trim())) {
      const failed = await booted.run(['systemctl', '--failed', '--no-pager']);
      await booted.stop();
      throw new Error(`the booted system is ${state.stdout.trim()}:\n${failed.stdout}${state.stderr}\n${nspawn.logTail()}`);
    }
    return booted;
  }

  /** Runs a command inside (its mount, PID, UTS and IPC namespaces: where systemctl reaches this systemd). */
  async run(cmd: string[]): Promise<RunResult> {
    const proc = Bun.spawn(['nsenter', '--target', String(this.initPid), '--mount', '--pid', '--uts', '--ipc', '--', ...cmd], { stdout: 'pipe', stderr: 'pipe', stdin: 'ignore' });
    const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    return { code, stdout, stderr };
  }

  /** Runs a command inside and returns its stdout; throws with its output when it fails. */
  async ok(cmd: string[]): Promise<string> {
    const r = await this.run(cmd);
    if (r.code !== 0) throw new Error(`${cmd.join(' ')} exited ${r.code}:\n${r.stderr}${r.stdout}`);
    return r.stdout;
  }

  /** systemctl show's properties of a unit. */
  async show(unit: string, properties: string[]): Promise<Record<string, string>> {
    const out = await this.ok(['systemctl', 'show', unit, ...properties.map((p) => `--property=${p}`)]);
    return Object.fromEntries(out.trim().split('\n').map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]));
  }

  /**
   * Halts the container (SIGTERM to nspawn asks its systemd to power off), SIGKILL if it has not
   * stopped within a minute, then removes the cgroup and nspawn's state; throws if any is left.
   */
  async stop(): Promise<void> {
    if (this.nspawn.running) {
      process.kill(this.nspawn.pid, 'SIGTERM');
      const halted = await Promise.race([this.nspawn.exited.then(() => true), Bun.sleep(60_000).then(() => false)]);
      if (!halted) {
        try {
          process.kill(this.initPid, 'SIGKILL'); // ends the container's PID namespace
        } catch {
          // already gone
        }
        await this.nspawn.kill();
      }
    }
    rmSync(join(this.dir, 'container-init.pid'), { force: true });
    rmSync(`/run/systemd/nspawn/propagate/${this.machine}`, { recursive: true, force: true });
    rmSync(`/run/systemd/nspawn/unix-export/${this.machine}`, { recursive: true, force: true });
    const left = removeCgroup(this.cgroup, this.cgroupParents);
    if (left.length) throw new Error(`cgroups left behind: ${left.join(' ')}`);
  }
}
