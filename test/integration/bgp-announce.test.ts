import { afterAll, afterEach, beforeAll, describe, expect, test } from 'bun:test';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { CoreV1Event, V1EndpointSlice, V1Node, V1Service } from '@kubernetes/client-node';
import { ENDPOINT_SLICES } from '../../src/kube/endpoint-slices.ts';
import { EVENTS, NODES, ResourceClient, SERVICES } from '../../src/kube/resources.ts';
import type { BunKubeTransport } from '../../src/kube/transport.ts';
import { ApiBridge } from '../harness/api-bridge.ts';
import { CLIENT, CLUSTER_NODES, createClusterLab, REPLICAS } from '../harness/bgp-cluster-lab.ts';
import { kernelRoutes, ROUTER4, ROUTER6, type BgpRouter, type RouterKind } from '../harness/bgp-lab.ts';
import { CcmProcess } from '../harness/ccm-process.ts';
import { startControlPlane, type ControlPlane } from '../harness/control-plane.ts';
import { eventually, eventuallyEqual } from '../harness/eventually.ts';
import { transportFor } from '../harness/kubeconfig.ts';
import type { NetnsLab, PipedProcess } from '../harness/netns.ts';
import { setReady, UNINITIALIZED } from '../harness/nodes.ts';
import { freeLoopbackPorts } from '../harness/ports.ts';

/**
 * edge-ccm's BGP announcements end to end: the compiled binary (dist/edge-ccm) runs the real
 * controllers against the real kube-apiserver, inside a network namespace of a lab cluster
 * (test/harness/bgp-cluster-lab.ts) whose router is BIRD, FRR or GoBGP. The API server listens
 * on the machine's loopback; each edge-ccm namespace reaches it on its own 127.0.0.1 through a
 * forwarder and a Unix socket (test/harness/api-bridge.ts): nothing is routed in or out.
 *
 * Pod CIDRs of the nodes (IPv4 and IPv6) and the addresses of LoadBalancer services appear in
 * the router's table with the right next hops and go when their node or service goes; BIRD and
 * FRR install ECMP kernel routes a client behind the router reaches the nodes through; a leader
 * killed while the client keeps asking costs no request (graceful restart).
 */

const KIND_FILE = join(import.meta.dir, '..', 'fakes', 'node-listener-main.ts');
const LOOP_FILE = join(import.meta.dir, '..', 'fakes', 'http-loop-main.ts');
const RESTART_TIME_SECONDS = 10;
const CLUSTER_CIDR = '203.0.113.64/26,2001:db8:100::/56';

let cp: ControlPlane;
let admin: BunKubeTransport;
let cleanups: (() => Promise<unknown>)[] = [];

beforeAll(async () => {
  cp = await startControlPlane();
  admin = transportFor(cp.adminKubeconfig);
}, 240_000);
afterEach(async () => {
  for (const c of cleanups.reverse()) await c().catch((e) => console.error('cleanup:', e));
  cleanups = [];
});
afterAll(() => cp?.stop());

interface Cluster {
  lab: NetnsLab;
  router: BgpRouter;
  /** Node names in the cluster (prefixed per test: nodes are cluster-wide objects). */
  node: (i: number) => string;
  /** `extraArgs` come last (a flag given twice: the last one counts, as upstream's). */
  startReplica(role: string, extraArgs?: string[]): Promise<CcmProcess>;
  replicaPort(role: string): number;
  prefix: string;
  leaseName: string;
}

