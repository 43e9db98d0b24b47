import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { X509Certificate } from 'node:crypto';
import type { V1CertificateSigningRequest, V1ConfigMap, V1Node, V1Pod, V1Service } from '@kubernetes/client-node';
import { KubeApiError } from '../../src/kube/errors.ts';
import { CERTIFICATE_SIGNING_REQUESTS, CONFIGMAPS, NODES, ResourceClient } from '../../src/kube/resources.ts';
import { createSigningRequest } from '../harness/certs.ts';
import { craftedServingRequests } from '../harness/csr-attacks.ts';
import { transportFor } from '../harness/kubeconfig.ts';
import { createLoadBalancer, createNamespace, deployEcho, ECHO_PORT, loadBalancerAddress, podsReady, scaleEcho, SERVICE_PORT } from '../harness/echo-workload.ts';
import { eventually } from '../harness/eventually.ts';
import { HttpProber, type ProbeResult } from '../harness/http-prober.ts';
import { BGP_POOL, BGP_POOL_NAME, CLIENT_IP, CLUSTER_CIDR, IPAM_RECORD, L2_POOL, NODE_CIDR_MASK, RealCluster, REMOTE_CLIENT_IP, ROUTER_IP } from '../harness/real-cluster.ts';
import { UNINITIALIZED } from '../harness/nodes.ts';

/**
 * edge-ccm meets real kubelets, containerd, kube-proxy and pods (issue 35): three real nodes in
 * network namespaces (test/harness/real-cluster.ts), brought up once for the file (50-60 s in
 * all, about 30 of them the dying node's). edge-ccm (the compiled binary, static provider) initialises
 * the Nodes the kubelets register, hands out their pod CIDRs (node IPAM's CloudAllocator; the
 * leader announces them to the router, the nodes' only path to each other's pods), approves their serving
 * certificates, assigns load-balancer addresses: its speakers answer ARP for the L2 pool's and
 * announce the BGP pool's to BIRD over their own sessions tied to BFD (announceFrom: nodes), the
 * leader the pod CIDRs; clients on the switch and behind the router reach
 * the pods of a Deployment through them, kube-proxy's rules doing the rest (with
 * externalTrafficPolicy: Local, only from the pods' nodes). The last test kills a node: keep it last.
 */
const NS = 'web';
const APP = 'echo';
const REPLICAS = 3;
/** The same pods behind a second Service, from the BGP pool. */
const ROUTED = 'echo-routed';
/** APP's pods (one per node) behind two externalTrafficPolicy: Local Services (L2 and BGP), probed while a node dies. */
const LOCAL = 'echo-local';
const LOCAL_ROUTED = 'echo-local-routed';
/** A Deployment of its own behind two externalTrafficPolicy: Local Services (L2 and BGP). */
const SOLO = 'solo';
const SOLO_ROUTED = 'solo-routed';

let cluster: RealCluster;
let nodes: ResourceClient<V1Node>;
let csrs: ResourceClient<V1CertificateSigningRequest>;
/** Each Node's addresses as they changed over the run (polled every 250 ms): the kubelet's writes and edge-ccm's must not fight. */
const addressHistory = new Map<string, string[]>();
let watching = true;
let watcher: Promise<void> | undefined;

beforeAll(async () => {
  cluster = await RealCluster.start({ nodes: 3 });
  nodes = new ResourceClient<V1Node>(cluster.admin, NODES);
  csrs = new ResourceClient<V1CertificateSigningRequest>(cluster.admin, CERTIFICATE_SIGNING_REQUESTS);
  watcher = (async () => {
    while (watching) {
      for (const n of (await nodes.list().catch(() => ({ items: [] as V1Node[] }))).items) {
        const seen = addressHistory.get(n.metadata!.name!) ?? [];
        const now = JSON.stringify(n.status?.addresses ?? []);
        if (seen.at(-1) !== now) addressHistory.set(n.metadata!.name!, [...seen, now]);
      }
      await Bun.sleep(250);
    }
  })();
  // The workload every test below reads: made once, as a user would (each test also runs alone).
  await cluster.podCidrs();
  await createNamespace(cluster.admin, NS);
  await deployEcho(cluster.admin, NS, APP, REPLICAS, { onePerNode: true });
  await createLoadBalancer(cluster.admin, NS, APP);
  await createLoadBalancer(cluster.admin, NS, ROUTED, { pool: BGP_POOL_NAME, app: APP });
}, 400_000);

