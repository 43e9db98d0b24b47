import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { V1EndpointSlice, V1Node, V1Service } from '@kubernetes/client-node';
import { ENDPOINT_SLICES } from '../src/kube/endpoint-slices.ts';
import { NODES as NODE_RESOURCE, ResourceClient, SERVICES } from '../src/kube/resources.ts';
import type { KubeTransport } from '../src/kube/transport.ts';
import { forEachLimited } from '../src/util/parallel.ts';
import { ApiBridge } from '../test/harness/api-bridge.ts';
import { ROUTER4, ROUTER_TOOLS } from '../test/harness/bgp-lab.ts';
import { startControlPlane, type ControlPlane } from '../test/harness/control-plane.ts';
import { eventually } from '../test/harness/eventually.ts';
import { transportFor } from '../test/harness/kubeconfig.ts';
import { L2Lab, NODES, type NodeName } from '../test/harness/l2-lab.ts';
import { requireTools } from '../test/harness/netns.ts';
import { applyManifests } from '../test/harness/manifests.ts';
import { setReady } from '../test/harness/nodes.ts';

/**
 * The lab of bench/node-footprint.ts: harness/l2-lab.ts's switch (nodes n1-n3 at
 * 198.51.100.11-13, a client at .99, the router namespace "rtr"), one real kube-apiserver on the
 * machine's loopback reached from every node namespace through harness/api-bridge.ts (so one
 * kubeconfig serves every side on every node), and a BIRD per BGP side with a session per node:
 * edge-ccm's at 198.51.100.1 (AS 65000, BFD on), MetalLB's at 198.51.100.2 in namespace rtr2
 * (AS 64513; MetalLB's native mode has no BFD). Every service
 * has an address from SERVICE_RANGE in its status (what edge-ccm's and MetalLB's speakers read)
 * and in kube-vip's annotation (what kube-vip reads), and a ready endpoint on each node.
 */

/** The services' addresses: 100 of them, so from 100 services on several services share one. */
export const SERVICE_RANGE = { first: '198.51.100.100', last: '198.51.100.199' };
export const serviceAddress = (i: number) => `198.51.100.${100 + (i % 100)}`;
export const SERVICE_NS = 'footprint';
export const METALLB_NS = 'metallb-system';
/** MetalLB's side of the router, and the ASNs of its sessions. */
export const METALLB_ROUTER4 = '198.51.100.2';
export const METALLB_ASN = 64512;
export const METALLB_ROUTER_ASN = 64513;
export const EDGE_ASN = 4200000001;
export const EDGE_ROUTER_ASN = 65000;
const BFD_MS = 200;
/** BFD packets missed before a session is declared down (edge-ccm's default 3: 600 ms, which a load of 15-20 on 2 cores reaches). */
export const BFD_MULTIPLIER = 10;

export class NodeFootprintLab {
  private readonly cleanups: (() => Promise<unknown>)[] = [];
  private created = 0;
  readonly services: ResourceClient<V1Service>;
  private readonly slices: ResourceClient<V1EndpointSlice>;

  private constructor(readonly site: L2Lab, readonly cp: ControlPlane, readonly admin: KubeTransport) {
    this.services = new ResourceClient<V1Service>(admin, SERVICES);
    this.slices = new ResourceClient<V1EndpointSlice>(admin, ENDPOINT_SLICES);
  }

  get dir(): string {
    return this.site.lab.dir;
  }

  get kubeconfig(): string {
    return this.cp.adminKubeconfig;
  }

  static async build(metallbCrds: string): Promise<NodeFootprintLab> {
    requireTools(ROUTER_TOOLS.bird);
    const site = await L2Lab.build({ router: true });
    let cp: ControlPlane | undefined;
    try {
      cp = await startControlPlane();
      const lab = new NodeFootprintLab(site, cp, transportFor(cp.adminKubeconfig));
      lab.cleanups.push(() => site.destroy(), () => cp!.stop());
      try {
        await lab.setUp(metallbCrds);
      } catch (e) {
        await lab.destroy();
        throw e;
      }
      return lab;
    } catch (e) {
      if (!cp) await site.destroy();
      throw e;
    }
  }

