import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { V1Node, V1Service } from '@kubernetes/client-node';
import { NODES, ResourceClient, SERVICES } from '../../src/kube/resources.ts';
import type { BunKubeTransport } from '../../src/kube/transport.ts';
import { ApiBridge } from './api-bridge.ts';
import { CLUSTER_NODES, createClusterLab, REPLICAS } from './bgp-cluster-lab.ts';
import { kernelRoutes, ROUTER4, ROUTER6, type BgpRouter, type RouterKind } from './bgp-lab.ts';
import { CcmProcess, ccmBinaryCommand } from './ccm-process.ts';
import type { ControlPlane } from './control-plane.ts';
import { eventually } from './eventually.ts';
import { writeKubeconfig } from './kubeconfig.ts';
import { HttpProber, type ProbeResult } from './http-prober.ts';
import type { NetnsLab } from './netns.ts';
import { UNINITIALIZED } from './nodes.ts';
import type { LoggedProcess } from './processes.ts';

/**
 * The lab of issue 29's BGP failures, for test/integration/bgp-node-liveness.test.ts and
 * bench/bgp-withdrawal.ts: the cluster lab (test/harness/bgp-cluster-lab.ts) with BIRD or FRR
 * as the router, one edge-ccm replica (the compiled binary, leader: pod CIDRs, node
 * initialisation, the service's address), the three node namespaces each running `edge-ccm
 * speaker` (the compiled binary, under the chart's speaker RBAC) with
 * bgp.loadBalancers.announceFrom: nodes, a LoadBalancer service with eTP Cluster whose address
 * every node serves (a listener on its loopback), and a prober in the client namespace.
 * `announceFrom: leader` builds the design before per-node sessions: no speakers, the leader
 * announces every eligible node as next hop.
 */

export const SPEAKER_NS = 'edge-ccm-bgp-liveness';
export const SPEAKER_SA = 'edge-ccm-speaker';
const LISTENER = join(import.meta.dir, '..', 'fakes', 'node-listener-main.ts');

export interface NodeLabOptions {
  announceFrom: 'leader' | 'nodes';
  bfd: { intervalMs: number; multiplier: number };
  /** The router accepts the nodes by range (BIRD `neighbor range`, FRR `bgp listen range`) instead of listing them. */
  dynamicNeighbors?: boolean;
}

/** The ranges holding the nodes (.11-.13, ::11-::13) and not the edge-ccm replicas (.2-.4). */
export const NODE_RANGES = { v4: '198.51.100.8/29', v6: '2001:db8::10/124' };

export class NodeLab {
  readonly speakers = new Map<number, LoggedProcess>();
  address = '';
  private readonly cleanups: (() => Promise<unknown>)[] = [];
  private startSpeakerProcess?: (i: number) => void;
  ccm?: CcmProcess;

  private constructor(
    readonly lab: NetnsLab,
    readonly router: BgpRouter,
    readonly admin: BunKubeTransport,
    readonly prefix: string,
  ) {}

  /** The speaker's identity with the chart's rules (deploy/helm speaker-rbac.yaml): list and watch Services, Nodes and EndpointSlices; Events. Made once per control plane. */
  static async createSpeakerIdentity(admin: BunKubeTransport): Promise<void> {
    const post = (path: string, body: object) => admin.request({ method: 'POST', path, body }).catch((e) => {
      if (!String(e).includes('409') && !String(e).includes('AlreadyExists')) throw e;
    });
    await post('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: SPEAKER_NS } });
    await post(`/api/v1/namespaces/${SPEAKER_NS}/serviceaccounts`, { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: SPEAKER_SA } });
    await post('/apis/rbac.authorization.k8s.io/v1/clusterroles', {
      apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', metadata: { name: `${SPEAKER_NS}:speaker` },
      rules: [
        { apiGroups: [''], resources: ['services', 'nodes'], verbs: ['list', 'watch'] },
        { apiGroups: ['discovery.k8s.io'], resources: ['endpointslices'], verbs: ['list', 'watch'] },
        { apiGroups: [''], resources: ['events'], verbs: ['create', 'patch'] },
      ],
    });
    await post('/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', {
      apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRoleBinding', metadata: { name: `${SPEAKER_NS}:speaker` },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: `${SPEAKER_NS}:speaker` },
      subjects: [{ kind: 'ServiceAccount', name: SPEAKER_SA, namespace: SPEAKER_NS }],
    });
  }