afterAll(async () => {
  watching = false;
  await watcher;
  await cluster?.stop();
}, 120_000);

const explain = () => cluster.logs();

describe('node initialisation from real kubelets', () => {
  test('each Node the kubelet registered loses the uninitialized taint and gets its providerID, labels and addresses (--node-ip honoured), a pod CIDR, and turns Ready', async () => {
    for (const n of cluster.nodes) {
      const node = await eventually(`node ${n.name} initialised and Ready`, async () => {
        const got = await nodes.get(n.name);
        const tainted = (got.spec?.taints ?? []).some((t) => t.key === UNINITIALIZED.key);
        const ready = got.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True');
        return !tainted && ready && got.spec?.podCIDR ? got : undefined;
      }, { timeoutMs: 120_000, intervalMs: 250, explain });
      expect(node.spec!.providerID).toBe(`static://${n.machineId}`);
      expect(node.metadata!.labels).toMatchObject({
        'node.kubernetes.io/instance-type': 'netns',
        'topology.kubernetes.io/zone': 'lab-1',
        'topology.kubernetes.io/region': 'one-machine',
        'kubernetes.io/hostname': n.name,
      });
      // The inventory's InternalIP, which is the kubelet's --node-ip, and the kubelet's Hostname.
      expect(node.status!.addresses).toEqual([{ type: 'InternalIP', address: n.ip }, { type: 'Hostname', address: n.name }]);
      expect(node.metadata!.annotations?.['alpha.kubernetes.io/provided-node-ip']).toBe(n.ip);
      const [base, bits] = node.spec!.podCIDR!.split('/');
      expect(Number(bits)).toBe(NODE_CIDR_MASK);
      expect(inCidr(base!, CLUSTER_CIDR)).toBe(true);
    }
  }, 180_000);
});

describe('traffic', () => {
  test('a client on the switch reaches the pods of a Deployment through its LoadBalancer address, answered by ARP from one node', async () => {
    const address = await loadBalancerAddress(cluster.admin, NS, APP, explain);
    expect(inRange(address, L2_POOL)).toBe(true);
    const pods = await podsReady(cluster.admin, NS, APP, REPLICAS, explain);

    // Requests until every pod has answered: kube-proxy spreads them over the three.
    const answeredBy = new Set<string>();
    await eventually(`every pod answering through ${address}`, async () => {
      const body = await cluster.fetchFromClient(address, SERVICE_PORT);
      const pod = body?.split(' ')[0];
      if (pod) answeredBy.add(pod);
      return answeredBy.size === pods.size;
    }, { timeoutMs: 60_000, intervalMs: 100, explain: () => `answered by ${[...answeredBy].join(', ') || 'none'}; pods ${[...pods.keys()].join(', ')}\n${cluster.logs()}` });
    expect([...answeredBy].sort()).toEqual([...pods.keys()].sort());

    // The client learnt the address by ARP: one node's MAC, the one the speakers elected.
    const neighbour = await cluster.lab.ip('client', 'neigh', 'show', address, 'dev', 'eth0');
    const mac = /lladdr ([0-9a-f:]{17})/.exec(neighbour)?.[1];
    expect(cluster.nodes.map((n) => n.mac)).toContain(mac!);
  }, 240_000);
});

