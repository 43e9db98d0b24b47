import { appendFileSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { eventually } from './eventually.ts';
import { DIR_CLEANUP_SCRIPT, LoggedProcess } from './processes.ts';
import { mustRun, type NetnsLab } from './netns.ts';

/**
 * One real Kubernetes node in a network namespace of a NetnsLab: containerd (runc, the bridge
 * CNI), a kubelet and kube-proxy, as Debian and the module build give them. What this machine
 * kind needs, found by trying (issue 35):
 * - The three daemons share one private mount namespace (`unshare --mount --propagation slave`,
 *   held open by a sleeping process), entered with `nsenter`, not `ip netns exec` (which remounts
 *   /sys and hides the cgroup v1 mounts). Private tmpfs on /run (pod netns files, containerd's
 *   shim sockets and runc state, the xtables lock), /var/lib (the CNI cache) and /var/log (pod
 *   logs): a node killed hard leaves nothing in the machine's own /run/netns or /var.
 * - cgroup v1 only, cgroupfs driver: the node gets a cgroup of its own (CGROUP_TOP/ROLE in
 *   every hierarchy, the kubelet's cgroupRoot); the daemons (and so containerd's shims) join
 *   ROLE/daemons, the pods go under ROLE/kubepods. Stopping kills every pid in that tree, by
 *   pid, and removes it.
 * - runc cannot lower oom_score_adj here (no CAP_SYS_RESOURCE in the VM): containerd's CRI
 *   `restrict_oom_score_adj = true`.
 * - Images come from docker-archive tars (scripts/build-pod-images.sh) imported with `ctr`;
 *   the sandbox image is the local pause.
 * The kubelet writes host-wide sysctls at its start (kernel.panic=10, kernel.panic_on_oops=1,
 * vm.overcommit_memory=1, vm.panic_on_oom=0, kernel.keys.root_max*): the README says so.
 */

export interface RealNodeSpec {
  /** The Kubernetes node name (the kubelet's --hostname-override). */
  name: string;
  /** The lab namespace role the node lives in (made and wired by the caller). */
  role: string;
  /** Its InternalIP, the kubelet's --node-ip. */
  ip: string;
}

export interface RealNodeSetup {
  binaries: { kubelet: string; 'kube-proxy': string };
  /** A kubeconfig per daemon (client certificates: system:node:NAME and system:kube-proxy). */
  kubeletKubeconfig: string;
  proxyKubeconfig: string;
  /** The cluster CA, for the kubelet's client-certificate authentication. */
  caFile: string;
  /** The docker-archive tars to import; pauseImage names the sandbox image among them. */
  imageTars: string[];
  pauseImage: string;
  /** The top cgroup (one name, in every hierarchy) the cluster's nodes live under. */
  cgroupTop: string;
  /** The pods' cluster CIDR (kube-proxy's clusterCIDR). */
  clusterCidr: string;
  /** Extra KubeletConfiguration fields (serverTLSBootstrap...). */
  kubeletConfig?: Record<string, unknown>;
}

const CGROUP_FS = '/sys/fs/cgroup';

/** The cgroup v1 hierarchies mounted here (cpu, memory, pids, ..., name=systemd), not the cgroup2 one. */
export function cgroupV1Hierarchies(): string[] {
  return readdirSync(CGROUP_FS)
    .map((d) => join(CGROUP_FS, d))
    .filter((d) => existsSync(join(d, 'tasks')));
}

/**
 * A shell command that kills, by pid, every process in the cgroup tree `path` (of every v1
 * hierarchy) until none is left, then removes the tree deepest first. Used by stop() and by the
 * lab's cleanup script, which runs however the test process ends.
 */
export function killCgroupTreeCommand(path: string): string {
  const dirs = cgroupV1Hierarchies().map((h) => join(h, path));
  return `for i in $(seq 50); do p=$(find ${dirs.join(' ')} -name cgroup.procs -exec cat {} + 2>/dev/null); [ -z "$p" ] && break; kill -9 $p 2>/dev/null; sleep 0.1; done; ` +
    `for d in ${dirs.join(' ')}; do [ -d "$d" ] && find "$d" -depth -type d -exec rmdir {} \\; 2>/dev/null; done; true`;
}

/** Makes `path` in every v1 hierarchy; a cpuset cgroup gets its parent's cpus and mems (else no process may join). */
function makeCgroup(path: string): void {
  for (const h of cgroupV1Hierarchies()) {
    let at = h;
    for (const part of path.split('/').filter(Boolean)) {
      const parent = at;
      at = join(at, part);
      if (existsSync(at)) continue;
      mkdirSync(at);
      if (h.endsWith('/cpuset')) {
        for (const f of ['cpuset.cpus', 'cpuset.mems']) writeFileSync(join(at, f), readFileSync(join(parent, f)));
      }
    }
  }
}

export class RealNode {
  private readonly daemons = new Map<string, LoggedProcess>();
  private holder?: LoggedProcess;
  readonly dir: string;
  readonly cgroup: string;

  private constructor(
    private readonly lab: NetnsLab,
    readonly spec: RealNodeSpec,
    private readonly setup: RealNodeSetup,
  ) {
    this.dir = join(lab.dir, spec.role);
    this.cgroup = `${setup.cgroupTop}/${spec.role}`;
  }

  /** containerd's socket; `ctr --address` and the kubelet use it. */
  get containerdSocket(): string {
    return join(this.dir, 'containerd.sock');
  }

  /** Starts containerd (images imported), the kubelet and kube-proxy; the Node's registration is the caller's to wait for. */
  static async start(lab: NetnsLab, spec: RealNodeSpec, setup: RealNodeSetup): Promise<RealNode> {
    const node = new RealNode(lab, spec, setup);
    await node.startAll();
    return node;
  }

  daemon(name: 'containerd' | 'kubelet' | 'kube-proxy'): LoggedProcess {
    const d = this.daemons.get(name);
    if (!d) throw new Error(`${this.spec.role}: ${name} was not started`);
    return d;
  }

  /** The last lines of each daemon's log, for a failure's message. */
  logs(lines = 30): string {
    return [...this.daemons].map(([name, d]) => `--- ${this.spec.role} ${name} (${d.logPath}):\n${d.logTail(lines)}`).join('\n');
  }

  private async startAll(): Promise<void> {
    const { role } = this.spec;
    for (const sub of ['containerd/root', 'containerd/state', 'cni/net.d', 'kubelet', 'pki']) mkdirSync(join(this.dir, sub), { recursive: true });
    // Listed before anything joins it: a test killed right now still loses the cgroup.
    appendFileSync(join(this.lab.dir, DIR_CLEANUP_SCRIPT), `${killCgroupTreeCommand(this.cgroup)}\n`);
    makeCgroup(`${this.cgroup}/daemons`);

    this.holder = LoggedProcess.spawn(`${role}-mounts`, [
      'nsenter', `--net=/run/netns/${this.lab.ns(role)}`,
      'unshare', '--mount', '--propagation', 'slave',
      'sh', '-c',
      'set -e; mount -t tmpfs -o mode=755 tmpfs /run; mkdir -p /run/netns /run/containerd; ' +
      'mount -t tmpfs -o mode=755 tmpfs /var/lib; mkdir -p /var/lib/cni; mount -t tmpfs -o mode=755 tmpfs /var/log; ' +
      'echo mounted; exec sleep infinity',
    ], this.lab.dir);
    const holder = this.holder;
    await eventually(`${role}'s mount namespace (log ${holder.logPath})`, () => holder.logTail().includes('mounted') || (!holder.running && Promise.reject(new Error(holder.logTail()))), 30_000);

    await this.startContainerd();
    await this.startKubelet();
    await this.startKubeProxy();
  }

  /** A daemon inside the node: it joins the node's daemons cgroup, then nsenter execs it in the node's mount and network namespaces (the pid is its own). */
  private spawnDaemon(name: string, cmd: string[]): LoggedProcess {
    const procs = cgroupV1Hierarchies().map((h) => join(h, this.cgroup, 'daemons', 'cgroup.procs'));
    const proc = LoggedProcess.spawn(`${this.spec.role}-${name}`, [
      'sh', '-c', `for p in ${procs.join(' ')}; do echo $$ > "$p"; done; exec "$@"`, 'sh',
      'nsenter', `--target=${this.holder!.pid}`, '--mount', '--net', '--', ...cmd,
    ], this.lab.dir);
    this.daemons.set(name, proc);
    return proc;
  }

  private async startContainerd(): Promise<void> {
    const d = this.dir;
    writeFileSync(join(d, 'cni', 'template.json'), JSON.stringify({
      cniVersion: '0.4.0',
      name: 'edge-ccm-pods',
      plugins: [
        {
          type: 'bridge', bridge: 'cni0', isGateway: true, ipMasq: false, hairpinMode: true,
          ipam: { type: 'host-local', ranges: [[{ subnet: '{{.PodCIDR}}' }]], routes: [{ dst: '0.0.0.0/0' }], dataDir: '/run/cni-ipam' },
        },
        { type: 'portmap', capabilities: { portMappings: true } },
      ],
    }, null, 2));
    const config = `version = 2
root = "${d}/containerd/root"
state = "${d}/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]
[grpc]
  address = "${this.containerdSocket}"
[ttrpc]
  address = "${d}/containerd.ttrpc.sock"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "${d}/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "${this.setup.pauseImage}"
  # The VM withholds CAP_SYS_RESOURCE: runc cannot lower the pause container's oom_score_adj.
  restrict_oom_score_adj = true
  disable_apparmor = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "${d}/cni/net.d"
    # Written by containerd once the kubelet passes on the Node's podCIDR.
    conf_template = "${d}/cni/template.json"
`;
    writeFileSync(join(d, 'containerd.toml'), config);
    const containerd = this.spawnDaemon('containerd', ['/usr/bin/containerd', '--config', join(d, 'containerd.toml')]);
    await eventually(`${this.spec.role}'s containerd answering (log ${containerd.logPath})`, async () => {
      if (!containerd.running) throw new Error(`containerd exited:\n${containerd.logTail()}`);
      if (!existsSync(this.containerdSocket)) return false;
      return (await this.ctr(['version']).then(() => true, () => false));
    }, 60_000);
    for (const tar of this.setup.imageTars) await this.ctr(['-n', 'k8s.io', 'images', 'import', tar], 120_000);
  }

  /** `ctr` against this node's containerd (from the machine's mount namespace: the socket is a file in the lab dir). */
  ctr(args: string[], timeoutMs = 30_000): Promise<string> {
    return mustRun(['ctr', '--address', this.containerdSocket, ...args], timeoutMs);
  }

  private async startKubelet(): Promise<void> {
    const d = this.dir;
    const config = {
      apiVersion: 'kubelet.config.k8s.io/v1beta1',
      kind: 'KubeletConfiguration',
      // cgroup v1 only on this machine kind.
      failCgroupV1: false,
      cgroupDriver: 'cgroupfs',
      cgroupRoot: `/${this.cgroup}`,
      cgroupsPerQOS: true,
      containerRuntimeEndpoint: `unix://${this.containerdSocket}`,
      address: this.spec.ip,
      port: 10250,
      readOnlyPort: 0,
      healthzBindAddress: '127.0.0.1',
      healthzPort: 10248,
      authentication: { anonymous: { enabled: false }, webhook: { enabled: true }, x509: { clientCAFile: this.setup.caFile } },
      authorization: { mode: 'Webhook' },
      failSwapOn: false,
      resolvConf: '',
      // cadvisor cannot size /dev/vda here: no ephemeral-storage accounting or image GC by disk use.
      localStorageCapacityIsolation: false,
      imageGCHighThresholdPercent: 100,
      evictionHard: { 'memory.available': '1Mi' },
      enforceNodeAllocatable: ['pods'],
      serializeImagePulls: false,
      ...this.setup.kubeletConfig,
    };
    writeFileSync(join(d, 'kubelet.yaml'), JSON.stringify(config, null, 2));
    this.spawnDaemon('kubelet', [
      this.setup.binaries.kubelet,
      `--config=${join(d, 'kubelet.yaml')}`,
      `--kubeconfig=${this.setup.kubeletKubeconfig}`,
      `--root-dir=${join(d, 'kubelet')}`,
      `--cert-dir=${join(d, 'pki')}`,
      `--hostname-override=${this.spec.name}`,
      `--node-ip=${this.spec.ip}`,
      '--cloud-provider=external',
      '--v=1',
    ]);
  }

  private async startKubeProxy(): Promise<void> {
    const d = this.dir;
    const config = {
      apiVersion: 'kubeproxy.config.k8s.io/v1alpha1',
      kind: 'KubeProxyConfiguration',
      mode: 'iptables',
      clientConnection: { kubeconfig: this.setup.proxyKubeconfig },
      hostnameOverride: this.spec.name,
      clusterCIDR: this.setup.clusterCidr,
      bindAddress: this.spec.ip,
      healthzBindAddress: `${this.spec.ip}:10256`,
      metricsBindAddress: '127.0.0.1:10249',
      // Leave the machine-wide conntrack table size and the timeouts alone.
      conntrack: { maxPerCore: 0, min: 0, tcpEstablishedTimeout: '0s', tcpCloseWaitTimeout: '0s' },
    };
    writeFileSync(join(d, 'kube-proxy.yaml'), JSON.stringify(config, null, 2));
    this.spawnDaemon('kube-proxy', [this.setup.binaries['kube-proxy'], `--config=${join(d, 'kube-proxy.yaml')}`, '--v=1']);
  }

  /** Kills the kubelet, kube-proxy and containerd by pid, then every process left in the node's cgroup (shims, containers), then the mount holder; removes the cgroup. */
  async stop(): Promise<void> {
    for (const name of ['kubelet', 'kube-proxy', 'containerd']) await this.daemons.get(name)?.kill();
    await mustRun(['sh', '-c', killCgroupTreeCommand(this.cgroup)], 60_000);
    await this.holder?.kill();
  }
}
