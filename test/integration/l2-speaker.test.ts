import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { CoreV1Event, V1EndpointSlice, V1Node, V1Service } from '@kubernetes/client-node';
import { EVENTS, NODES, ResourceClient, SERVICES } from '../../src/kube/resources.ts';
import type { KubeTransport } from '../../src/kube/transport.ts';
import { electNode } from '../../src/net/l2/election.ts';
import { ENDPOINT_SLICES } from '../../src/kube/endpoint-slices.ts';
import { LOAD_BALANCER_IPS_ANNOTATION } from '../../src/lb/requests.ts';
import { ApiBridge } from '../harness/api-bridge.ts';
import { settledAuditLog } from '../harness/audit.ts';
import { CcmProcess } from '../harness/ccm-process.ts';
import { startControlPlane, type ControlPlane } from '../harness/control-plane.ts';
import { eventually } from '../harness/eventually.ts';
import { helmTemplate } from '../harness/helm.ts';
import { transportFor, writeKubeconfig } from '../harness/kubeconfig.ts';
import { L2Lab, failoverGap, NODES as ROLES, REQUEST_TIMEOUT_SECONDS, SERVICE_IPV4, SERVICE_IPV6, SERVICE_PORT, SIDE_IPV4, type Attempt, type NodeName } from '../harness/l2-lab.ts';
import { applyManifests } from '../harness/manifests.ts';
import { setReady, UNINITIALIZED } from '../harness/nodes.ts';
import type { LoggedProcess } from '../harness/processes.ts';

/**
 * edge-ccm alone on a single-switch site: the compiled controller (static provider) assigns the
 * addresses, and the compiled binary in `speaker` mode runs in each node's network namespace
 * (ip netns exec), under the Helm chart's speaker RBAC, against the real kube-apiserver. The API
 * server is reached through a Unix socket and a forwarder on each namespace's loopback
 * (harness/api-bridge.ts): nothing is routed in or out of the lab, which uses documentation
 * ranges only (harness/l2-lab.ts). The client's arping, ndisc6 and curl judge the result.
 */
const ROOT = resolve(import.meta.dir, '../..');
const BINARY = join(ROOT, 'dist/edge-ccm');
const ID = `l2s-${process.pid}`;
const NS = `edge-ccm-${ID}`;
const RBAC_NS = 'edge-ccm-l2-speaker';
const SPEAKER_SA = 'edge-ccm-speaker';
const SPEAKER_USER = `system:serviceaccount:${RBAC_NS}:${SPEAKER_SA}`;
/** In the LAN pool, never assigned: nobody may answer for it. */
const UNASSIGNED = '198.51.100.203';
const LOCAL_IPV4 = '198.51.100.202';
const TEST_TIMEOUT_MS = 180_000;

const k8sName = (role: NodeName) => `${ID}-${role}`;
const roleOf = (name: string) => name.slice(ID.length + 1) as NodeName;

function config(): string {
  const machine = (role: NodeName, n: number) => `    - id: ${ID}-m${n}
      nodeName: ${k8sName(role)}
      addresses:
        - { type: InternalIP, address: 198.51.100.${10 + n} }
        - { type: InternalIP, address: "2001:db8:1::${(10 + n).toString(16)}" }`;
  return `# written by test/integration/l2-speaker.test.ts
inventory:
  machines:
${ROLES.map((r, i) => machine(r, i + 1)).join('\n')}
loadBalancer:
  pools:
    - name: lan
      addresses: [198.51.100.200-198.51.100.203, "2001:db8:1::200-2001:db8:1::203"]
      namespaces: [${NS}]
      announce: l2
    - name: side
      addresses: [203.0.113.200-203.0.113.203]
      namespaces: [${NS}]
      announce: l2
      interfaces: [eth1]
`;
}