async function setUp(kind: RouterKind, prefix: string): Promise<Cluster> {
  const { lab, router } = await createClusterLab(`bgpk-${kind}`, kind);
  cleanups.push(() => lab.destroy(), () => router.stop());
  const bridge = await ApiBridge.start(lab, cp.server);
  cleanups.push(() => bridge.stop());
  const node = (i: number) => `${prefix}-${CLUSTER_NODES[i]!.name}`;
  const configPath = join(lab.dir, 'cloud.yaml');
  writeFileSync(configPath, cloudConfig(node));
  const leaseName = `${prefix}-ccm`;
  const ports = new Map<string, number>();
  for (const r of REPLICAS) ports.set(r.role, (await freeLoopbackPorts(1))[0]!);
  const cluster: Cluster = {
    lab,
    router,
    node,
    prefix,
    leaseName,
    replicaPort: (role) => ports.get(role)!,
    async startReplica(role, extraArgs = []) {
      await bridge.into(lab, role);
      const ccm = CcmProcess.binaryInNamespace(lab.ns(role), [
        '--cloud-provider=static', `--cloud-config=${configPath}`, `--kubeconfig=${cp.adminKubeconfig}`,
        `--cluster-cidr=${CLUSTER_CIDR}`, '--bind-address=127.0.0.1', `--secure-port=${ports.get(role)}`,
        `--leader-elect-resource-name=${leaseName}`, '--leader-elect-lease-duration=2s', '--leader-elect-renew-deadline=1500ms', '--leader-elect-retry-period=500ms',
        '--route-reconciliation-period=2s',
        ...extraArgs,
      ]);
      cleanups.push(() => ccm.stop('SIGKILL'));
      return ccm;
    },
  };
  cleanups.push(() => deleteObjects(prefix));
  return cluster;
}