describe('traffic by BGP', () => {
  test("a client behind the router reaches the same pods through an address of the BGP pool: each node's speaker announces it over its own session, tied to BFD with the router, and the leader the pod CIDRs", async () => {
    const address = await loadBalancerAddress(cluster.admin, NS, ROUTED, explain);
    expect(inRange(address, BGP_POOL)).toBe(true);
    for (const n of cluster.nodes) await eventually(`the router's BFD session with ${n.name} Up`, () => cluster.router.bfdUp(n.ip), { timeoutMs: 60_000, explain });
    const everyNode = cluster.nodes.map((n) => n.ip).sort();
    await eventually(`the router's route to ${address} via every node`, async () => Bun.deepEquals(await cluster.router.nextHops(address), everyNode),
      { timeoutMs: 60_000, intervalMs: 250, explain: () => `bird: ${cluster.router.proc.logTail()}\n${explain()}` });
    const pods = await podsReady(cluster.admin, NS, APP, REPLICAS, explain);
    const answeredBy = new Set<string>();
    await eventually(`every pod answering the remote client through ${address}`, async () => {
      const pod = (await cluster.fetchFromClient(address, SERVICE_PORT, 'remote'))?.split(' ')[0];
      if (pod) answeredBy.add(pod);
      return answeredBy.size === pods.size;
    }, { timeoutMs: 60_000, intervalMs: 100, explain: () => `answered by ${[...answeredBy].join(', ') || 'none'}\n${explain()}` });
    // The pod CIDRs too, each via its own node (the route controller on BGP).
    for (const n of cluster.nodes) {
      const cidr = (await nodes.get(n.name)).spec!.podCIDR!;
      await eventually(`the router's route to ${n.name}'s pod CIDR ${cidr}`, async () => Bun.deepEquals(await cluster.router.nextHops(cidr), [n.ip]), { timeoutMs: 30_000, explain });
    }
  }, 120_000);
});