let cp: ControlPlane;
let admin: KubeTransport;
let nodes: ResourceClient<V1Node>;
let services: ResourceClient<V1Service>;
let slices: ResourceClient<V1EndpointSlice>;
let site: L2Lab;
let bridge: ApiBridge | undefined;
let ccm: CcmProcess | undefined;
let speakerArgs: string[];
const speakers = new Map<NodeName, LoggedProcess>();
/** Nodes whose speaker runs and whose link is up. */
const up = new Set<NodeName>(ROLES);
let startedAt = 0;

beforeAll(async () => {
  // Dual stack, so a LoadBalancer service can hold an IPv6 address (a documentation range, in the API server's memory only).
  cp = await startControlPlane({ extraApiServerFlags: ['--service-cluster-ip-range=10.0.0.0/16,2001:db8:ffff::/112'] });
  admin = transportFor(cp.adminKubeconfig);
  nodes = new ResourceClient<V1Node>(admin, NODES);
  services = new ResourceClient<V1Service>(admin, SERVICES);
  slices = new ResourceClient<V1EndpointSlice>(admin, ENDPOINT_SLICES);
  site = await L2Lab.build();
  bridge = await ApiBridge.start(site.lab, cp.server);
  for (const role of ROLES) await bridge.into(site.lab, role);

  // The speaker's identity and role, as the chart installs them.
  await admin.request({ method: 'POST', path: '/api/v1/namespaces', body: { apiVersion: 'v1', kind: 'Namespace', metadata: { name: RBAC_NS } } });
  await admin.request({ method: 'POST', path: '/api/v1/namespaces', body: { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS } } });
  await applyManifests(admin, helmTemplate({ release: 'l2', namespace: RBAC_NS, values: { speaker: { enabled: true, serviceAccount: { name: SPEAKER_SA } } }, showOnly: ['speaker-rbac.yaml'] }));
  const token = await cp.serviceAccountToken(RBAC_NS, SPEAKER_SA);
  const speakerKubeconfig = await writeKubeconfig(join(site.lab.dir, 'speaker.kubeconfig'), cp.server, cp.caPem, 'speaker', { token });
  const configPath = join(site.lab.dir, 'cloud-config.yaml');
  writeFileSync(configPath, config());
  const keyPath = join(site.lab.dir, 'liveness.key');
  writeFileSync(keyPath, randomBytes(32).toString('hex'), { mode: 0o600 });

  for (const role of ROLES) {
    await nodes.create({ apiVersion: 'v1', kind: 'Node', metadata: { name: k8sName(role), labels: { 'kubernetes.io/hostname': k8sName(role) } }, spec: { taints: [UNINITIALIZED] } });
    await setReady(nodes, k8sName(role), 'True');
  }
  ccm = CcmProcess.binary([
    '--cloud-provider=static', `--cloud-config=${configPath}`, `--kubeconfig=${cp.adminKubeconfig}`,
    '--secure-port=0', '--leader-elect=false', '--configure-cloud-routes=false',
  ]);
  for (const role of ROLES) {
    await eventually(`node ${role} initialised with its InternalIP (edge-ccm log:\n${ccm.logs().slice(-2000)})`, async () => {
      const n = await nodes.get(k8sName(role));
      return (n.status?.addresses ?? []).some((a) => a.type === 'InternalIP') && !(n.spec?.taints ?? []).some((t) => t.key === UNINITIALIZED.key);
    }, 60_000);
  }

  speakerArgs = ['speaker', `--cloud-config=${configPath}`, `--kubeconfig=${speakerKubeconfig}`, `--liveness-key-file=${keyPath}`, '--v=2'];
  startedAt = performance.now();
  for (const role of ROLES) await startSpeaker(role);
  for (const role of ROLES) await eventually(`speaker ${role} announcing`, () => speakers.get(role)!.logTail(200).includes('liveness warm-up over') || (!speakers.get(role)!.running && Promise.reject(new Error(speakers.get(role)!.logTail()))), 60_000);

  await createService('web', [SERVICE_IPV4, SERVICE_IPV6], { dualStack: true });
  await createService('side', [SIDE_IPV4]);
}, 400_000);