function cloudConfig(node: (i: number) => string): string {
  const machines = CLUSTER_NODES.map((n, i) => `    - id: ${node(i)}\n      addresses: [{ type: InternalIP, address: ${n.v4} }, { type: InternalIP, address: "${n.v6}" }]`).join('\n');
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
  gracefulRestart: { restartTimeSeconds: ${RESTART_TIME_SECONDS} }
  peers:
    - { address: ${ROUTER4}, asn: 65000, holdTimeSeconds: 9, families: [4], connectRetry: { minSeconds: 0.2, maxSeconds: 2 } }
    - { address: "${ROUTER6}", asn: 65000, holdTimeSeconds: 9, families: [6], connectRetry: { minSeconds: 0.2, maxSeconds: 2 } }
`;
}

const nodes = () => new ResourceClient<V1Node>(admin, NODES);
const services = () => new ResourceClient<V1Service>(admin, SERVICES);
const slices = () => new ResourceClient<V1EndpointSlice>(admin, ENDPOINT_SLICES);

/** Nodes as a kubelet with --cloud-provider=external registers them, with their pod CIDRs (IPv4 and IPv6). */
async function createNodes(c: Cluster): Promise<void> {
  for (const [i] of CLUSTER_NODES.entries()) {
    await nodes().create({
      metadata: { name: c.node(i) },
      spec: { podCIDRs: [`203.0.113.${64 + 8 * i}/29`, `2001:db8:100:${i + 1}::/64`], taints: [UNINITIALIZED] },
    });
  }
}

async function deleteObjects(prefix: string): Promise<void> {
  for (const s of (await services().list({ namespace: 'default' })).items.filter((s) => s.metadata?.name?.startsWith(prefix))) {
    // No edge-ccm runs any more to remove its finalizer.
    await services().patch(s.metadata!.name!, 'merge', { metadata: { finalizers: null } }, { namespace: 'default' }).catch(() => {});
    await services().delete(s.metadata!.name!, { namespace: 'default' }).catch(() => {});
  }
  for (const n of (await nodes().list()).items.filter((n) => n.metadata?.name?.startsWith(prefix))) await nodes().delete(n.metadata!.name!).catch(() => {});
}

async function createService(c: Cluster, name: string, local = false): Promise<string> {
  await services().create({
    metadata: { name: `${c.prefix}-${name}`, namespace: 'default' },
    spec: { type: 'LoadBalancer', ports: [{ port: 80, protocol: 'TCP' }], ...(local ? { externalTrafficPolicy: 'Local' } : {}) },
  });
  const s = await eventually(`service ${name} gets an address`, async () => {
    const got = await services().get(`${c.prefix}-${name}`, { namespace: 'default' });
    return got.status?.loadBalancer?.ingress?.[0]?.ip ? got : undefined;
  });
  return s.status!.loadBalancer!.ingress![0]!.ip!;
}

/** The EndpointSlice the endpoint-slice controller would write: one ready endpoint on each of `nodeIndexes`. */
async function setEndpoints(c: Cluster, service: string, nodeIndexes: number[]): Promise<void> {
  const name = `${c.prefix}-${service}-x`;
  const body: V1EndpointSlice = {
    metadata: { name, namespace: 'default', labels: { 'kubernetes.io/service-name': `${c.prefix}-${service}` } },
    addressType: 'IPv4',
    endpoints: nodeIndexes.map((i) => ({ addresses: [`10.0.0.${i + 1}`], nodeName: c.node(i), conditions: { ready: true } })),
    ports: [{ port: 80, protocol: 'TCP' }],
  };
  await slices().delete(name, { namespace: 'default' }).catch(() => {});
  await slices().create(body, { namespace: 'default' });
}

/** The router's table (or its kernel's), reduced to the cluster's prefixes, in prefix order. */
type Table = Record<string, string[]>;
const ours = (p: string) => p.startsWith('203.0.113.') || p.startsWith('2001:db8:100:');
function ordered(entries: Iterable<[string, string[]]>): Table {
  return Object.fromEntries([...entries].filter(([p]) => ours(p)).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}
async function bgpTable(router: BgpRouter): Promise<Table> {
  return ordered([...(await router.paths(4)), ...(await router.paths(6))]);
}
async function kernelTable(lab: NetnsLab): Promise<Table> {
  return ordered([...(await kernelRoutes(lab, 'rtr', 4)), ...(await kernelRoutes(lab, 'rtr', 6))].filter(([p]) => !p.startsWith('203.0.113.128/')));
}

/** eventuallyEqual()'s failure shows this edge-ccm's recent output. */
const logOf = (ccm: CcmProcess) => ({ explain: () => ccm.logs().slice(-3000) });

const v4 = (i: number) => CLUSTER_NODES[i]!.v4;
const v6 = (i: number) => CLUSTER_NODES[i]!.v6;
const podRoutes = (indexes: number[]): Table =>
  Object.fromEntries(indexes.flatMap((i) => [[`203.0.113.${64 + 8 * i}/29`, [v4(i)]], [`2001:db8:100:${i + 1}::/64`, [v6(i)]]]));

/** A listener on `address` in each node's namespace, answering with the node's name (kube-proxy's stand-in). */
async function listenOnNodes(c: Cluster, address: string): Promise<void> {
  for (const n of CLUSTER_NODES) {
    await c.lab.ip(n.name, 'addr', 'add', `${address}/32`, 'dev', 'lo');
    const p = c.lab.spawnLogged(n.name, `listener-${n.name}`, [process.execPath, KIND_FILE, n.name, '80', address]);
    await eventually(`listener in ${n.name}`, () => p.logTail().includes('listening') || (!p.running && Promise.reject(new Error(p.logTail()))), 30_000);
  }
}

async function curlFromClient(lab: NetnsLab, address: string): Promise<string> {
  const r = await lab.exec('cli', ['curl', '-s', '--max-time', '2', `http://${address}/`]);
  return r.code === 0 ? r.stdout : `curl exited ${r.code}`;
}

const KINDS: RouterKind[] = ['gobgp', 'bird', 'frr'];