  /** Builds the lab and waits until the service's address has its three next hops in the router's kernel. */
  static async start(cp: ControlPlane, admin: BunKubeTransport, kind: RouterKind, prefix: string, o: NodeLabOptions): Promise<NodeLab> {
    const { lab, router } = await createClusterLab(`bgpl-${kind}`, kind, { bfdNodes: { nodes: CLUSTER_NODES.map((n) => ({ v4: n.v4, v6: n.v6 })), ...o.bfd, ...(o.dynamicNeighbors ? { dynamic: NODE_RANGES } : {}) } }, [REPLICAS[0]]);
    const site = new NodeLab(lab, router, admin, prefix);
    site.cleanups.push(() => lab.destroy(), () => router.stop());
    try {
      await site.build(cp, o);
      return site;
    } catch (e) {
      await site.destroy();
      throw e;
    }
  }

  node(i: number): string {
    return `${this.prefix}-${CLUSTER_NODES[i]!.name}`;
  }

  nodes(): ResourceClient<V1Node> {
    return new ResourceClient<V1Node>(this.admin, NODES);
  }

  /** The next hops of the service's address in the router's kernel table. */
  async hops(): Promise<string[]> {
    return (await kernelRoutes(this.lab, 'rtr', 4)).get(`${this.address}/32`) ?? [];
  }

  startSpeaker(i: number): void {
    this.startSpeakerProcess!(i);
  }

  speakerLogs(): string {
    return [...this.speakers.entries()].map(([i, p]) => `--- speaker ${i}:\n${p.logTail(30)}`).join('\n');
  }

  /**
   * Runs `fault` and samples the router's kernel table until `hop` has left the address's
   * route: the milliseconds from the fault to the first sample without it (sampled about every
   * 15 ms; Infinity after `giveUpMs`).
   */
  async withdrawalMs(hop: string, fault: () => Promise<unknown>, giveUpMs = 15_000): Promise<number> {
    const started = performance.now();
    await fault();
    for (;;) {
      const now = await this.hops();
      const elapsed = performance.now() - started;
      if (!now.includes(hop)) return elapsed;
      if (elapsed > giveUpMs) return Infinity;
      await Bun.sleep(10); // the sampling pace (fixed on purpose: it measures, it waits for nothing)
    }
  }

  /** Node i's link down (its speaker keeps running). */
  linkDown(i: number): Promise<string> {
    return this.lab.ip(CLUSTER_NODES[i]!.name, 'link', 'set', 'eth0', 'down');
  }

  /** Node i's link up, with what Linux removed when it went down: its IPv6 address and its default routes. */
  async linkUp(i: number): Promise<void> {
    const n = CLUSTER_NODES[i]!;
    await this.lab.ip(n.name, 'link', 'set', 'eth0', 'up');
    await this.lab.ip(n.name, 'addr', 'replace', `${n.v6}/64`, 'dev', 'eth0', 'nodad');
    await this.lab.ip(n.name, 'route', 'replace', 'default', 'via', ROUTER4);
    await this.lab.ip(n.name, '-6', 'route', 'replace', 'default', 'via', ROUTER6);
  }

  /** A prober (one GET every `periodMs`, 1 s timeout each) in the client namespace while `during` runs. */
  async probing<T>(periodMs: number, during: () => Promise<T>): Promise<ProbeResult & { result: T }> {
    const client = await HttpProber.start(this.lab, 'cli', `http://${this.address}/`, periodMs);
    this.cleanups.push(async () => client.kill());
    const result = await during();
    return { result, ...(await client.stop()) };
  }

  async destroy(): Promise<void> {
    for (const c of this.cleanups.reverse()) await c().catch((e) => console.error('cleanup:', e));
    this.cleanups.length = 0;
  }