afterAll(async () => {
  for (const s of speakers.values()) await s.kill();
  await ccm?.stop();
  await bridge?.stop();
  await site?.destroy();
  await cp?.stop();
}, 120_000);

/** Lines of the speaker's log holding every one of `words`. */
function logLinesWith(role: NodeName, ...words: string[]): number {
  return speakers.get(role)!.logTail(100_000).split('\n').filter((l) => words.every((w) => l.includes(w))).length;
}

async function startSpeaker(role: NodeName): Promise<void> {
  speakers.set(role, site.lab.spawnLogged(role, `speaker-${role}-${Date.now()}`, [BINARY, ...speakerArgs, `--node-name=${k8sName(role)}`]));
}

async function createService(name: string, addresses: string[], opts: { dualStack?: boolean; local?: boolean } = {}): Promise<V1Service> {
  await services.create({
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name, namespace: NS, annotations: { [LOAD_BALANCER_IPS_ANNOTATION]: addresses.join(',') } },
    spec: {
      type: 'LoadBalancer',
      selector: { app: name },
      ports: [{ port: SERVICE_PORT, protocol: 'TCP' }],
      ...(opts.dualStack ? { ipFamilyPolicy: 'RequireDualStack', ipFamilies: ['IPv4', 'IPv6'] } : {}),
      ...(opts.local ? { externalTrafficPolicy: 'Local' } : {}),
    },
  }, { namespace: NS });
  return eventually(`service ${name} given ${addresses.join(', ')} (edge-ccm log:\n${ccm?.logs().slice(-2000)})`, async () => {
    const s = await services.get(name, { namespace: NS });
    const got = (s.status?.loadBalancer?.ingress ?? []).map((i) => i.ip);
    return addresses.every((a) => got.includes(a)) ? s : undefined;
  }, 60_000);
}

/** Every speaker's recent log, for a timeout's message (the election may differ from the one the test expects). */
const speakerLogs = () => [...speakers].map(([role, s]) => `speaker ${role}'s log:\n${s.logTail(3000)}`).join('\n');

/** The node every speaker should elect for `address` among the nodes that are up (and, for eTP=Local, given). */
const owner = (address: string, among: Iterable<NodeName> = up) => roleOf(electNode(address, [...among].map(k8sName))!);
const macOf = (role: NodeName, iface: 'eth0' | 'eth1' = 'eth0') => (iface === 'eth0' ? site.nodes[role].lanMac : site.nodes[role].sideMac);

async function metricsOf(role: NodeName): Promise<string> {
  const r = await site.lab.exec(role, ['curl', '-s', '--max-time', '2', 'http://127.0.0.1:7472/metrics']);
  return r.stdout;
}

/** The addresses `role`'s speaker says it announces (edge_ccm_l2_announcing). */
async function announcedBy(role: NodeName): Promise<string[]> {
  return [...(await metricsOf(role)).matchAll(/^edge_ccm_l2_announcing\{address="([^"]+)",interface="([^"]+)"[^}]*\} 1$/gm)].map((m) => `${m[2]}:${m[1]}`).sort();
}

/**
 * Waits until exactly the expected node's speaker announces `address` and every other is silent,
 * and the owner has sent all its takeover announcements (a probe would count them as answers).
 */
async function announcedOnlyBy(address: string, role: NodeName, iface = 'eth0'): Promise<void> {
  await eventually(`${address} announced by ${role} alone`, async () => {
    for (const r of up) {
      const has = (await announcedBy(r)).includes(`${iface}:${address}`);
      if (has !== (r === role)) return false;
    }
    return (await metricsOf(role)).includes('edge_ccm_l2_takeover_announcements_pending 0');
  }, 60_000);
}

