import { chmodSync, existsSync, statSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { eventually } from './eventually.ts';

/**
 * A real LXD daemon (Debian's lxd 5.0) for tests, kept off the machine: it runs under
 * `unshare --net --mount` (its own network namespace, so its bridge, veths, nftables and
 * sysctls never touch the host's; /sys remounted for that namespace, the cgroup mounts carried
 * over), with LXD_DIR in a temporary directory (never /var/lib/lxd), no image server (a
 * busybox-static image built here, about 1 MB), a `dir` pool, and an unmanaged bridge inside
 * the namespace with 198.51.100.1/24; each container gets 198.51.100.N statically (LXC sets it
 * before init runs: no DHCP server). Containers are unprivileged. Its unix socket is reached
 * from the host (the filesystem is shared); its HTTPS endpoint, 198.51.100.1:8443 inside the
 * namespace, through `httpsForward()`. `stop()` ends the daemon (by pid) and removes what it
 * left: the directory, its cgroups (lxc.pivot and the containers' in every hierarchy).
 */

const INSTALL = 'apt-get install -y lxd lxd-client busybox-static (or bash scripts/install-test-deps.sh)';
export const LXD_BRIDGE_ADDRESS = '198.51.100.1';

function need(tool: string, path: string): void {
  if (!existsSync(path)) throw new Error(`${tool} is missing (${path}): ${INSTALL}`);
}

export class LxdDaemon {
  readonly socket: string;
  /** The containers this daemon launched: their cgroups are the only ones stop() removes. */
  private readonly launched = new Set<string>();
  private constructor(readonly dir: string, readonly lxdDir: string, private readonly proc: ReturnType<typeof Bun.spawn>) {
    this.socket = join(lxdDir, 'unix.socket');
  }

  get pid(): number {
    return this.proc.pid;
  }

  static async start(dir: string): Promise<LxdDaemon> {
    need('lxd', '/usr/bin/lxd');
    need('lxc', '/usr/bin/lxc');
    need('busybox-static', '/bin/busybox');
    const lxdDir = join(dir, 'lxd');
    // Unprivileged containers' root (uid 100000+) walks this path to reach their rootfs: the
    // test's temporary directories (0700) get search permission.
    mkdirSync(dir, { recursive: true });
    for (let d = dir; d !== dirname(d); d = dirname(d)) {
      const mode = statSync(d).mode & 0o7777;
      if (!(mode & 0o001)) chmodSync(d, mode | 0o011);
    }
    mkdirSync(lxdDir, { recursive: true, mode: 0o711 });
    // /sys is remounted for the new network namespace (LXD reads its interfaces there); the
    // cgroup hierarchies under it are moved over first.
    const inner = [
      'set -e',
      `mkdir -p ${dir}/cg`,
      `mount --rbind /sys/fs/cgroup ${dir}/cg`,
      'mount -t sysfs sysfs /sys',
      `mount --move ${dir}/cg /sys/fs/cgroup`,
      'ip link set lo up',
      'ip link add br-it type bridge',
      `ip addr add ${LXD_BRIDGE_ADDRESS}/24 dev br-it`,
      'ip link set br-it up',
      `exec lxd --group root --logfile ${dir}/lxd.log`,
    ].join('\n');
    const proc = Bun.spawn(['unshare', '--net', '--mount', '--propagation', 'private', '--fork', '--kill-child', 'sh', '-c', inner], {
      env: { ...process.env, LXD_DIR: lxdDir },
      stdout: Bun.file(join(dir, 'daemon.out')),
      stderr: Bun.file(join(dir, 'daemon.err')),
    });
    const daemon = new LxdDaemon(dir, lxdDir, proc);
    try {
      await eventually('the LXD daemon answers', async () => (await daemon.lxc(['query', '/1.0'], false)).ok, 20_000);
      await daemon.command(['lxd', 'init', '--preseed'], true, preseed());
      await daemon.importImage();
    } catch (e) {
      const log = daemon.log();
      await daemon.stop();
      throw new Error(`${(e as Error).message}\n${log}`);
    }
    return daemon;
  }

  /** The daemon's own log and its stderr, for failures. */
  log(): string {
    const read = (f: string) => (existsSync(join(this.dir, f)) ? readFileSync(join(this.dir, f), 'utf8') : '');
    return `--- lxd.log\n${read('lxd.log').slice(-3000)}\n--- stderr\n${read('daemon.err').slice(-2000)}`;
  }

  /** `lxc ARGS` against this daemon; throws with its output when `check` and it fails. */
  lxc(args: string[], check = true, stdin?: string): Promise<{ ok: boolean; out: string }> {
    return this.command(['lxc', ...args], check, stdin);
  }

  private async command(args: string[], check = true, stdin?: string): Promise<{ ok: boolean; out: string }> {
    const env = { ...process.env, LXD_DIR: this.lxdDir, LXD_CONF: join(this.dir, 'lxc-conf') };
    const p = Bun.spawn(args, { env, stdin: stdin === undefined ? 'ignore' : new Blob([stdin]), stdout: 'pipe', stderr: 'pipe' });
    const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
    if (check && code !== 0) throw new Error(`${args.join(' ')}: exit ${code}: ${err.trim() || out.trim()}`);
    return { ok: code === 0, out: out + err };
  }

  /** A busybox-static root file system and its metadata.yaml, imported as image `bb`. */
  private async importImage(): Promise<void> {
    const img = join(this.dir, 'image');
    const root = join(img, 'rootfs');
    for (const d of ['bin', 'sbin', 'etc/init.d', 'proc', 'sys', 'dev', 'tmp', 'run', 'root']) mkdirSync(join(root, d), { recursive: true });
    writeFileSync(join(root, 'bin/busybox'), readFileSync('/bin/busybox'), { mode: 0o755 });
    const links = ['sh', 'ip', 'sleep', 'hostname', 'mount', 'cat'];
    await run(['sh', '-c', [...links.map((l) => `ln -s busybox ${root}/bin/${l}`), `ln -s ../bin/busybox ${root}/sbin/init`].join(' && ')]);
    writeFileSync(join(root, 'etc/inittab'), '::sysinit:/etc/init.d/rcS\n::restart:/sbin/init\n');
    // Addresses come from LXC (raw.lxc); rcS only brings lo up. An IPv6 link-local address appears by itself.
    writeFileSync(join(root, 'etc/init.d/rcS'), '#!/bin/sh\nip link set lo up\n', { mode: 0o755 });
    writeFileSync(join(img, 'metadata.yaml'), `architecture: ${process.arch === 'arm64' ? 'aarch64' : 'x86_64'}\ncreation_date: ${Math.floor(Date.now() / 1000)}\nproperties:\n  description: busybox for edge-ccm tests\n  os: busybox\n`);
    await run(['tar', '-C', img, '-czf', join(img, 'meta.tar.gz'), 'metadata.yaml']);
    await run(['tar', '-C', root, '--numeric-owner', '-czf', join(img, 'rootfs.tar.gz'), '.']);
    await this.lxc(['image', 'import', join(img, 'meta.tar.gz'), join(img, 'rootfs.tar.gz'), '--alias', 'bb']);
  }

  /** An unprivileged container with 198.51.100.`host` on eth0 (and `config`), started. */
  async launch(name: string, host: number, config: Record<string, string> = {}): Promise<void> {
    const sets = Object.entries({ 'raw.lxc': `lxc.net.0.ipv4.address = 198.51.100.${host}/24`, ...config }).flatMap(([k, v]) => ['-c', `${k}=${v}`]);
    this.launched.add(name);
    await this.lxc(['launch', 'bb', name, ...sets]);
  }

  /** Ends the daemon and its containers (by pid: the namespace's first process) and removes what it left. */
  async stop(): Promise<void> {
    if (this.proc.exitCode === null) {
      // lxd shutdown stops the containers; the kill covers a daemon that does not answer.
      await this.lxc(['query', '-X', 'PUT', '/internal/shutdown'], false).catch(() => undefined);
      const exited = await Promise.race([this.proc.exited.then(() => true), Bun.sleep(15_000).then(() => false)]);
      if (!exited) this.proc.kill('SIGKILL');
      await this.proc.exited;
    }
    await Bun.sleep(200);
    // Containers' processes die with the namespace's first process (--kill-child); cgroups stay.
    // Only this daemon's containers' cgroups (another test's LXD may run beside), and lxc.pivot if empty.
    const own = [...this.launched].flatMap((n) => [`"$h"lxc.payload.${n}`, `"$h"lxc.monitor.${n}`]).join(' ');
    await run(['sh', '-c', `for h in /sys/fs/cgroup/*/; do for d in "$h"lxc.pivot ${own}; do [ -d "$d" ] && find "$d" -depth -type d -exec rmdir {} + 2>/dev/null; done; done; true`]);
    await run(['umount', '-R', join(this.lxdDir, 'shmounts')]).catch(() => undefined);
    await run(['umount', '-R', join(this.lxdDir, 'devlxd')]).catch(() => undefined);
    rmSync(this.dir, { recursive: true, force: true });
  }
}

function preseed(): string {
  return [
    'config:',
    `  core.https_address: ${LXD_BRIDGE_ADDRESS}:8443`,
    'storage_pools:',
    '- name: default',
    '  driver: dir',
    'profiles:',
    '- name: default',
    '  devices:',
    '    root: {path: /, pool: default, type: disk}',
    '    eth0: {name: eth0, type: nic, nictype: bridged, parent: br-it}',
    '',
  ].join('\n');
}

async function run(cmd: string[]): Promise<void> {
  const p = Bun.spawn(cmd, { stdout: 'pipe', stderr: 'pipe' });
  const [err, code] = await Promise.all([new Response(p.stderr).text(), p.exited]);
  if (code !== 0) throw new Error(`${cmd.join(' ')}: exit ${code}: ${err.trim()}`);
}