describe('kubelet serving certificates', () => {
  test("each kubelet's serving-certificate request is approved by edge-ccm and signed; the API server, checking them against the cluster CA, serves kubectl logs and exec", async () => {
    for (const n of cluster.nodes) {
      const csr = await eventually(`${n.name}'s serving certificate issued`, async () => {
        const list = (await csrs.list()).items.filter((c) => c.spec.signerName === 'kubernetes.io/kubelet-serving' && c.spec.username === `system:node:${n.name}`);
        return list.find((c) => c.status?.certificate);
      }, { timeoutMs: 60_000, explain });
      const approved = csr.status!.conditions!.find((c) => c.type === 'Approved');
      expect(approved?.status).toBe('True');
      expect(approved?.reason).toBe('EdgeCCMApproved');
    }
    const pods = await podsReady(cluster.admin, NS, APP, REPLICAS, explain);
    for (const pod of pods.keys()) {
      expect(await cluster.kubectl(['-n', NS, 'logs', pod])).toContain(`http-echo ${pod} listening on :8080`);
      expect((await cluster.kubectl(['-n', NS, 'exec', pod, '--', '/http-echo', 'hostname'])).trim()).toBe(pod);
    }
  }, 120_000);

  test("a kubelet asking for another node's address is denied", async () => {
    await eventually('the nodes registered', async () => (await nodes.list()).items.length === cluster.nodes.length, { timeoutMs: 60_000, explain });
    const [n1, n2] = cluster.nodes;
    const { csrPem } = await createSigningRequest(cluster.lab.dir, 'n1-steals-n2', {
      commonName: `system:node:${n1!.name}`, organizations: ['system:nodes'], dnsNames: [n1!.name], ipAddresses: [n1!.ip, n2!.ip],
    });
    const asNode = new ResourceClient<V1CertificateSigningRequest>(transportFor(cluster.nodeKubeconfigs.get(n1!.name)!), CERTIFICATE_SIGNING_REQUESTS);
    await asNode.create({
      apiVersion: 'certificates.k8s.io/v1',
      kind: 'CertificateSigningRequest',
      metadata: { name: 'n1-steals-n2' },
      spec: { request: Buffer.from(csrPem).toString('base64'), signerName: 'kubernetes.io/kubelet-serving', usages: ['digital signature', 'server auth'] },
    });
    const denied = await eventually('the crafted request decided', async () => (await csrs.get('n1-steals-n2')).status?.conditions?.find((c) => c.type === 'Denied' || c.type === 'Approved'), { timeoutMs: 30_000, explain });
    expect(denied.type).toBe('Denied');
    expect(denied.reason).toBe('IPNotOfNode');
    expect(denied.message).toContain(n2!.ip);
  }, 60_000);

  test("the crafted requests of issue 33 (read one way as the node's own, another way as another node's or the API server's), filed by a real node with its kubelet's credentials: each refused by the API server or denied by edge-ccm, none approved, no certificate issued", async () => {
    await eventually('the nodes registered', async () => (await nodes.list()).items.length === cluster.nodes.length, { timeoutMs: 60_000, explain });
    const [n1, n2] = cluster.nodes;
    const apiServerIp = (await cluster.admin.request<V1Service>({ method: 'GET', path: '/api/v1/namespaces/default/services/kubernetes' })).spec!.clusterIP!;
    const own = { cn: `system:node:${n1!.name}`, dns: [n1!.name], ips: [n1!.ip] };
    const wanted = { cn: `system:node:${n2!.name}`, dns: [n2!.name, 'kubernetes.default.svc'], ips: [n2!.ip, apiServerIp] };
    // The kubelet's own kubeconfig (its client certificate): the API server sets the requester, not the test.
    const asNode = new ResourceClient<V1CertificateSigningRequest>(transportFor(cluster.nodeKubeconfigs.get(n1!.name)!), CERTIFICATE_SIGNING_REQUESTS);
    const crafted = craftedServingRequests(own, wanted);
    const outcomes = new Map<string, { name: string; class: string; outcome: string }>();
    const filed: string[] = [];
    for (const [i, c] of crafted.entries()) {
      const name = `${n1!.name}-crafted-${i}`;
      try {
        const made = await asNode.create({
          apiVersion: 'certificates.k8s.io/v1',
          kind: 'CertificateSigningRequest',
          metadata: { name },
          spec: { request: Buffer.from(c.text).toString('base64'), signerName: 'kubernetes.io/kubelet-serving', usages: ['digital signature', 'server auth'] },
        });
        expect({ name, username: made.spec.username, isNode: made.spec.groups?.includes('system:nodes') }).toEqual({ name, username: own.cn, isNode: true });
        filed.push(name);
      } catch (error) {
        // Refused at create: the API server's own reading (pem.Decode, x509.ParseCertificateRequest) found no request.
        if (!(error instanceof KubeApiError) || error.status !== 422) throw error;
        outcomes.set(name, { name: c.name, class: c.class, outcome: `refused at create: 422 ${/Invalid value: "[^"]*": (.*)$/s.exec(error.message)?.[1] ?? error.message.slice(0, 200)}` });
      }
      outcomes.set(name, outcomes.get(name) ?? { name: c.name, class: c.class, outcome: 'filed' });
    }
    const decided = new Map<string, V1CertificateSigningRequest>();
    await eventually('every filed request decided by edge-ccm', async () => {
      for (const name of filed.filter((f) => !decided.has(f))) {
        const csr = await csrs.get(name);
        if (csr.status?.conditions?.some((c) => c.type === 'Denied' || c.type === 'Approved')) decided.set(name, csr);
      }
      return decided.size === filed.length;
    }, { timeoutMs: 30_000, explain: () => `undecided: ${filed.filter((f) => !decided.has(f)).join(', ')}\n${explain()}` });
    for (const [name, csr] of decided) {
      const condition = csr.status!.conditions!.find((c) => c.type === 'Denied' || c.type === 'Approved')!;
      outcomes.get(name)!.outcome = `${condition.type} ${condition.reason}: ${condition.message?.slice(0, 100)}`;
    }
    console.log(`[real cluster] crafted kubelet-serving requests from ${n1!.name} (as ${own.cn}) for ${wanted.cn}, ${wanted.dns.join(', ')}, ${wanted.ips.join(', ')}:\n` +
      [...outcomes.values()].map((o) => `  ${o.class.padEnd(22)} | ${o.name.padEnd(52)} | ${o.outcome}`).join('\n'));

    // Read again once all are decided: none approved, none signed; each crafted one either refused or denied as Malformed.
    for (const [i, c] of crafted.entries()) {
      const name = `${n1!.name}-crafted-${i}`;
      const outcome = outcomes.get(name)!.outcome;
      if (!filed.includes(name)) {
        expect({ name: c.name, outcome }).toEqual({ name: c.name, outcome: expect.stringMatching(/^refused at create: 422 /) });
        continue;
      }
      const csr = await csrs.get(name);
      const conditions = (csr.status?.conditions ?? []).map((k) => `${k.type}/${k.reason}`);
      const expected = c.class === 'plain' ? 'Denied/SubjectMismatch' : 'Denied/Malformed';
      // What the signer issued, if it did: the names Go read, which the approver should have refused.
      const signed = csr.status?.certificate ? (({ subject, subjectAltName }) => `${subject.replace(/\n/g, ', ')}; ${subjectAltName}`)(new X509Certificate(Buffer.from(csr.status.certificate, 'base64'))) : 'none';
      expect({ name: c.name, conditions, signed }).toEqual({ name: c.name, conditions: [expected], signed: 'none' });
    }
  }, 90_000);
});