describe('answering', () => {
  test("the client's ARP request and Neighbor Solicitation are answered by the elected node alone, with its MAC, and curl reaches its listener", async () => {
    const v4 = owner(SERVICE_IPV4);
    const v6 = owner(SERVICE_IPV6);
    await announcedOnlyBy(SERVICE_IPV4, v4);
    await announcedOnlyBy(SERVICE_IPV6, v6);
    expect(await site.arpAnswers(SERVICE_IPV4)).toEqual([macOf(v4)]);
    expect(await site.ndpAnswers(SERVICE_IPV6)).toEqual([macOf(v6)]);
    expect(await site.fetchFromClient(SERVICE_IPV4)).toBe(v4);
    expect(await site.fetchFromClient(SERVICE_IPV6)).toBe(v6);
    // Every speaker elects the same node, and says so in its metrics.
    for (const role of up) {
      expect(await metricsOf(role)).toContain(`edge_ccm_l2_elected_node{address="${SERVICE_IPV4}",node="${k8sName(v4)}",pool="lan"} 1`);
    }
  }, TEST_TIMEOUT_MS);

  test('the takeover is reported as an event on the service', async () => {
    const events = new ResourceClient<CoreV1Event>(admin, EVENTS);
    const v4 = owner(SERVICE_IPV4);
    let seen: CoreV1Event[] = [];
    const found = await eventually('an L2Announcing event on service web', async () => {
      seen = (await events.list({ namespace: NS, query: { fieldSelector: 'involvedObject.name=web' } })).items;
      return seen.find((e) => e.reason === 'L2Announcing' && e.message?.includes(SERVICE_IPV4));
    }, { timeoutMs: 60_000, explain: () => `events on web: ${JSON.stringify(seen.map((e) => `${e.metadata?.name} ${e.reason}: ${e.message}`))}\n${speakerLogs()}` });
    expect(found.message).toBe(`node ${k8sName(v4)} announces ${SERVICE_IPV4} on eth0`);
    expect(found.source?.component).toBe('edge-ccm-speaker');
  }, TEST_TIMEOUT_MS);
});

describe('silence', () => {
  test('no answer for an address of the pool that no service holds', async () => {
    await announcedOnlyBy(SERVICE_IPV4, owner(SERVICE_IPV4));
    expect(await site.arpAnswers(UNASSIGNED)).toEqual([]);
    expect(await site.ndpAnswers('2001:db8:1::203')).toEqual([]);
  }, TEST_TIMEOUT_MS);

  test("a pool listing eth1 is answered on eth1 only, though the address's own subnet is elsewhere", async () => {
    const side = owner(SIDE_IPV4);
    await announcedOnlyBy(SIDE_IPV4, side, 'eth1');
    expect(await site.arpAnswers(SIDE_IPV4, 'eth1')).toEqual([macOf(side, 'eth1')]);
    // The client asks on the LAN too: nobody answers there.
    expect(await site.arpAnswers(SIDE_IPV4, 'eth0')).toEqual([]);
  }, TEST_TIMEOUT_MS);
});