for (const kind of KINDS) {
  describe(`edge-ccm announces over BGP, ${kind} as the router`, () => {
    test('pod CIDRs of every node with the node as next hop, load-balancer addresses with every eligible node (eTP Local: endpoint nodes); gone with their node or service', async () => {
      const c = await setUp(kind, `bgp${kind}`);
      const ccm = await c.startReplica('ccm1');
      await ccm.waitForLog('successfully acquired lease', 60_000);
      await createNodes(c);
      await eventuallyEqual('pod CIDRs of the three nodes', () => bgpTable(c.router), podRoutes([0, 1, 2]), logOf(ccm));
      // The route controller sets NetworkUnavailable as upstream once the route is announced.
      await eventually('NetworkUnavailable False (RouteCreated)', async () => (await nodes().get(c.node(0))).status?.conditions?.some((x) => x.type === 'NetworkUnavailable' && x.status === 'False' && x.reason === 'RouteCreated'));

      const web = await createService(c, 'web');
      const all = [v4(0), v4(1), v4(2)];
      await eventuallyEqual('the address with every node as next hop (ADD-PATH)', () => bgpTable(c.router), { ...podRoutes([0, 1, 2]), [`${web}/32`]: all }, logOf(ccm));
      if (kind !== 'gobgp') {
        // One kernel route with three next hops, and a client behind the router reaches a node through it.
        await eventuallyEqual('the ECMP kernel route', () => kernelTable(c.lab), { ...podRoutes([0, 1, 2]), [`${web}/32`]: all }, logOf(ccm));
        await listenOnNodes(c, web);
        expect(['n1', 'n2', 'n3']).toContain(await curlFromClient(c.lab, web));
      }

      // Leader mode follows readiness (no kubelet here: no node has a Ready condition yet, and with none Ready all are kept).
      await setReady(nodes(), c.node(1), 'True');
      await setReady(nodes(), c.node(2), 'True');
      await setReady(nodes(), c.node(0), 'False');
      await eventuallyEqual('a NotReady node is no next hop', () => bgpTable(c.router), { ...podRoutes([0, 1, 2]), [`${web}/32`]: [v4(1), v4(2)] }, logOf(ccm));
      await setReady(nodes(), c.node(0), 'True');
      await eventuallyEqual('Ready again: a next hop again', () => bgpTable(c.router), { ...podRoutes([0, 1, 2]), [`${web}/32`]: all }, logOf(ccm));

      const local = await createService(c, 'local', true);
      await setEndpoints(c, 'local', [1]);
      await eventuallyEqual('eTP Local: only the endpoint node', () => bgpTable(c.router), { ...podRoutes([0, 1, 2]), [`${web}/32`]: all, [`${local}/32`]: [v4(1)] }, logOf(ccm));
      await setEndpoints(c, 'local', [1, 2]);
      await eventuallyEqual('eTP Local: a second endpoint node', () => bgpTable(c.router), { ...podRoutes([0, 1, 2]), [`${web}/32`]: all, [`${local}/32`]: [v4(1), v4(2)] }, logOf(ccm));

      await services().delete(`${c.prefix}-web`, { namespace: 'default' });
      await eventuallyEqual('the deleted service withdrawn', () => bgpTable(c.router), { ...podRoutes([0, 1, 2]), [`${local}/32`]: [v4(1), v4(2)] }, logOf(ccm));
      await nodes().delete(c.node(2));
      await eventuallyEqual('the deleted node\'s pod CIDRs and next hop withdrawn', () => bgpTable(c.router), { ...podRoutes([0, 1]), [`${local}/32`]: [v4(1)] }, logOf(ccm));

      if (kind === 'gobgp') {
        // A reload without a restart: the IPv6 peer removed (its routes withdrawn), then back.
        const path = join(c.lab.dir, 'cloud.yaml');
        const text = await Bun.file(path).text();
        const v6Peer = text.split('\n').find((l) => l.includes(`"${ROUTER6}"`))!;
        writeFileSync(path, text.replace(`${v6Peer}\n`, ''));
        await eventuallyEqual('the removed peer\'s routes withdrawn', () => bgpTable(c.router), { '203.0.113.64/29': [v4(0)], '203.0.113.72/29': [v4(1)], [`${local}/32`]: [v4(1)] }, logOf(ccm));
        writeFileSync(path, text);
        await eventuallyEqual('the peer back', () => bgpTable(c.router), { ...podRoutes([0, 1]), [`${local}/32`]: [v4(1)] }, logOf(ccm));
      }

      // The operator's view: GET /debug/bgp (authorized), the per-peer metrics, the readyz check.
      const token = (await Bun.file(cp.tokenKubeconfig('admin')).text()).match(/token: (\S+)/)![1]!;
      const get = async (path: string, auth = true) => {
        const r = await c.lab.exec('ccm1', ['curl', '-sk', ...(auth ? ['-H', `Authorization: Bearer ${token}`] : []), '-w', '\n%{http_code}', `https://127.0.0.1:${c.replicaPort('ccm1')}${path}`]);
        const lines = r.stdout.trimEnd().split('\n');
        return { status: Number(lines.pop()), body: lines.join('\n') };
      };
      expect((await get('/debug/bgp', false)).status).toBe(401);
      const debug = JSON.parse((await get('/debug/bgp')).body);
      expect(debug.running).toBe(true);
      expect(debug.stats.peers.map((p: { address: string; state: string }) => [p.address, p.state])).toEqual([[ROUTER4, 'established'], [ROUTER6, 'established']]);
      expect(debug.announcements.map((a: { prefix: string }) => a.prefix).sort()).toEqual(Object.keys({ ...podRoutes([0, 1]), [`${local}/32`]: [] }).sort());
      const metrics = (await get('/metrics')).body;
      expect(metrics).toContain(`edge_ccm_bgp_session_established{peer="${ROUTER4}",peer_asn="65000"} 1`);
      expect(metrics).toContain(`edge_ccm_bgp_prefixes_announced{peer="${ROUTER4}",peer_asn="65000"} 3`);
      expect((await get('/readyz?verbose')).body).toContain('[+]bgp ok');

      // The router goes away: the sessions are down, a Warning event says so, /readyz fails.
      await c.router.stop();
      await eventually('BGPSessionDown events on the Lease', async () => {
        const events = (await new ResourceClient<CoreV1Event>(admin, EVENTS).list({ namespace: 'kube-system' })).items;
        return events.some((e) => e.reason === 'BGPSessionDown' && e.type === 'Warning' && e.involvedObject?.name === c.leaseName && e.message?.includes(ROUTER4));
      });
      const notReady = await eventually('/readyz failing', async () => {
        const r = await get('/readyz?verbose');
        return r.status === 500 ? r.body : undefined;
      });
      expect(notReady).toContain('[-]bgp failed');
    }, 180_000);
  });
}

