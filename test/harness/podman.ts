import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { DIR_CLEANUP_SCRIPT } from './processes.ts';
import { removeCgroup, removeCgroupCommand } from './cgroups.ts';

/**
 * podman for tests, kept apart from the machine's own: image store, run state and engine temp
 * files in the test's owned dir (vfs storage: plain directories, nothing mounted), containers under
 * a cgroup of their own. runc, not crun (crun fails on hybrid cgroup hosts), cgroupfs (no systemd
 * to ask), and explicit ulimits (the runtime's defaults exceed this machine's hard limits).
 * The dir's cleanup script removes every container and image and the cgroup if the test process
 * dies; remove() does it otherwise.
 */
export const RUNC = '/usr/sbin/runc';
export const INSTALL_HINT = 'run scripts/install-test-deps.sh (Debian podman, runc, mmdebstrap)';

export interface PodmanResult { code: number; stdout: string; stderr: string }

export class Podman {
  readonly env: Record<string, string>;
  private readonly global: string[];
  readonly cgroupParent: string;

  private constructor(readonly dir: string) {
    mkdirSync(join(dir, 'tmp'), { recursive: true });
    const conf = join(dir, 'containers.conf');
    writeFileSync(conf, `[engine]\ncgroup_manager = "cgroupfs"\nevents_logger = "file"\ntmp_dir = "${join(dir, 'tmp')}"\n`);
    this.env = { CONTAINERS_CONF: conf, TMPDIR: join(dir, 'tmp') };
    this.global = ['--root', join(dir, 'storage'), '--runroot', join(dir, 'run'), '--storage-driver', 'vfs'];
    this.cgroupParent = `edge-ccm-podman-${process.pid}-${Math.floor(Math.random() * 1e9)}`;
    const podman = ['env', ...Object.entries(this.env).map(([k, v]) => `${k}=${v}`), 'podman', ...this.global].join(' ');
    writeFileSync(join(dir, DIR_CLEANUP_SCRIPT), [
      `${podman} rm --force --all --time 0`,
      `${podman} rmi --force --all`,
      removeCgroupCommand(this.cgroupParent),
      '',
    ].join('\n'));
  }

  /** A podman in `dir` (an owned temp dir: tempDir()); fails with the install command when podman or runc is missing. */
  static in(dir: string): Podman {
    if (!Bun.which('podman') || !existsSync(RUNC)) throw new Error(`podman or ${RUNC} is missing: ${INSTALL_HINT}`);
    return new Podman(dir);
  }

  /** `podman run` flags this machine needs, the container under this podman's cgroup. */
  runFlags(): string[] {
    return ['--runtime', RUNC, `--cgroup-parent=/${this.cgroupParent}`, '--ulimit', 'nofile=20000:20000', '--ulimit', 'nproc=4096:4096'];
  }

  async run(args: string[]): Promise<PodmanResult> {
    const proc = Bun.spawn(['podman', ...this.global, ...args], { env: { ...process.env, ...this.env }, stdout: 'pipe', stderr: 'pipe', stdin: 'ignore' });
    const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    return { code, stdout, stderr };
  }

  /** Runs podman and returns its trimmed stdout; throws with its output when it fails. */
  async ok(args: string[]): Promise<string> {
    const r = await this.run(args);
    if (r.code !== 0) throw new Error(`podman ${args.join(' ')} exited ${r.code}:\n${r.stderr}${r.stdout}`);
    return r.stdout.trim();
  }

  /** Removes the given containers and images (by name or id), then the cgroup; throws if any is left. */
  async remove(containers: string[], images: string[]): Promise<void> {
    for (const c of containers) await this.run(['rm', '--force', '--time', '0', c]);
    for (const i of images) await this.run(['rmi', '--force', i]);
    const left = await this.ok(['ps', '--all', '--quiet']);
    const leftImages = await this.ok(['images', '--quiet']);
    const cgroups = removeCgroup(this.cgroupParent);
    if (left || leftImages || cgroups.length) throw new Error(`left behind: containers ${left || '-'}, images ${leftImages || '-'}, cgroups ${cgroups.join(' ') || '-'}`);
  }
}