describe('probing a newly assigned address', () => {
  test('an address answered by a host outside the cluster is not announced, and a Warning names the MAC that answered', async () => {
    // A foreign host on the switch, holding two pool addresses on its own interface (as a
    // forgotten static configuration would).
    const foreign = { mac: '02:00:5e:01:00:77', ipv4: '198.51.100.201', ipv6: '2001:db8:1::201' };
    await site.lab.addNamespace('foreign');
    await site.lab.sysctl('foreign', { 'net.ipv6.conf.all.accept_dad': 0, 'net.ipv6.conf.default.accept_dad': 0, 'net.ipv6.conf.default.router_solicitations': 0 });
    await site.lab.addVeth({ from: 'sw', fromName: 'foreign-lan', to: 'foreign', toName: 'eth0', bridge: 'lan', mac: foreign.mac });
    await site.lab.ip('foreign', 'addr', 'add', `${foreign.ipv4}/24`, 'dev', 'eth0');
    await site.lab.ip('foreign', 'addr', 'add', `${foreign.ipv6}/64`, 'dev', 'eth0', 'nodad');
    expect(await site.arpAnswers(foreign.ipv4)).toEqual([foreign.mac]);
    // Its IPv6 address answers Neighbor Solicitations on the switch before the service exists
    // (the new port forwards, the snooping switch passes its solicited-node group).
    await eventually(`${foreign.ipv6} answered by the foreign host`, async () => (await site.ndpAnswers(foreign.ipv6)).includes(foreign.mac), 30_000);

    await createService('taken', [foreign.ipv4, foreign.ipv6], { dualStack: true });
    const events = new ResourceClient<CoreV1Event>(admin, EVENTS);
    for (const address of [foreign.ipv4, foreign.ipv6]) {
      const warning = await eventually(`an L2AddressInUse event for ${address} on service taken`, async () => {
        const list = await events.list({ namespace: NS, query: { fieldSelector: 'involvedObject.name=taken' } });
        return list.items.find((e) => e.reason === 'L2AddressInUse' && e.message?.includes(` ${address} `));
      }, { timeoutMs: 60_000, explain: speakerLogs });
      expect(warning.type).toBe('Warning');
      expect(warning.message).toBe(`station ${foreign.mac} answered node ${k8sName(owner(address))}'s probe for ${address} on eth0: a host outside the cluster uses the address; not announced while it answers (probed again, at most every 60 s; exclude it from the pool to move the service)`);
      expect(await metricsOf(owner(address))).toMatch(new RegExp(`edge_ccm_l2_conflicts_total\\{address="${address.replaceAll('.', '\\.')}"[^}]*\\} 1`));
    }
    // Held back: no node announces either address; the foreign host alone answers.
    for (const r of up) expect((await announcedBy(r)).filter((a) => a.endsWith(`:${foreign.ipv4}`) || a.endsWith(`:${foreign.ipv6}`))).toEqual([]);
    expect(await site.arpAnswers(foreign.ipv4)).toEqual([foreign.mac]);
    expect(await site.ndpAnswers(foreign.ipv6)).toEqual([foreign.mac]);
    // The services created after the speakers started were probed too, found free and announced.
    await announcedOnlyBy(SERVICE_IPV4, owner(SERVICE_IPV4));
    await services.delete('taken', { namespace: NS });
  }, TEST_TIMEOUT_MS);

  test('a station that answers one probe and no more (another speaker before the election settled) holds nothing: the address is announced', async () => {
    // The foreign host of the test above still holds 198.51.100.201; 'taken' is gone, so the
    // address is free to assign again and is probed afresh. It answers the first probe; then it
    // gives the address up, as a speaker that announced for some milliseconds at a start would.
    const address = '198.51.100.201';
    const elected = owner(address);
    const probing = `probing a newly assigned address before announcing it`;
    const before = logLinesWith(elected, probing, address);
    await createService('once', [address]);
    await eventually(`${elected} probing ${address}`, () => logLinesWith(elected, probing, address) > before, { timeoutMs: 60_000, intervalMs: 10, explain: speakerLogs });
    // The first probe goes out at once and is answered within a millisecond; the second 1 s later.
    await Bun.sleep(150);
    await site.lab.ip('foreign', 'addr', 'del', `${address}/24`, 'dev', 'eth0');
    await announcedOnlyBy(address, elected);
    expect(speakers.get(elected)!.logTail(100_000)).toContain('a station answered one probe and no more');
    expect(await site.arpAnswers(address)).toEqual([macOf(elected)]);
    await services.delete('once', { namespace: NS });
  }, TEST_TIMEOUT_MS);

  test('an address held back because a station answered is probed again, and announced once the station gives it up', async () => {
    // The foreign host of the tests above takes up a pool address no service held yet (the
    // silence test's); then, held back, it lets it go.
    const address = UNASSIGNED;
    const elected = owner(address);
    await site.lab.ip('foreign', 'addr', 'add', `${address}/24`, 'dev', 'eth0');
    await createService('freed', [address]);
    await eventually(`${elected} holding ${address} back`, () => logLinesWith(elected, 'in use by another station', address, 'probedAgainInSeconds') > 0, { timeoutMs: 60_000, explain: speakerLogs });
    for (const r of up) expect((await announcedBy(r)).filter((a) => a.endsWith(`:${address}`))).toEqual([]);
    await site.lab.ip('foreign', 'addr', 'del', `${address}/24`, 'dev', 'eth0');
    // The next probe round (5 s after the first verdict) finds it free.
    await announcedOnlyBy(address, elected);
    expect(speakers.get(elected)!.logTail(100_000)).toContain('an address found in use before is free now');
    expect(await site.arpAnswers(address)).toEqual([macOf(elected)]);
    await services.delete('freed', { namespace: NS });
  }, TEST_TIMEOUT_MS);
});

