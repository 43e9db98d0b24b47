import { randomBytes } from 'node:crypto';
import { appendFileSync, existsSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { V1Node } from '@kubernetes/client-node';
import { NODES, ResourceClient } from '../../src/kube/resources.ts';
import type { KubeTransport } from '../../src/kube/transport.ts';
import { ApiBridge } from './api-bridge.ts';
import { clusterBinaries } from './binaries.ts';
import { CLUSTER_ASN, ClusterRouter, ROUTER_ASN } from './cluster-router.ts';
import { issueCertificate } from './certs.ts';
import { CcmProcess } from './ccm-process.ts';
import { startControlPlane, type ControlPlane } from './control-plane.ts';
import { eventually } from './eventually.ts';
import { transportFor } from './kubeconfig.ts';
import { mustRun, NetnsLab, requireTools, runCommand } from './netns.ts';
import { DIR_CLEANUP_SCRIPT, LoggedProcess } from './processes.ts';
import { killCgroupTreeCommand, RealNode, type RealNodeSetup } from './real-node.ts';

/**
 * A Kubernetes cluster of real nodes on one machine, for the end-to-end tests and the demo's
 * cluster scenario (issue 35): etcd, kube-apiserver, kube-controller-manager and kube-scheduler
 * on the machine's loopback (harness/control-plane.ts), edge-ccm (the compiled binary, static
 * provider, its node IPAM's CloudAllocator handing out the pod CIDRs), and N nodes (harness/real-node.ts), each in
 * its own network namespace on one switch, each with an edge-ccm speaker (answering ARP for the
 * L2 pool, and announcing the BGP pool's addresses to the router over its own session tied to
 * BFD: bgp.loadBalancers.announceFrom: nodes):
 *
 *   client 198.51.100.99 ---[sw: bridge lan 198.51.100.0/25]--- n1 198.51.100.11, n2 .12, n3 .13
 *   ctl 198.51.100.2 (edge-ccm) --'   |
 *                         rtr .1 (BIRD) --- remote 198.51.100.226 (rtr .225, 198.51.100.224/28)
 *
 * ctl is the control plane's leg in the lab: edge-ccm runs there (its BGP speaker peers with the
 * router, announcing the pod CIDRs with the nodes as next hops), and the API server reaches the
 * kubelets (logs, exec) through it: its egress selector sends them to a CONNECT proxy on a Unix
 * socket, running there. The kubelets serve with
 * certificates from the cluster CA (serverTLSBootstrap), approved by edge-ccm, checked by the API
 * server (--kubelet-certificate-authority).
 *
 * Address plan (documentation ranges only; nothing in the machine's own namespace):
 * - nodes, client, router, ctl, the L2 pool 198.51.100.100-.109: 198.51.100.0/25 on the switch;
 * - the remote client's segment 198.51.100.224/28, the BGP pool 198.51.100.240-.249 (routed);
 * - Service ClusterIPs 203.0.113.0/25 and pod CIDRs 203.0.113.128/25 (a /27 per node, from
 *   edge-ccm's node IPAM, the CloudAllocator): inside the node namespaces only (kube-proxy's
 *   rules, the CNI bridge). No node has a route to another's pod CIDR: each sends the cluster
 *   CIDR to the router, which learnt each pod CIDR from the leader's BGP session, with its node
 *   as next hop (the route controller on bare metal: no static routes, no overlay).
 * The nodes reach the API server through harness/api-bridge.ts (a forwarder on each node's
 * loopback): nothing is routed in or out of the lab.
 */

const ROOT = resolve(import.meta.dir, '../..');
const EDGE_CCM = join(ROOT, 'dist/edge-ccm');
const CONNECT_PROXY = join(ROOT, 'test/fakes/connect-proxy-main.ts');

export const SERVICE_CIDR = '203.0.113.0/25';
export const CLUSTER_CIDR = '203.0.113.128/25';
/** Where edge-ccm's CloudAllocator records each machine's pod CIDRs (docs/operations.md "node IPAM"): kube-system, named after the Lease. */
export const IPAM_RECORD = { namespace: 'kube-system', name: 'cloud-controller-manager-node-ipam' } as const;
export const NODE_CIDR_MASK = 27;
export const SWITCH_PREFIX = 25;
/** The pool announced by ARP (announce: l2), the default one. */
export const L2_POOL = ['198.51.100.100', '198.51.100.109'] as const;
/** The pool announced by BGP (announce: bgp), for services that name it (edge-ccm.io/address-pool: routed). */
export const BGP_POOL = ['198.51.100.240', '198.51.100.249'] as const;
export const BGP_POOL_NAME = 'routed';
export const CLIENT_IP = '198.51.100.99';
export const ROUTER_IP = '198.51.100.1';
/** The control plane's leg in the lab: edge-ccm, and the CONNECT proxy the API server reaches the kubelets through. */
export const CTL_IP = '198.51.100.2';
export const REMOTE_NET = '198.51.100.224/28';
export const ROUTER_REMOTE_IP = '198.51.100.225';
export const REMOTE_CLIENT_IP = '198.51.100.226';
export const HTTP_ECHO_IMAGE = 'edge-ccm.local/http-echo:1';
export const PAUSE_IMAGE = 'edge-ccm.local/pause:1';

export const CLUSTER_TOOLS = {
  '/usr/sbin/ip': 'iproute2',
  '/usr/bin/curl': 'curl',
  '/usr/bin/containerd': 'containerd',
  '/usr/bin/ctr': 'containerd',
  '/usr/sbin/runc': 'runc',
  '/usr/lib/cni/bridge': 'containernetworking-plugins',
  '/usr/sbin/iptables': 'iptables',
  '/usr/sbin/conntrack': 'conntrack',
  '/usr/bin/nsenter': 'util-linux',
  '/usr/sbin/bird': 'bird2',
  '/usr/sbin/birdc': 'bird2',
};

export interface ClusterNode {
  name: string;
  role: string;
  ip: string;
  mac: string;
  /** The edge-ccm machine id; its providerID is static://ID. */
  machineId: string;
}

export interface RealClusterOptions {
  nodes?: number;
  /** Start edge-ccm (default true): a test sees what happens without it first. */
  edgeCcm?: boolean;
  /** Told each step of the start (the demo prints them). */
  progress?: (line: string) => void;
}

/** The pod images (scripts/build-pod-images.sh), built on demand: a few seconds, cached. */
async function podImageTars(): Promise<{ pause: string; httpEcho: string }> {
  const dir = (await mustRun(['bash', join(ROOT, 'scripts/build-pod-images.sh')], 300_000)).trim().split('\n').at(-1)!;
  const tars = { pause: join(dir, 'pause.tar'), httpEcho: join(dir, 'http-echo.tar') };
  for (const t of Object.values(tars)) if (!existsSync(t)) throw new Error(`scripts/build-pod-images.sh left no ${t}`);
  return tars;
}

export class RealCluster {
  readonly nodes: ClusterNode[];
  readonly realNodes = new Map<string, RealNode>();
  readonly speakers = new Map<string, LoggedProcess>();
  readonly controlProcesses: LoggedProcess[] = [];
  private readonly nodeSetups = new Map<string, RealNodeSetup>();
  /** Each kubelet's kubeconfig (client certificate system:node:NAME), by node name. */
  readonly nodeKubeconfigs = new Map<string, string>();
  admin!: KubeTransport;
  cp!: ControlPlane;
  lab!: NetnsLab;
  ccm?: CcmProcess;
  private bridge?: ApiBridge;
  router!: ClusterRouter;
  private cgroupTop: string;
  private readonly say: (line: string) => void;

  private constructor(private readonly opts: RealClusterOptions) {
    const count = opts.nodes ?? 1;
    this.nodes = Array.from({ length: count }, (_, i) => ({
      name: `n${i + 1}`,
      role: `n${i + 1}`,
      ip: `198.51.100.${11 + i}`,
      mac: `02:00:5e:03:00:${(0x11 + i).toString(16)}`,
      machineId: `machine-${i + 1}`,
    }));
    this.cgroupTop = `edge-ccm-rc-${process.pid.toString(36)}${randomBytes(2).toString('hex')}`;
    this.say = opts.progress ?? (() => undefined);
  }

  /** Everything up; on a failure everything started so far is stopped before the error is thrown. */
  static async start(opts: RealClusterOptions = {}): Promise<RealCluster> {
    const binaries = clusterBinaries();
    requireTools(CLUSTER_TOOLS, 'bash scripts/install-cluster-tools.sh');
    if (!existsSync(EDGE_CCM)) throw new Error(`${EDGE_CCM} is missing: run \`bun run build\` first`);
    const cluster = new RealCluster(opts);
    try {
      await cluster.up(binaries);
    } catch (e) {
      await cluster.stop();
      throw e;
    }
    return cluster;
  }

  private async up(binaries: ReturnType<typeof clusterBinaries>): Promise<void> {
    const images = await podImageTars();
    this.lab = NetnsLab.create('rc');
    // The nodes' cgroups live under one top cgroup: whatever is left in it is killed and it is removed with the lab.
    appendFileSync(join(this.lab.dir, DIR_CLEANUP_SCRIPT), `${killCgroupTreeCommand(this.cgroupTop)}\n`);
    await this.wire();
    // The API server reaches the kubelets (logs, exec) through a CONNECT proxy inside the lab.
    const proxySocket = join(this.lab.dir, 'kubelet-proxy.sock');
    const egressConfig = join(this.lab.dir, 'egress-selector.yaml');
    writeFileSync(egressConfig, `apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
  - name: cluster
    connection:
      proxyProtocol: HTTPConnect
      transport:
        uds:
          udsName: ${proxySocket}
`);
    const proxy = this.lab.spawnLogged('ctl', 'kubelet-proxy', [process.execPath, CONNECT_PROXY, proxySocket]);
    this.controlProcesses.push(proxy);
    await eventually(`the kubelets' CONNECT proxy (log ${proxy.logPath})`, () => proxy.logTail().includes('listening') || (!proxy.running && Promise.reject(new Error(proxy.logTail()))), 30_000);

    this.say('control plane: etcd, kube-apiserver');
    this.cp = await startControlPlane({
      extraApiServerFlags: async ({ ca, dir }) => {
        // What the API server shows the kubelets (their webhook authorizer lets system:masters in).
        const client = await issueCertificate(ca, dir, 'apiserver-kubelet-client', { commonName: 'kube-apiserver-kubelet-client', organizations: ['system:masters'], usage: 'client' });
        return [
          `--service-cluster-ip-range=${SERVICE_CIDR}`,
          // The kubelets' serving certificates name their InternalIP: reach them by it, and check them.
          '--kubelet-preferred-address-types=InternalIP,Hostname',
          `--kubelet-certificate-authority=${ca.certPath}`,
          `--kubelet-client-certificate=${client.certPath}`,
          `--kubelet-client-key=${client.keyPath}`,
          `--egress-selector-config-file=${egressConfig}`,
        ];
      },
    });
    this.admin = transportFor(this.cp.adminKubeconfig);
    this.bridge = await ApiBridge.start(this.lab, this.cp.server);
    for (const role of ['ctl', ...this.nodes.map((n) => n.role)]) await this.bridge.into(this.lab, role);
    this.router = await ClusterRouter.start(this.lab, 'rtr', ROUTER_IP, CTL_IP, this.nodes.map((n) => n.ip));

    this.say('control plane: kube-controller-manager, kube-scheduler');
    const pki = join(this.cp.dir, 'pki');
    this.controlProcesses.push(LoggedProcess.spawn('kube-controller-manager', [
      binaries['kube-controller-manager'],
      `--kubeconfig=${this.cp.adminKubeconfig}`,
      '--leader-elect=false',
      '--secure-port=0',
      `--root-ca-file=${this.cp.caFile}`,
      `--service-account-private-key-file=${join(pki, 'service-account.key')}`,
      // Signs the kubelets' serving certificates once a CSR is approved (serverTLSBootstrap).
      `--cluster-signing-cert-file=${join(pki, 'ca.crt')}`,
      `--cluster-signing-key-file=${join(pki, 'ca.key')}`,
      `--service-cluster-ip-range=${SERVICE_CIDR}`,
      // Node IPAM is edge-ccm's here (the cloud provider's allocator, as on bare metal).
      '--controllers=*,-nodeipam',
      '--node-monitor-grace-period=20s',
      '--v=1',
    ], this.lab.dir));
    this.controlProcesses.push(LoggedProcess.spawn('kube-scheduler', [
      binaries['kube-scheduler'], `--kubeconfig=${this.cp.adminKubeconfig}`, '--leader-elect=false', '--secure-port=0', '--v=1',
    ], this.lab.dir));

    writeFileSync(this.configPath, this.cloudConfig());
    if (this.opts.edgeCcm !== false) this.startEdgeCcm();

    this.say(`nodes: ${this.nodes.map((n) => `${n.name} (${n.ip})`).join(', ')}: containerd, kubelet, kube-proxy`);
    const started = await Promise.all(this.nodes.map(async (n) => {
      const kubeletKubeconfig = await this.cp.clientCertKubeconfig(`system:node:${n.name}`, ['system:nodes']);
      this.nodeKubeconfigs.set(n.name, kubeletKubeconfig);
      const proxyKubeconfig = await this.cp.clientCertKubeconfig('system:kube-proxy');
      const setup: RealNodeSetup = {
        binaries, kubeletKubeconfig, proxyKubeconfig, caFile: this.cp.caFile,
        imageTars: [images.pause, images.httpEcho], pauseImage: PAUSE_IMAGE,
        cgroupTop: this.cgroupTop, clusterCidr: CLUSTER_CIDR,
        // Serving certificates from the cluster CA, approved by edge-ccm's node-csr-approval.
        kubeletConfig: { serverTLSBootstrap: true },
      };
      this.nodeSetups.set(n.name, setup);
      return RealNode.start(this.lab, { name: n.name, role: n.role, ip: n.ip }, setup);
    }));
    for (const r of started) this.realNodes.set(r.spec.name, r);
    const nodes = new ResourceClient<V1Node>(this.admin, NODES);
    await eventually('every kubelet registered its Node', async () => {
      const names = new Set((await nodes.list()).items.map((n) => n.metadata!.name!));
      return this.nodes.every((n) => names.has(n.name));
    }, { timeoutMs: 120_000, explain: () => this.logs() });
    await this.startSpeakers();
  }

  /** The switch, the client, each node's link, its service-CIDR route; the router namespace for BGP. */
  private async wire(): Promise<void> {
    const lab = this.lab;
    await lab.addNamespace('sw');
    await lab.addBridge('sw', 'lan');
    const hosts = [
      ...this.nodes.map((n) => ({ role: n.role, ip: n.ip, mac: n.mac })),
      { role: 'client', ip: CLIENT_IP, mac: '02:00:5e:03:00:99' },
      { role: 'ctl', ip: CTL_IP, mac: '02:00:5e:03:00:02' },
      { role: 'rtr', ip: ROUTER_IP, mac: '02:00:5e:03:00:01' },
    ];
    for (const h of hosts) {
      await lab.addNamespace(h.role);
      await lab.addVeth({ from: 'sw', fromName: `${h.role}-lan`, to: h.role, toName: 'eth0', bridge: 'lan', mac: h.mac });
      await lab.ip(h.role, 'addr', 'add', `${h.ip}/${SWITCH_PREFIX}`, 'dev', 'eth0');
    }
    // The router's other leg: the remote client's segment, reached only through it.
    await lab.addNamespace('remote');
    await lab.addVeth({ from: 'rtr', fromName: 'eth1', to: 'remote', toName: 'eth0' });
    await lab.ip('rtr', 'addr', 'add', `${ROUTER_REMOTE_IP}/28`, 'dev', 'eth1');
    await lab.ip('remote', 'addr', 'add', `${REMOTE_CLIENT_IP}/28`, 'dev', 'eth0');
    await lab.ip('remote', 'route', 'add', 'default', 'via', ROUTER_REMOTE_IP);
    // Each new connection hashed on its ports too (L4), so that a client's requests spread over the next hops.
    // No ICMP redirects: the router forwards pod-to-pod traffic back onto the switch it came from,
    // and a redirect would teach the sender a direct route to the other node (the path under test is through the router).
    await lab.sysctl('rtr', { 'net.ipv4.ip_forward': 1, 'net.ipv4.fib_multipath_hash_policy': 1, 'net.ipv4.conf.all.send_redirects': 0, 'net.ipv4.conf.eth0.send_redirects': 0 });
    for (const n of this.nodes) {
      await lab.sysctl(n.role, { 'net.ipv4.ip_forward': 1 });
      // A node's own connections to a ClusterIP need a route before kube-proxy's DNAT applies.
      await lab.ip(n.role, 'route', 'add', SERVICE_CIDR, 'dev', 'eth0');
      // Answers to the remote client go back through the router.
      await lab.ip(n.role, 'route', 'add', REMOTE_NET, 'via', ROUTER_IP);
      // The other nodes' pods too (the node's own /27 is on its CNI bridge, a longer prefix): the
      // router knows each pod CIDR's node from BGP; the node knows none of them.
      await lab.ip(n.role, 'route', 'add', CLUSTER_CIDR, 'via', ROUTER_IP);
    }
  }

  /** The static provider's file, read by edge-ccm and the speakers (reloaded on change). */
  get configPath(): string {
    return join(this.lab.dir, 'cloud-config.yaml');
  }

  /** The static provider's file: the nodes' machines (but the `absent` ones), the two pools, the router. */
  cloudConfig(absent: readonly string[] = []): string {
    const machines = this.nodes.filter((n) => !absent.includes(n.name)).map((n) => `    - id: ${n.machineId}
      nodeName: ${n.name}
      addresses:
        - { type: InternalIP, address: ${n.ip} }`).join('\n');
    return `# written by test/harness/real-cluster.ts
inventory:
  # The file lists every machine: a Node whose machine is not in it is deleted (after the grace period).
  authoritative: true
  defaults:
    region: one-machine
    instanceType: netns
  sites:
    lab:
      zone: lab-1
  machines:
${machines.replaceAll('      nodeName', '      site: lab\n      nodeName')}
loadBalancer:
  pools:
    - name: lan
      addresses: [${L2_POOL[0]}-${L2_POOL[1]}]
      announce: l2
    - name: ${BGP_POOL_NAME}
      addresses: [${BGP_POOL[0]}-${BGP_POOL[1]}]
      announce: bgp
      autoAssign: false
bgp:
  localASN: ${CLUSTER_ASN}
  routerID: ${CTL_IP}
  peers:
    - address: ${ROUTER_IP}
      asn: ${ROUTER_ASN}
      families: [4]
      connectRetry: { minSeconds: 1, maxSeconds: 2 }
  # Each node's speaker announces the BGP pool's addresses over its own session, tied to BFD
  # (3 x 200 ms by default): a dead node's next hop leaves the router within a second. The
  # leader (edge-ccm) keeps announcing the pod CIDRs.
  loadBalancers:
    announceFrom: nodes
`;
  }

  /**
   * edge-ccm, the compiled binary as users run it, in the ctl namespace (its BGP speaker peers
   * with the router from there): static provider, node IPAM, routes (the pod CIDRs over BGP),
   * kubelet serving-certificate approval.
   */
  startEdgeCcm(): CcmProcess {
    this.say('edge-ccm: static provider, node IPAM (CloudAllocator), BGP to the router, kubelet serving-certificate approval');
    this.ccm = CcmProcess.binaryInNamespace(this.lab.ns('ctl'), [
      '--cloud-provider=static', `--cloud-config=${this.configPath}`, `--kubeconfig=${this.cp.adminKubeconfig}`,
      '--secure-port=0', '--leader-elect=false',
      // A Node whose machine left the inventory goes after 5 s, not 5 min (the tests wait for it).
      '--node-deletion-grace-period=5s',
      '--controllers=*,node-ipam-controller,node-csr-approval', '--allocate-node-cidrs', `--cluster-cidr=${CLUSTER_CIDR}`, `--node-cidr-mask-size=${NODE_CIDR_MASK}`,
      // The machine's CIDRs, recorded in the ConfigMap IPAM_RECORD (they outlive its Node objects).
      '--cidr-allocator-type=CloudAllocator',
    ]);
    return this.ccm;
  }

  private async startSpeakers(): Promise<void> {
    writeFileSync(this.livenessKeyPath, randomBytes(32).toString('hex'), { mode: 0o600 });
    for (const n of this.nodes) this.startSpeaker(n);
  }

  private get livenessKeyPath(): string {
    return join(this.lab.dir, 'liveness.key');
  }

  private startSpeaker(n: ClusterNode): void {
    this.speakers.set(n.name, this.lab.spawnLogged(n.role, `speaker-${n.role}-${Date.now()}`, [
      EDGE_CCM, 'speaker', `--node-name=${n.name}`, `--cloud-config=${this.configPath}`,
      `--kubeconfig=${this.cp.adminKubeconfig}`, `--liveness-key-file=${this.livenessKeyPath}`,
    ]));
  }

  /** Waits until every Node has its pod CIDR; they are, by node name. Nothing is routed here: the router learns them by BGP. */
  async podCidrs(): Promise<Map<string, string>> {
    const nodes = new ResourceClient<V1Node>(this.admin, NODES);
    return eventually('every Node given a pod CIDR', async () => {
      const list = (await nodes.list()).items;
      const byName = new Map(list.map((n) => [n.metadata!.name!, n.spec?.podCIDR]));
      return this.nodes.every((n) => byName.get(n.name)) ? (byName as Map<string, string>) : undefined;
    }, { timeoutMs: 60_000, explain: () => this.ccm?.logs().slice(-3000) ?? '' });
  }

  /**
   * A machine dies: its kubelet, kube-proxy, containerd, pods and speaker killed (by pid), its
   * link to the switch down. The Node object stays until someone deletes it.
   */
  async killNode(name: string): Promise<void> {
    const n = this.node(name);
    await this.lab.ip('sw', 'link', 'set', `${n.role}-lan`, 'down');
    await this.speakers.get(name)?.kill();
    await this.realNodes.get(name)?.stop();
    this.realNodes.delete(name);
  }

  /** The machine comes back: link up, containerd, kubelet, kube-proxy and its speaker started again. */
  async restartNode(name: string): Promise<void> {
    const n = this.node(name);
    await this.lab.ip('sw', 'link', 'set', `${n.role}-lan`, 'up');
    this.realNodes.set(name, await RealNode.start(this.lab, { name: n.name, role: n.role, ip: n.ip }, this.nodeSetups.get(name)!));
    this.startSpeaker(n);
  }

  private node(name: string): ClusterNode {
    const n = this.nodes.find((x) => x.name === name);
    if (!n) throw new Error(`no node ${name} in this cluster (have ${this.nodes.map((x) => x.name).join(', ')})`);
    return n;
  }

  /** Rewrites the provider's file without the machines of the `absent` nodes (edge-ccm reloads it). */
  setInventory(absent: readonly string[]): void {
    writeFileSync(this.configPath, this.cloudConfig(absent));
  }

  /** `kubectl` as admin, run to its end; its output. */
  kubectl(args: string[], timeoutMs = 60_000): Promise<string> {
    return mustRun([clusterBinaries().kubectl, `--kubeconfig=${this.cp.adminKubeconfig}`, ...args], timeoutMs);
  }

  /** One HTTP request from the client on the switch (or the remote one behind the router): the answer's body, or undefined on failure. */
  async fetchFromClient(address: string, port: number, from: 'client' | 'remote' = 'client', timeoutSeconds = 2): Promise<string | undefined> {
    const r = await runCommand(['ip', 'netns', 'exec', this.lab.ns(from), 'curl', '-s', '--max-time', String(timeoutSeconds), `http://${address}:${port}/`]);
    return r.code === 0 ? r.stdout.trim() : undefined;
  }

  /** The last lines of every process's log, for a failure's message. */
  logs(lines = 25): string {
    const parts = [...this.realNodes.values()].map((n) => n.logs(lines));
    for (const p of this.controlProcesses) parts.push(`--- ${p.name} (${p.logPath}):\n${p.logTail(lines)}`);
    for (const [name, s] of this.speakers) parts.push(`--- speaker ${name}:\n${s.logTail(lines)}`);
    if (this.ccm) parts.push(`--- edge-ccm:\n${this.ccm.logs().split('\n').slice(-lines).join('\n')}`);
    return parts.join('\n');
  }

  /** Stops everything, each process by its pid; removes namespaces, cgroups, mounts (with their namespaces) and dirs. */
  async stop(): Promise<void> {
    for (const s of this.speakers.values()) await s.kill();
    await this.router?.proc.kill();
    await this.ccm?.stop('SIGKILL');
    await Promise.all([...this.realNodes.values()].map((n) => n.stop()));
    for (const p of this.controlProcesses) await p.kill();
    await this.bridge?.stop();
    await this.lab?.destroy();
    await this.cp?.stop();
  }
}