for (const kind of ['bird', 'frr'] as RouterKind[]) {
  describe(`leader change, ${kind} as the router`, () => {
    test('SIGKILL of the leader while a client keeps asking: no request fails (graceful restart); the new leader re-announces and the stale routes go', async () => {
      const c = await setUp(kind, `gr${kind}`);
      const first = await c.startReplica('ccm1');
      await first.waitForLog('successfully acquired lease', 60_000);
      const second = await c.startReplica('ccm2');
      await second.waitForLog('attempting to acquire leader lease', 60_000);
      await createNodes(c);
      const web = await createService(c, 'web');
      const all = [v4(0), v4(1), v4(2)];
      const full = { ...podRoutes([0, 1, 2]), [`${web}/32`]: all };
      await eventuallyEqual('the leader\'s table in the kernel', () => kernelTable(c.lab), full, logOf(first));
      // The standby holds no session.
      expect(await c.router.sessionUp(REPLICAS[0].v4)).toBe(true);
      expect(await c.router.sessionUp(REPLICAS[1].v4)).toBe(false);
      await listenOnNodes(c, web);

      const client: PipedProcess = c.lab.spawnPiped('cli', 'client', [process.execPath, LOOP_FILE, `http://${web}/`, '100000']);
      cleanups.push(async () => client.kill('SIGKILL'));
      let printed = '';
      const reading = (async () => {
        for await (const chunk of client.stdout) printed += new TextDecoder().decode(chunk);
      })();
      await eventually('the client is answered', () => printed.includes('started'));

      // Through the change, the router's kernel keeps every route (pod CIDRs included: the new
      // leader opens its sessions only once the route controller's first round is done).
      const gaps: string[] = [];
      let sampling = true;
      const sampler = (async () => {
        while (sampling) {
          const now = await kernelTable(c.lab);
          for (const prefix of Object.keys(full)) if (!now[prefix]) gaps.push(`${prefix} missing at ${new Date().toISOString()}`);
          await Bun.sleep(20); // the sampling period (a fixed pace on purpose: it looks for a gap, waits for nothing)
        }
      })();
      first.proc.kill('SIGKILL');
      await first.exited();
      // The second replica takes the Lease, re-announces everything and sends End-of-RIB: both
      // replicas' paths are in the router's table (the first's kept as stale, graceful restart).
      await second.waitForLog('successfully acquired lease', 60_000);
      await eventually('the router\'s session with the new leader', () => c.router.sessionUp(REPLICAS[1].v4));
      await eventuallyEqual('the new leader\'s paths beside the stale ones', () => bgpTable(c.router), doubled(full), logOf(second));
      sampling = false;
      await sampler;
      expect(gaps).toEqual([]);
      // What the new leader no longer announces goes once the old one's restart time is over.
      await nodes().delete(c.node(2));
      const after = { ...podRoutes([0, 1]), [`${web}/32`]: [v4(0), v4(1)] };
      // FRR 8.4 clears only one stale ADD-PATH path per prefix when the restart time is over
      // (FRRouting/frr#17372): the others stay in its BGP table, marked stale and never used.
      // So with FRR the forwarding table is what proves it; BIRD's BGP table is clean too.
      if (kind === 'bird') await eventuallyEqual('the stale routes cleared', () => bgpTable(c.router), after, logOf(second));
      await eventuallyEqual('the kernel follows', () => kernelTable(c.lab), after, logOf(second));

      client.stdin.write('stop\n');
      client.stdin.end();
      await reading;
      const result = JSON.parse(printed.trim().split('\n').pop()!) as { sent: number; failed: number; errors: string[]; byNode: Record<string, number> };
      expect(result.sent).toBeGreaterThan(50);
      expect({ failed: result.failed, errors: result.errors }).toEqual({ failed: 0, errors: [] });
    }, 180_000);
  });
}