describe('externalTrafficPolicy: Local', () => {
  test('the announcement goes to a node with a ready endpoint, and moves when the endpoints move', async () => {
    await createService('local', [LOCAL_IPV4], { local: true });
    const slice = (nodeRoles: NodeName[]): V1EndpointSlice => ({
      apiVersion: 'discovery.k8s.io/v1',
      kind: 'EndpointSlice',
      metadata: { name: 'local-1', namespace: NS, labels: { 'kubernetes.io/service-name': 'local' } },
      addressType: 'IPv4',
      endpoints: nodeRoles.map((r, i) => ({ addresses: [`10.244.${i}.10`], nodeName: k8sName(r), conditions: { ready: true } })),
      ports: [{ port: SERVICE_PORT, protocol: 'TCP' }],
    });
    // No endpoint anywhere: nobody answers.
    await eventually('no node announcing the Local service without endpoints', async () => {
      for (const r of up) if ((await announcedBy(r)).includes(`eth0:${LOCAL_IPV4}`)) return false;
      return true;
    });
    expect(await site.arpAnswers(LOCAL_IPV4)).toEqual([]);
    // Endpoints on the node the hash would NOT pick among all three: the endpoint decides, not the hash.
    const first = ROLES.find((r) => r !== owner(LOCAL_IPV4))!;
    await slices.create(slice([first]), { namespace: NS });
    await announcedOnlyBy(LOCAL_IPV4, first);
    expect(await site.arpAnswers(LOCAL_IPV4)).toEqual([macOf(first)]);
    // A request (no listener holds this address: it fails) makes the client's kernel resolve it.
    await site.fetchFromClient(LOCAL_IPV4, REQUEST_TIMEOUT_SECONDS);
    expect(await site.clientNeighbour(LOCAL_IPV4)).toBe(macOf(first));
    const second = ROLES.find((r) => r !== first)!;
    const current = await slices.get('local-1', { namespace: NS });
    await slices.update({ ...slice([second]), metadata: { ...slice([second]).metadata, resourceVersion: current.metadata?.resourceVersion } }, { namespace: NS });
    await announcedOnlyBy(LOCAL_IPV4, second);
    expect(await site.arpAnswers(LOCAL_IPV4)).toEqual([macOf(second)]);
    await eventually(`the client's neighbour entry for ${LOCAL_IPV4} moved to ${second} by the gratuitous ARP`, async () => (await site.clientNeighbour(LOCAL_IPV4)) === macOf(second), 30_000);
  }, TEST_TIMEOUT_MS);
});