  private async build(cp: ControlPlane, o: NodeLabOptions): Promise<void> {
    const { lab } = this;
    const bridge = await ApiBridge.start(lab, cp.server);
    this.cleanups.push(() => bridge.stop());
    this.cleanups.push(() => this.deleteObjects());
    const configPath = join(lab.dir, 'cloud.yaml');
    writeFileSync(configPath, cloudConfig((i) => this.node(i), o));

    await bridge.into(lab, 'ccm1');
    const ccm = CcmProcess.binaryInNamespace(lab.ns('ccm1'), [
      '--cloud-provider=static', `--cloud-config=${configPath}`, `--kubeconfig=${cp.adminKubeconfig}`,
      '--cluster-cidr=203.0.113.64/26,2001:db8:100::/56', '--bind-address=127.0.0.1', '--secure-port=0',
      `--leader-elect-resource-name=${this.prefix}-ccm`, '--route-reconciliation-period=2s',
    ]);
    this.ccm = ccm;
    this.cleanups.push(() => ccm.stop('SIGKILL'));
    await ccm.waitForLog('successfully acquired lease', 60_000);
    for (const [i] of CLUSTER_NODES.entries()) {
      await this.nodes().create({ metadata: { name: this.node(i) }, spec: { podCIDRs: [`203.0.113.${64 + 8 * i}/29`, `2001:db8:100:${i + 1}::/64`], taints: [UNINITIALIZED] } });
    }
    for (const [i] of CLUSTER_NODES.entries()) {
      await eventually(`node ${i} initialised`, async () => (await this.nodes().get(this.node(i))).status?.addresses?.some((a) => a.type === 'InternalIP'), 60_000);
    }

    const token = await cp.serviceAccountToken(SPEAKER_NS, SPEAKER_SA);
    const kubeconfig = await writeKubeconfig(join(lab.dir, 'speaker.kubeconfig'), cp.server, cp.caPem, 'speaker', { token });
    // No --liveness-key-file: a file without announce: l2 pools runs no heartbeats and needs no key.
    this.startSpeakerProcess = (i) => {
      const name = CLUSTER_NODES[i]!.name;
      const p = lab.spawnLogged(name, `speaker-${name}-${Date.now()}`, ccmBinaryCommand(['speaker', `--node-name=${this.node(i)}`, `--cloud-config=${configPath}`, `--kubeconfig=${kubeconfig}`, '--metrics-bind-address=0', '--v=1']));
      this.speakers.set(i, p);
      this.cleanups.push(() => p.kill());
    };
    for (const [i, n] of CLUSTER_NODES.entries()) {
      await bridge.into(lab, n.name);
      if (o.announceFrom === 'nodes') this.startSpeaker(i);
    }

    const services = new ResourceClient<V1Service>(this.admin, SERVICES);
    await services.create({ metadata: { name: `${this.prefix}-web`, namespace: 'default' }, spec: { type: 'LoadBalancer', ports: [{ port: 80, protocol: 'TCP' }] } });
    this.address = await eventually('the service gets an address', async () => (await services.get(`${this.prefix}-web`, { namespace: 'default' })).status?.loadBalancer?.ingress?.[0]?.ip);
    for (const n of CLUSTER_NODES) {
      await lab.ip(n.name, 'addr', 'add', `${this.address}/32`, 'dev', 'lo');
      const p = lab.spawnLogged(n.name, `listener-${n.name}`, [process.execPath, LISTENER, n.name, '80', this.address]);
      await eventually(`listener in ${n.name}`, () => p.logTail().includes('listening') || (!p.running && Promise.reject(new Error(p.logTail()))), 30_000);
    }
    const all = CLUSTER_NODES.map((n) => n.v4);
    await eventually(`three next hops in the router's kernel`, async () => JSON.stringify(await this.hops()) === JSON.stringify(all), { timeoutMs: 60_000, explain: () => this.speakerLogs() });
  }

  private async deleteObjects(): Promise<void> {
    const services = new ResourceClient<V1Service>(this.admin, SERVICES);
    for (const s of (await services.list({ namespace: 'default' })).items.filter((s) => s.metadata?.name?.startsWith(this.prefix))) {
      await services.patch(s.metadata!.name!, 'merge', { metadata: { finalizers: null } }, { namespace: 'default' }).catch(() => {});
      await services.delete(s.metadata!.name!, { namespace: 'default' }).catch(() => {});
    }
    for (const n of (await this.nodes().list()).items.filter((n) => n.metadata?.name?.startsWith(this.prefix))) await this.nodes().delete(n.metadata!.name!).catch(() => {});
  }
}

function cloudConfig(node: (i: number) => string, o: NodeLabOptions): string {
  const machines = CLUSTER_NODES.map((n, i) => `    - id: ${node(i)}\n      addresses: [{ type: InternalIP, address: ${n.v4} }, { type: InternalIP, address: "${n.v6}" }]`).join('\n');
  const retry = 'connectRetry: { minSeconds: 0.2, maxSeconds: 2 }';
  return `inventory:
  machines:
${machines}
loadBalancer:
  pools:
    - name: public
      addresses: [203.0.113.0/28]
      allowSpecialAddresses: true
      announce: bgp
bgp:
  localASN: 4200000001
  routerID: 198.51.100.2
  gracefulRestart: { restartTimeSeconds: 10 }
${o.announceFrom === 'nodes' ? `  loadBalancers:
    announceFrom: nodes
    bfd: { transmitIntervalMilliseconds: ${o.bfd.intervalMs}, receiveIntervalMilliseconds: ${o.bfd.intervalMs}, detectMultiplier: ${o.bfd.multiplier} }
` : ''}  peers:
    - { address: ${ROUTER4}, asn: 65000, holdTimeSeconds: 9, families: [4], ${retry} }
    - { address: "${ROUTER6}", asn: 65000, holdTimeSeconds: 9, families: [6], ${retry} }
`;
}