/** Every path twice: once from each replica (the old leader's kept stale). */
function doubled(t: Table): Table {
  return Object.fromEntries(Object.entries(t).map(([p, hops]) => [p, [...hops, ...hops].sort()]));
}

describe('a leader paused past its lease, gobgp as the router', () => {
  test('woken after the router dropped its session, it opens none: its term is over (another replica leads)', async () => {
    const c = await setUp('gobgp', 'pausedgobgp');
    // A renew deadline long enough for the woken speaker to reconnect before its renewal loop
    // gives up (it retries until the deadline, counted from the wake): the window to close;
    // longer than GoBGP's own wait (about 5 s) before it takes a dropped neighbour again.
    const leases = ['--leader-elect-lease-duration=10s', '--leader-elect-renew-deadline=9s', '--leader-elect-retry-period=500ms'];
    const first = await c.startReplica('ccm1', leases);
    await first.waitForLog('successfully acquired lease', 60_000);
    const second = await c.startReplica('ccm2', leases);
    await second.waitForLog('attempting to acquire leader lease', 60_000);
    await createNodes(c);
    await eventually("the leader's session", () => c.router.sessionUp(REPLICAS[0].v4), 60_000);

    // Paused past its lease (10 s) and past the router's hold time (9 s): the standby leads, the
    // router drops the paused one's session. Its timers all fire when it wakes: its speaker's
    // reconnect must not win the race against its renewal loop's verdict.
    first.proc.kill('SIGSTOP');
    cleanups.push(async () => first.proc.kill('SIGCONT'));
    await second.waitForLog('successfully acquired lease', 60_000);
    await eventually("the router's session with the new leader", () => c.router.sessionUp(REPLICAS[1].v4), 60_000);
    await eventually("the router dropped the paused leader's session (hold time)", async () => !(await c.router.sessionUp(REPLICAS[0].v4)), 30_000);
    const asleep = first.logs().length;
    first.proc.kill('SIGCONT');
    await first.waitForLog('campaigning again', 30_000);
    const awake = first.logs().slice(asleep);
    expect(awake).not.toContain('BGP session established');
    expect(await c.router.sessionUp(REPLICAS[0].v4)).toBe(false);
  }, 120_000);
});