describe('failover', () => {
  /**
   * Kills the speaker announcing `address` (and takes its node off the switch) while the client
   * requests back to back; measures and prints the gap; the next node in the address's order
   * must take over and the client's neighbour entry follow.
   */
  async function failover(address: string): Promise<void> {
    const failed = owner(address);
    const next = owner(address, [...up].filter((r) => r !== failed));
    await announcedOnlyBy(address, failed);
    const attempts: Attempt[] = [];
    let failedAt = 0;
    // Bounded: 100 s of requests at most, then the test fails with what it saw.
    const loop = site.requestUntil(address, next, attempts, 300);
    await eventually(`two answers from ${failed} before it fails`, () => attempts.filter((a) => a.node === failed).length >= 2);

    await speakers.get(failed)!.kill();
    await site.lab.ip(failed, 'link', 'set', 'eth0', 'down');
    failedAt = performance.now();
    up.delete(failed);
    // The last survivor hears nobody: it cannot tell its own deafness from the others' death, and
    // waits for the Node objects' verdict (docs/networking/l2.md, limits). Given here at once, as
    // kube-controller-manager would after its grace period (40 s; it writes Unknown, False is the same to the election).
    if (up.size === 1) await setReady(nodes, k8sName(failed), 'False');
    await loop;

    const firstGood = attempts.find((a) => a.node === next)!;
    const gap = failoverGap(attempts, next, failedAt);
    console.log(
      `l2 speaker failover ${address}: ${failed} -> ${next}; ${Math.round(firstGood.end - failedAt)} ms from the SIGKILL to the first good request, ` +
        `gap ${gap} ms from first failed to first good (default liveness timeout and heartbeat interval); ${attempts.length} requests, ${attempts.filter((a) => !a.node).length} failed`,
    );
    const ipv6 = address.includes(':');
    // Its takeover announcements over (ndisc6 would count an unsolicited advertisement as a second answer).
    await announcedOnlyBy(address, next);
    expect(await (ipv6 ? site.ndpAnswers(address) : site.arpAnswers(address))).toEqual([macOf(next)]);
    expect(await site.clientNeighbour(address)).toBe(macOf(next));
    const takeover = await eventually('the new owner counting the takeover', async () =>
      new RegExp(`edge_ccm_l2_takeovers_total\\{address="${address.replaceAll('.', '\\.')}"[^}]*\\} [1-9]`).exec(await metricsOf(next)));
    expect(takeover).toBeTruthy();
    expect(await metricsOf(next)).toContain(`edge_ccm_l2_speakers_alive ${up.size}`);
  }

  test('SIGKILL of the announcing speaker (and its node leaving the switch): the others notice by heartbeat, one takes over, the client reaches it again', async () => {
    await failover(SERVICE_IPV4);
  }, TEST_TIMEOUT_MS);

  test('the same for an IPv6 address: the next node sends an unsolicited advertisement, the client reaches it again', async () => {
    await failover(SERVICE_IPV6);
  }, TEST_TIMEOUT_MS);
});

describe('the speaker RBAC (Helm chart) is least privilege', () => {
  test('every request the speakers made was allowed, and each grant of the role was used', async () => {
    const entries = (await settledAuditLog(cp.auditLogPath)).filter((e) => e.user?.username === SPEAKER_USER);
    const minutes = (performance.now() - startedAt) / 60_000;
    const denied = entries.filter((e) => e.responseStatus?.code === 403);
    expect(denied.map((e) => `${e.verb} ${e.requestURI}`)).toEqual([]);
    const used = new Set(entries.map((e) => `${e.verb} ${e.objectRef?.resource}`));
    // patch events is granted for a repeated event's count; nothing here repeats one.
    expect([...used].filter((u) => u !== 'patch events').sort()).toEqual(['create events', 'list endpointslices', 'list nodes', 'list services', 'watch endpointslices', 'watch nodes', 'watch services']);
    console.log(`l2 speaker API requests: ${entries.length} from ${speakers.size} speaker processes over ${minutes.toFixed(1)} min (restarts and events included): ${(entries.length / speakers.size / minutes).toFixed(1)} per speaker per minute`);
  }, TEST_TIMEOUT_MS);
});