const toInt = (a: string) => a.split('.').reduce((acc, o) => acc * 256 + Number(o), 0);
const inRange = (address: string, [first, last]: readonly [string, string]) => toInt(address) >= toInt(first) && toInt(address) <= toInt(last);

describe('externalTrafficPolicy: Local', () => {
  test("only nodes with a ready pod announce (ARP and BGP next hops), the pod sees the client's own address, and scaling moves the announcements", async () => {
    await deployEcho(cluster.admin, NS, SOLO, 1);
    await createLoadBalancer(cluster.admin, NS, SOLO, { local: true });
    await createLoadBalancer(cluster.admin, NS, SOLO_ROUTED, { local: true, pool: BGP_POOL_NAME, app: SOLO });
    const l2 = await loadBalancerAddress(cluster.admin, NS, SOLO, explain);
    const routed = await loadBalancerAddress(cluster.admin, NS, SOLO_ROUTED, explain);
    const one = await podsReady(cluster.admin, NS, SOLO, 1, explain);
    const [pod, podNode] = [...one][0]!;
    const ipOf = (name: string) => cluster.nodes.find((n) => n.name === name)!.ip;

    // On the switch: the answer comes from the pod, which saw the client's own address, by the MAC of the pod's node.
    const body = await eventually(`${l2} answered`, () => cluster.fetchFromClient(l2, SERVICE_PORT), { timeoutMs: 30_000, intervalMs: 100, explain });
    expect(body).toBe(`${pod} ${CLIENT_IP}`);
    const mac = /lladdr (\S+)/.exec(await cluster.lab.ip('client', 'neigh', 'show', l2, 'dev', 'eth0'))?.[1];
    expect(mac).toBe(cluster.nodes.find((n) => n.name === podNode)!.mac);
    // Behind the router: the pod's node alone is the next hop.
    let last: string[] = [];
    let birdRoutes = '';
    const routerSaw = () => `the router's last route via ${last.join(', ') || 'none'}\n${birdRoutes}\n${explain()}`;
    await eventually(`${routed} via ${podNode} alone`, async () => {
      last = await cluster.router.nextHops(routed);
      birdRoutes = await cluster.router.birdc(`show route for ${routed} all`);
      return Bun.deepEquals(last, [ipOf(podNode)]);
    }, { timeoutMs: 30_000, intervalMs: 250, explain: routerSaw });
    // As on the switch above: the address can be announced before the pod's kube-proxy has the
    // rules for it (it learns the new ingress address from the Service's status on its own watch).
    const routedBody = await eventually(`${routed} answered from behind the router`, () => cluster.fetchFromClient(routed, SERVICE_PORT, 'remote'), { timeoutMs: 30_000, intervalMs: 100, explain: routerSaw });
    expect(routedBody).toBe(`${pod} ${REMOTE_CLIENT_IP}`);

    // Two pods: each one's node is a next hop.
    await scaleEcho(cluster.admin, NS, SOLO, 2);
    const two = await podsReady(cluster.admin, NS, SOLO, 2, explain);
    const hops = [...new Set(two.values())].map(ipOf).sort();
    await eventually(`${routed} via ${hops.join(', ')}`, async () => Bun.deepEquals((last = await cluster.router.nextHops(routed)), hops), { timeoutMs: 30_000, intervalMs: 250, explain: routerSaw });
  }, 120_000);
});