  private async setUp(metallbCrds: string): Promise<void> {
    const { lab } = this.site;
    const bridge = await ApiBridge.start(lab, this.cp.server);
    this.cleanups.push(() => bridge.stop());
    for (const n of NODES) await bridge.into(lab, n);
    for (const ns of [SERVICE_NS, METALLB_NS]) await this.admin.request({ method: 'POST', path: '/api/v1/namespaces', body: { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } } });
    const nodes = new ResourceClient<V1Node>(this.admin, NODE_RESOURCE);
    for (const n of NODES) {
      await nodes.create({ apiVersion: 'v1', kind: 'Node', metadata: { name: n, labels: { 'kubernetes.io/hostname': n } } });
      await setReady(nodes, n, 'True');
      await nodes.patch(n, 'merge', { status: { addresses: [{ type: 'InternalIP', address: this.site.nodes[n].lanIPv4 }, { type: 'Hostname', address: n }] } }, { subresource: 'status' });
    }
    for (const f of readdirSync(metallbCrds).filter((f) => f.endsWith('.yaml'))) await applyManifests(this.admin, servableCrd(readFileSync(join(metallbCrds, f), 'utf8')));
    // MetalLB's speakers read their own pods, and join memberlist at the pods' addresses (host network: the node's).
    await applyManifests(this.admin, [
      `apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: default, namespace: ${METALLB_NS}}`,
      ...NODES.map((n) => `apiVersion: v1\nkind: Pod\nmetadata: {name: speaker-${n}, namespace: ${METALLB_NS}, labels: {app: metallb, component: speaker}}\nspec: {nodeName: ${n}, hostNetwork: true, automountServiceAccountToken: false, containers: [{name: speaker, image: speaker}]}`),
    ].join('\n---\n'));
    for (const n of NODES) {
      const ip = this.site.nodes[n].lanIPv4;
      await this.admin.request({
        method: 'PATCH', path: `/api/v1/namespaces/${METALLB_NS}/pods/speaker-${n}/status`, contentType: 'application/merge-patch+json',
        body: { status: { phase: 'Running', hostIP: ip, podIP: ip, podIPs: [{ ip }], conditions: [{ type: 'Ready', status: 'True' }] } },
      });
    }
    // The CRDs are served a moment after they are created.
    await eventually('MetalLB CRDs served', () => applyManifests(this.admin, `apiVersion: metallb.io/v1beta1\nkind: IPAddressPool\nmetadata: {name: lan, namespace: ${METALLB_NS}}\nspec: {addresses: [${SERVICE_RANGE.first}-${SERVICE_RANGE.last}]}`).then(() => true, () => false), 60_000, 500);
    await this.startRouters();
  }

  /**
   * Two BIRDs, one per BGP side (one BIRD leaves a second session to the same neighbor from
   * another local address Idle): in rtr (ROUTER4) edge-ccm's sessions as docs/networking/bgp.md
   * configures them (BFD on, hold time 9, short error waits) but for BFD's multiplier
   * (BFD_MULTIPLIER, here and in edge-ccm's file: the same packets, a detection time a loaded
   * machine's scheduling does not reach); in rtr2 (METALLB_ROUTER4) MetalLB's, at both sides'
   * defaults. Passive: the nodes connect. Routes stay in BIRD's table (no kernel export).
   */
  private async startRouters(): Promise<void> {
    const { lab } = this.site;
    await lab.addNamespace('rtr2');
    await lab.addVeth({ from: 'sw', fromName: 'rtr2-lan', to: 'rtr2', toName: 'eth0', bridge: 'lan' });
    await lab.ip('rtr2', 'addr', 'add', `${METALLB_ROUTER4}/24`, 'dev', 'eth0');
    const session = (name: string, localAsn: number, neighbor: string, asn: number, extra: string) =>
      `protocol bgp ${name} {\n  local as ${localAsn};\n  neighbor ${neighbor} as ${asn};\n  passive on;\n  graceful restart off;\n  error wait time 1, 30;\n  error forget time 5;\n  ${extra}\n  ipv4 { import all; export none; };\n}`;
    await this.startBird('rtr', ROUTER4, [
      `protocol bfd { interface "*" { interval ${BFD_MS} ms; multiplier ${BFD_MULTIPLIER}; }; }`,
      ...NODES.map((n) => session(`edge_${n}`, EDGE_ROUTER_ASN, this.site.nodes[n].lanIPv4, EDGE_ASN, 'bfd on;\n  hold time 9;')),
    ]);
    await this.startBird('rtr2', METALLB_ROUTER4, NODES.map((n) => session(`metallb_${n}`, METALLB_ROUTER_ASN, this.site.nodes[n].lanIPv4, METALLB_ASN, '')));
  }

  private async startBird(role: 'rtr' | 'rtr2', routerId: string, protocols: string[]): Promise<void> {
    const { lab } = this.site;
    const conf = join(lab.dir, `bird-${role}.conf`);
    writeFileSync(conf, ['log stderr { warning, error, fatal };', `router id ${routerId};`, 'protocol device { scan time 10; }', ...protocols, ''].join('\n'));
    const bird = lab.spawnLogged(role, `bird-${role}`, ['/usr/sbin/bird', '-f', '-c', conf, '-s', join(lab.dir, `bird-${role}.ctl`), '-P', join(lab.dir, `bird-${role}.pidfile`)]);
    this.cleanups.push(() => bird.kill());
    await eventually(`BIRD in ${role} up (log ${bird.logPath})`, async () => (await this.birdc(role, 'show', 'status')).code === 0 || (!bird.running && Promise.reject(new Error(bird.logTail()))), 30_000);
  }

  birdc(role: 'rtr' | 'rtr2', ...command: string[]) {
    return this.site.lab.exec(role, ['/usr/sbin/birdc', '-s', join(this.site.lab.dir, `bird-${role}.ctl`), ...command]);
  }

  /** Routes BIRD holds from the session `protocol` (edge_n1 in rtr, metallb_n2 in rtr2...). */
  async routesFrom(protocol: string): Promise<number> {
    const r = await this.birdc(protocol.startsWith('metallb') ? 'rtr2' : 'rtr', 'show', 'route', 'protocol', protocol, 'count');
    const m = /(\d+) of \d+ routes/.exec(r.stdout);
    return m ? Number(m[1]) : 0;
  }

  /** The MACs answering one ARP request for `address` from the client. */
  arpAnswers(address: string): Promise<string[]> {
    return this.site.arpAnswers(address);
  }

  nodeOfMac(mac: string): NodeName | undefined {
    return NODES.find((n) => this.site.nodes[n].lanMac === mac);
  }

  get serviceCount(): number {
    return this.created;
  }

  /** Distinct addresses of the services made so far. */
  get addressCount(): number {
    return Math.min(this.created, 100);
  }

  /** Creates services up to `upTo`: the Service (kube-vip's annotation), its status, its slice (a ready endpoint per node). */
  async addServices(upTo: number): Promise<void> {
    await forEachLimited(Array.from({ length: upTo - this.created }, (_, k) => this.created + k), 8, async (i) => {
      const ip = serviceAddress(i);
      const svc = await this.services.create({
        apiVersion: 'v1', kind: 'Service',
        metadata: { name: `svc-${i}`, namespace: SERVICE_NS, annotations: { 'kube-vip.io/loadbalancerIPs': ip } },
        spec: { type: 'LoadBalancer', selector: { app: `a${i}` }, ports: [{ port: 80, protocol: 'TCP' }] },
      }, { namespace: SERVICE_NS });
      await this.services.patch(svc.metadata!.name!, 'merge', { status: { loadBalancer: { ingress: [{ ip, ipMode: 'VIP' }] } } }, { namespace: SERVICE_NS, subresource: 'status' });
      await this.slices.create({
        apiVersion: 'discovery.k8s.io/v1', kind: 'EndpointSlice',
        metadata: { name: `svc-${i}-1`, namespace: SERVICE_NS, labels: { 'kubernetes.io/service-name': `svc-${i}` } },
        addressType: 'IPv4',
        endpoints: NODES.map((n, k) => ({ addresses: [`10.244.${k}.${(i % 250) + 1}`], nodeName: n, conditions: { ready: true } })),
        ports: [{ port: 80, protocol: 'TCP' }],
      }, { namespace: SERVICE_NS });
    });
    this.created = upTo;
  }

  /** Deletes every service and slice (between phases: the next side starts from none). */
  async deleteServices(): Promise<void> {
    await forEachLimited(Array.from({ length: this.created }, (_, i) => i), 8, async (i) => {
      await this.services.delete(`svc-${i}`, { namespace: SERVICE_NS }).catch(() => {});
    });
    await this.admin.request({ method: 'DELETE', path: `/apis/discovery.k8s.io/v1/namespaces/${SERVICE_NS}/endpointslices` });
    this.created = 0;
    await eventually('services gone', async () => (await this.services.list({ namespace: SERVICE_NS })).items.length === 0, 120_000, 1000);
  }

  /** Applies MetalLB objects (an L2Advertisement, BGPPeers...) of a phase. */
  apply(manifests: string): Promise<unknown> {
    return applyManifests(this.admin, manifests);
  }

  async destroy(): Promise<void> {
    for (const c of this.cleanups.reverse()) await c().catch((e) => console.error('cleanup:', e));
    this.cleanups.length = 0;
  }
}

/**
 * MetalLB v0.15.2's CRDs give its ASN fields `format: int32` with `maximum: 4294967295`; the
 * kube-apiserver here (1.36) then refuses every object naming an ASN ("Maximum boundary value
 * must be of type integer with format int32"). The maximum goes; the speaker still checks the range.
 */
function servableCrd(text: string): string {
  return text.replace(/(format: int32\n\s+)maximum: 4294967295\n\s+/g, '$1');
}