describe('status writes', () => {
  test("the kubelets' own status updates and edge-ccm's never fight: each Node's addresses changed at most once (to the initialised ones) since it registered", () => {
    for (const n of cluster.nodes) {
      const history = addressHistory.get(n.name) ?? [];
      expect(history.length).toBeGreaterThanOrEqual(1);
      expect(history.length).toBeLessThanOrEqual(2);
      expect(JSON.parse(history.at(-1)!)).toEqual([{ type: 'InternalIP', address: n.ip }, { type: 'Hostname', address: n.name }]);
    }
  });
});

describe('pod CIDRs', () => {
  test("each Node's pod CIDR is its machine's in the CloudAllocator's record and the one its CNI uses; the router has each via its node (the leader's BGP), the nodes none: a pod reaches a pod on another node through the router, seeing its pod IP", async () => {
    const record = (await new ResourceClient<V1ConfigMap>(cluster.admin, CONFIGMAPS).get(IPAM_RECORD.name, { namespace: IPAM_RECORD.namespace })).data ?? {};
    const cidrOf = new Map<string, string>();
    for (const n of cluster.nodes) {
      const node = await nodes.get(n.name);
      // The record's key is the machine's providerID escaped (docs/operations.md): static://ID.
      expect({ node: n.name, record: record[`static_3A_2F_2F${n.machineId}`] }).toEqual({ node: n.name, record: node.spec!.podCIDR });
      expect(node.spec!.podCIDRs).toEqual([node.spec!.podCIDR!]);
      cidrOf.set(n.name, node.spec!.podCIDR!);
    }
    expect(new Set(cidrOf.values()).size).toBe(cluster.nodes.length);

    // APP runs one pod per node: the CNI gave each an address of its node's CIDR.
    await podsReady(cluster.admin, NS, APP, REPLICAS, explain);
    const pods = (await cluster.admin.request<{ items: V1Pod[] }>({ method: 'GET', path: `/api/v1/namespaces/${NS}/pods`, query: { labelSelector: `app=${APP}` } })).items
      .filter((p) => !p.metadata!.deletionTimestamp && p.status?.podIP)
      .map((p) => ({ name: p.metadata!.name!, node: p.spec!.nodeName!, ip: p.status!.podIP! }));
    expect(pods.map((p) => p.node).sort()).toEqual(cluster.nodes.map((n) => n.name).sort());
    for (const p of pods) expect({ pod: p.name, inNodeCidr: inCidr(p.ip, cidrOf.get(p.node)!) }).toEqual({ pod: p.name, inNodeCidr: true });

    for (const n of cluster.nodes) {
      const cidr = cidrOf.get(n.name)!;
      await eventually(`the router's route to ${n.name}'s pod CIDR ${cidr} via ${n.ip}`, async () => Bun.deepEquals(await cluster.router.nextHops(cidr), [n.ip]), { timeoutMs: 30_000, explain });
    }
    const ipOf = (name: string) => cluster.nodes.find((n) => n.name === name)!.ip;
    for (const from of pods) {
      for (const to of pods.filter((p) => p.node !== from.node)) {
        const role = cluster.nodes.find((n) => n.name === from.node)!.role;
        // No route on the sender's node names the other node's CIDR: the cluster CIDR goes to the router, and so does this packet.
        expect(await cluster.lab.ip(role, '-4', 'route', 'show', 'root', cidrOf.get(to.node)!)).toBe('');
        const path = await cluster.lab.ip(role, '-4', 'route', 'get', to.ip);
        expect({ from: from.node, to: to.ip, via: /via (\S+)/.exec(path)?.[1] }).toEqual({ from: from.node, to: to.ip, via: ROUTER_IP });
        expect(path).not.toContain(ipOf(to.node));
        // The pod asks the other (its image has no curl: http-echo get); the answer names the other pod and the asker's own pod IP (no NAT, no overlay).
        const answer = await cluster.kubectl(['-n', NS, 'exec', from.name, '--', '/http-echo', 'get', `http://${to.ip}:${ECHO_PORT}/`]).catch((e: Error) => `failed: ${e.message}`);
        expect({ from: from.name, answer: answer.trim() }).toEqual({ from: from.name, answer: `${to.name} ${from.ip}` });
      }
    }
  }, 120_000);
});

/** One request every PROBE_MS from each client while a node dies. */
const PROBE_MS = 100;
/**
 * The figure for a dead node's BGP next hop: out of the router's kernel table within 1 s
 * of the fault (BFD 3 x 200 ms: 0.5-0.7 s measured), plus 200 ms for this loaded machine and the
 * table's sampling. Leader mode takes until the Node is NotReady (15-20 s here).
 */
const WITHDRAW_BOUND_MS = 1200;
/** The L2 takeover's bound (test/integration/l2-failover.test.ts: heartbeats miss 0.75-1.05 s, plus the takeover). */
const L2_TAKEOVER_BOUND_MS = 2000;

describe('a node dies', () => {
  test("its BGP next hop leaves the router within 1 s (BFD) and its L2 address moves, the clients' requests keep succeeding through the others; the Node goes NotReady, is deleted once its machine leaves the inventory, registers and is initialised again (with its machine's pod CIDR) when the machine comes back, and is a next hop again", async () => {
    // externalTrafficPolicy: Local, so that the live nodes' kube-proxy never sends a request to the
    // dead node's pod (with Cluster it would, until the Node is NotReady and its pods' endpoints go).
    await createLoadBalancer(cluster.admin, NS, LOCAL, { local: true, app: APP });
    await createLoadBalancer(cluster.admin, NS, LOCAL_ROUTED, { local: true, pool: BGP_POOL_NAME, app: APP });
    const l2 = await loadBalancerAddress(cluster.admin, NS, LOCAL, explain);
    const bgp = await loadBalancerAddress(cluster.admin, NS, LOCAL_ROUTED, explain);
    const routed = await loadBalancerAddress(cluster.admin, NS, ROUTED, explain);
    const everyNode = cluster.nodes.map((n) => n.ip).sort();
    for (const n of cluster.nodes) await eventually(`the router's BFD session with ${n.name} Up`, () => cluster.router.bfdUp(n.ip), { timeoutMs: 60_000, explain });
    for (const a of [bgp, routed]) await eventually(`${a} via every node`, async () => Bun.deepEquals(await cluster.router.nextHops(a), everyNode), { timeoutMs: 60_000, intervalMs: 250, explain });
    await eventually(`${l2} answered`, () => cluster.fetchFromClient(l2, SERVICE_PORT), { timeoutMs: 30_000, intervalMs: 100, explain });
    const ownerMac = /lladdr (\S+)/.exec(await cluster.lab.ip('client', 'neigh', 'show', l2, 'dev', 'eth0'))?.[1];
    const victim = cluster.nodes.find((n) => n.mac === ownerMac)!;
    expect(victim).toBeDefined();
    const live = cluster.nodes.filter((n) => n !== victim).map((n) => n.ip).sort();
    const victimCidr = (await nodes.get(victim.name)).spec!.podCIDR!;

    // The victim holds the L2 address and is a BGP next hop: both clients probe while it dies.
    const probers = await Promise.all([
      HttpProber.start(cluster.lab, 'client', `http://${l2}:${SERVICE_PORT}/`, PROBE_MS),
      HttpProber.start(cluster.lab, 'remote', `http://${bgp}:${SERVICE_PORT}/`, PROBE_MS),
    ]);
    let seen: ProbeResult[] = [];
    let withdrawalMs = Infinity;
    const faultAt = Date.now();
    try {
      const started = performance.now();
      const killing = cluster.killNode(victim.name); // its link down first, then its processes
      for (;;) {
        const hops = await cluster.router.nextHops(bgp);
        const elapsed = performance.now() - started; // read after the table: an upper bound
        if (!hops.includes(victim.ip)) {
          withdrawalMs = elapsed;
          break;
        }
        if (elapsed > 30_000) break;
        await Bun.sleep(10); // the sampling pace: it measures, it waits for nothing
      }
      await killing;
      // The requests go on for a while through the others.
      await Bun.sleep(3_000);
    } finally {
      seen = await Promise.all(probers.map((p) => p.stop()));
    }
    const [l2Probes, bgpProbes] = seen as [ProbeResult, ProbeResult];
    const failures = (r: ProbeResult) => `${r.failed} of ${r.sent} failed, sent at +${r.failedAt.map((t) => t - faultAt).join(', +') || '-'} ms (${r.errors.slice(0, 3).join('; ')})`;
    console.log(`[real cluster] ${victim.name} died (link down, then kubelet, containerd, kube-proxy, speaker killed): its BGP next hop out of the router's kernel table after ${withdrawalMs.toFixed(0)} ms; ` +
      `requests every ${PROBE_MS} ms: by BGP ${failures(bgpProbes)}; on L2 ${failures(l2Probes)}`);
    expect(withdrawalMs).toBeLessThan(WITHDRAW_BOUND_MS);
    // Every node's session is its own: the eTP Cluster service loses the same next hop, and only it.
    expect(await cluster.router.nextHops(bgp)).toEqual(live);
    expect(await cluster.router.nextHops(routed)).toEqual(live);
    // Failed: only the requests the router sent to the dead node before the withdrawal, and on L2 those before the takeover.
    const lateBgp = bgpProbes.failedAt.filter((t) => t > faultAt + withdrawalMs + PROBE_MS);
    const lateL2 = l2Probes.failedAt.filter((t) => t > faultAt + L2_TAKEOVER_BOUND_MS);
    expect({ lateBgp, lateL2 }).toEqual({ lateBgp: [], lateL2: [] });
    const newMac = /lladdr (\S+)/.exec(await cluster.lab.ip('client', 'neigh', 'show', l2, 'dev', 'eth0'))?.[1];
    expect(cluster.nodes.filter((n) => n !== victim).map((n) => n.mac)).toContain(newMac!);

    await eventually(`${victim.name} NotReady`, async () => (await nodes.get(victim.name)).status?.conditions?.find((c) => c.type === 'Ready')?.status !== 'True', { timeoutMs: 90_000, intervalMs: 500, explain });
    cluster.setInventory([victim.name]);
    await eventually(`${victim.name} deleted once its machine left the inventory`, async () => !(await nodes.list()).items.some((n) => n.metadata!.name === victim.name), { timeoutMs: 90_000, intervalMs: 500, explain });

    cluster.setInventory([]);
    await cluster.restartNode(victim.name);
    const restartedAt = performance.now();
    const back = await eventually(`${victim.name} registered and initialised again`, async () => {
      const n = await nodes.get(victim.name).catch(() => undefined);
      const ready = n?.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True');
      return n && ready && n.spec?.podCIDR && !(n.spec.taints ?? []).some((t) => t.key === UNINITIALIZED.key) ? n : undefined;
    }, { timeoutMs: 120_000, intervalMs: 250, explain });
    expect(back.spec!.providerID).toBe(`static://${victim.machineId}`);
    expect(back.status!.addresses).toEqual([{ type: 'InternalIP', address: victim.ip }, { type: 'Hostname', address: victim.name }]);
    // The CloudAllocator gives the machine its CIDRs again, though its Node was deleted: the router's route to them stays right.
    expect(back.spec!.podCIDR).toBe(victimCidr);
    // Its speaker announces again once its BFD session with the router is Up: the path back.
    await eventually(`${routed} via ${victim.name} again`, async () => Bun.deepEquals(await cluster.router.nextHops(routed), everyNode), { timeoutMs: 60_000, intervalMs: 100, explain });
    console.log(`[real cluster] ${victim.name} back: a next hop again ${(performance.now() - restartedAt).toFixed(0)} ms after its processes were started again`);
    expect(await cluster.router.bfdUp(victim.ip)).toBe(true);
  }, 300_000);
});

function inCidr(address: string, cidr: string): boolean {
  const [base, bits] = cidr.split('/');
  const size = 2 ** (32 - Number(bits));
  return Math.floor(toInt(address) / size) === Math.floor(toInt(base!) / size);
}
