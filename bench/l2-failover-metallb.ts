/**
 * MetalLB's speaker (v0.15.2, L2 mode, memberlist on) under the L2 failover faults of issue 29,
 * judged as test/integration/l2-failover.test.ts judges edge-ccm's speakers (scripts/bench-l2-failover
 * --side=metallb runs this): the same site (harness/l2-lab.ts: three node namespaces on one switch,
 * the service address 198.51.100.200 on each node's lo with arp_ignore), the same faults
 * (harness/l2-faults.ts: SIGKILL, SIGTERM, link down, each followed by the node's return with a new
 * speaker) and the same raw-ARP prober every 100 ms (harness/arp-probes.ts). Per run: the fault to
 * the first probe the next node answered, the probes nobody answered, the probes two MACs answered;
 * then the handback to the returning speaker (MetalLB's election is a hash order, so the same node
 * is first again) the same way.
 *
 * MetalLB runs as its manifests run it, without the pods: its CRDs (the source tree's
 * config/crd/bases), an IPAddressPool and an L2Advertisement on eth0 in metallb-system, a speaker
 * Pod object per node (labels app=metallb,component=speaker, status.podIP the node's lan address:
 * memberlist finds its peers there) and a speaker process per node namespace with the Pod's name,
 * memberlist bound to the node's lan address with a secret key, the API server reached through
 * harness/api-bridge.ts. No MetalLB controller: the Service's status holds the address, as the
 * controller would write it, with a ready endpoint in an EndpointSlice.
 *
 *   bun bench/l2-failover-metallb.ts [--runs=3] [--metallb=~/.cache/edge-ccm/anchors/metallb-speaker]
 *     [--metallb-crds=~/.cache/edge-ccm/anchors/src/metallb/config/crd/bases]
 *
 * Needs root, the network tools and the control-plane binaries. Run under `flock /tmp/l2-lab.lock`.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { V1EndpointSlice, V1Node, V1Pod, V1Service } from '@kubernetes/client-node';
import { ENDPOINT_SLICES } from '../src/kube/endpoint-slices.ts';
import { NODES as NODE_RESOURCES, ResourceClient, SERVICES, type ResourceType } from '../src/kube/resources.ts';
import { ApiBridge } from '../test/harness/api-bridge.ts';
import { ArpProber, failoverFigures, percentile, type Probe } from '../test/harness/arp-probes.ts';
import { startControlPlane } from '../test/harness/control-plane.ts';
import { eventually } from '../test/harness/eventually.ts';
import { transportFor } from '../test/harness/kubeconfig.ts';
import { applyL2Fault, L2_FAULTS, restoreL2Node, type L2Fault } from '../test/harness/l2-faults.ts';
import { L2Lab, NODES, SERVICE_IPV4, SERVICE_PORT, type NodeName } from '../test/harness/l2-lab.ts';
import { applyManifests } from '../test/harness/manifests.ts';
import { setReady } from '../test/harness/nodes.ts';
import type { LoggedProcess } from '../test/harness/processes.ts';
import { anchors } from './anchors.ts';
import { stringOption as opt } from './args.ts';

const args = process.argv.slice(2);
const RUNS = Number(opt('runs', '3'));
const METALLB = opt('metallb', '') || anchors().metallbSpeaker;
const METALLB_CRDS = opt('metallb-crds', '') || anchors().metallbCrds;
if (!(RUNS >= 1)) throw new Error(`--runs=${opt('runs', '')}: a number of runs, 1 or more`);
if (!existsSync(METALLB)) throw new Error(`--metallb=${METALLB} is missing: give the speaker built by scripts/install-anchors.sh or another`);
if (!existsSync(METALLB_CRDS)) throw new Error(`--metallb-crds=${METALLB_CRDS} is missing: MetalLB's CRDs (config/crd/bases of its module)`);

const METALLB_NS = 'metallb-system';
const NS = 'l2f-metallb';
const MEMBERLIST_PORT = 7946;
const PODS: ResourceType = { apiPath: '/api/v1', plural: 'pods', namespaced: true };
/** A move that has not happened by then is reported as a failure of the run. */
const MOVE_TIMEOUT_MS = 60_000;

/** MetalLB's L2 election (speaker/layer2_controller.go, ShouldAnnounce): nodes sorted by sha256(node#ip), the first announces. */
function metallbOwner(among: readonly NodeName[]): NodeName {
  const key = (n: NodeName) => createHash('sha256').update(`${n}#${SERVICE_IPV4}`).digest('hex');
  return [...among].sort((a, b) => (key(a) < key(b) ? -1 : 1))[0]!;
}

const cp = await startControlPlane();
let site: L2Lab | undefined;
let bridge: ApiBridge | undefined;
const speakers = new Map<NodeName, LoggedProcess>();
try {
  const admin = transportFor(cp.adminKubeconfig);
  site = await L2Lab.build();
  bridge = await ApiBridge.start(site.lab, cp.server);
  for (const n of NODES) await bridge.into(site.lab, n);
  const lab = site;

  const nodes = new ResourceClient<V1Node>(admin, NODE_RESOURCES);
  const pods = new ResourceClient<V1Pod>(admin, PODS);
  const services = new ResourceClient<V1Service>(admin, SERVICES);
  const slices = new ResourceClient<V1EndpointSlice>(admin, ENDPOINT_SLICES);
  for (const ns of [NS, METALLB_NS]) await admin.request({ method: 'POST', path: '/api/v1/namespaces', body: { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } } });
  for (const n of NODES) {
    await nodes.create({ apiVersion: 'v1', kind: 'Node', metadata: { name: n, labels: { 'kubernetes.io/hostname': n } } });
    await setReady(nodes, n, 'True');
  }
  for (const f of readdirSync(METALLB_CRDS).filter((f) => f.endsWith('.yaml'))) await applyManifests(admin, readFileSync(join(METALLB_CRDS, f), 'utf8'));
  // The CRDs serve once established: applied until accepted.
  await eventually('MetalLB\'s pool and L2 advertisement accepted', async () => {
    await applyManifests(admin, [
      `apiVersion: metallb.io/v1beta1\nkind: IPAddressPool\nmetadata: {name: lan, namespace: ${METALLB_NS}}\nspec: {addresses: [${SERVICE_IPV4}/32]}`,
      `apiVersion: metallb.io/v1beta1\nkind: L2Advertisement\nmetadata: {name: lan, namespace: ${METALLB_NS}}\nspec: {ipAddressPools: [lan], interfaces: [eth0]}`,
    ].join('\n---\n'));
    return true;
  }, 60_000);
  // The speakers' Pods: each speaker reads its own at start, memberlist joins the others' podIPs.
  await applyManifests(admin, `apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: default, namespace: ${METALLB_NS}}`);
  for (const n of NODES) {
    const name = `speaker-${n}`;
    await pods.create({ apiVersion: 'v1', kind: 'Pod', metadata: { name, namespace: METALLB_NS, labels: { app: 'metallb', component: 'speaker' } }, spec: { nodeName: n, automountServiceAccountToken: false, containers: [{ name: 'speaker', image: 'speaker' }] } }, { namespace: METALLB_NS });
    const ip = lab.nodes[n].lanIPv4;
    await pods.patch(name, 'merge', { status: { phase: 'Running', podIP: ip, podIPs: [{ ip }], hostIP: ip, conditions: [{ type: 'Ready', status: 'True' }] } }, { namespace: METALLB_NS, subresource: 'status' });
  }
  const svc = await services.create({ apiVersion: 'v1', kind: 'Service', metadata: { name: 'web', namespace: NS }, spec: { type: 'LoadBalancer', selector: { app: 'web' }, ports: [{ port: SERVICE_PORT, protocol: 'TCP' }] } }, { namespace: NS });
  await services.patch(svc.metadata!.name!, 'merge', { status: { loadBalancer: { ingress: [{ ip: SERVICE_IPV4, ipMode: 'VIP' }] } } }, { namespace: NS, subresource: 'status' });
  await slices.create({
    apiVersion: 'discovery.k8s.io/v1', kind: 'EndpointSlice',
    metadata: { name: 'web-1', namespace: NS, labels: { 'kubernetes.io/service-name': 'web' } },
    addressType: 'IPv4',
    endpoints: NODES.map((n, i) => ({ addresses: [`10.244.${i}.10`], nodeName: n, conditions: { ready: true } })),
    ports: [{ port: SERVICE_PORT, protocol: 'TCP' }],
  }, { namespace: NS });

  const secretDir = join(lab.lab.dir, 'memberlist');
  mkdirSync(secretDir);
  writeFileSync(join(secretDir, 'secretkey'), crypto.randomUUID(), { mode: 0o600 });
  const startSpeaker = (n: NodeName) => speakers.set(n, lab.lab.spawnLogged(n, `metallb-${n}-${Date.now()}`, [
    METALLB, `--node-name=${n}`, `--namespace=${METALLB_NS}`, `--kubeconfig=${cp.adminKubeconfig}`, `--pod-name=speaker-${n}`,
    '--host=127.0.0.1', '--port=7472', '--log-level=info',
    `--ml-bindaddr=${lab.nodes[n].lanIPv4}`, `--ml-bindport=${MEMBERLIST_PORT}`, '--ml-labels=app=metallb,component=speaker', `--ml-secret-key-path=${secretDir}`,
  ]));
  for (const n of NODES) startSpeaker(n);

  const macOf = (n: NodeName) => lab.nodes[n].lanMac;
  const logs = () => [...speakers].map(([n, s]) => `speaker ${n}'s log:\n${s.logTail(15)}`).join('\n');
  let probeSeq = 0;
  /** Probes from a fresh prober until `until` holds (or MOVE_TIMEOUT_MS passes: thrown with the speakers' logs). */
  async function recording(what: string, ready: (p: Probe[]) => boolean, act: () => Promise<void>, until: (p: Probe[], at: number) => boolean): Promise<{ probes: Probe[]; at: number }> {
    const prober = ArpProber.start(lab, SERVICE_IPV4, `prober-${probeSeq++}`);
    let at = 0;
    let probes: Probe[] = [];
    try {
      await eventually(`before ${what}`, () => ready(prober.probes()), { timeoutMs: MOVE_TIMEOUT_MS, explain: logs });
      at = Date.now();
      await act();
      await eventually(what, () => until(prober.probes(), at), { timeoutMs: MOVE_TIMEOUT_MS, explain: logs });
    } finally {
      probes = await prober.stop();
    }
    return { probes, at };
  }
  const answeredBy = (probes: Probe[], n: NodeName, from = 0) => probes.filter((p) => p.t >= from && p.macs.includes(macOf(n))).length;

  const first = metallbOwner(NODES);
  await recording(`${SERVICE_IPV4} answered by ${first} alone (MetalLB's hash order)`, () => true, async () => {}, (p) => p.slice(-5).length === 5 && p.slice(-5).every((x) => x.macs.length === 1 && x.macs[0] === macOf(first)));

  interface Run { gapMs: number; unanswered: number; doubles: number; handbackMs: number; handbackUnanswered: number; handbackDoubles: number; exitCode?: number }
  const results = new Map<L2Fault, Run[]>();
  for (const kind of L2_FAULTS) {
    for (let run = 0; run < RUNS; run++) {
      const failed = metallbOwner(NODES);
      const next = metallbOwner(NODES.filter((n) => n !== failed));
      let exitCode: number | undefined;
      const fault = await recording(`${next} answering for 1 s after the ${kind} of ${failed}`, (p) => answeredBy(p, failed) >= 5, async () => {
        exitCode = await applyL2Fault(lab, failed, speakers.get(failed)!, kind);
      }, (p, at) => answeredBy(p, next, at) >= 10);
      const f = failoverFigures(fault.probes, fault.at, macOf(failed), macOf(next));
      await restoreL2Node(lab, failed, speakers.get(failed)!, kind);
      const back = await recording(`${failed} answering again for 1 s after its speaker returned`, (p) => answeredBy(p, next) >= 3, async () => void startSpeaker(failed), (p, at) => answeredBy(p, failed, at) >= 10);
      const h = failoverFigures(back.probes, back.at, macOf(next), macOf(failed));
      const takenBack = back.probes.find((p) => p.t >= back.at && p.macs.includes(macOf(failed)))!;
      const r: Run = { gapMs: f.gapMs!, unanswered: f.unanswered, doubles: f.doubles.length, handbackMs: takenBack.t - back.at, handbackUnanswered: h.unanswered, handbackDoubles: h.doubles.length, exitCode };
      /** When the probes two MACs answered were sent, from the fault or the speaker's start. */
      const when = (ps: Probe[], at: number) => (ps.length ? ` (at ${ps.map((p) => `${p.t - at >= 0 ? '+' : ''}${p.t - at}`).join(', ')} ms)` : '');
      (results.get(kind) ?? results.set(kind, []).get(kind)!).push(r);
      console.log(`l2 failover (metallb, ${kind}) ${failed} -> ${next}: ${r.gapMs} ms from the fault to the first probe ${next} answered, ${r.unanswered} probes unanswered, ${r.doubles} answered twice${when(f.doubles, fault.at)} (of ${fault.probes.length}); ` +
        `handback to the returning speaker ${r.handbackMs} ms after its start, ${r.handbackUnanswered} probes unanswered, ${r.handbackDoubles} answered twice${when(h.doubles, back.at)}${exitCode !== undefined ? `; exit code after SIGTERM ${exitCode}` : ''}`);
    }
    const r = results.get(kind)!;
    const gaps = r.map((x) => x.gapMs);
    const handbacks = r.map((x) => x.handbackMs);
    console.log(`l2 failover (metallb, ${kind}) over ${r.length} runs: gap p50 ${percentile(gaps, 50)} ms, max ${Math.max(...gaps)} ms; unanswered probes per run max ${Math.max(...r.map((x) => x.unanswered))}; ` +
      `probes answered twice ${r.reduce((a, x) => a + x.doubles, 0)}; handback p50 ${percentile(handbacks, 50)} ms, max ${Math.max(...handbacks)} ms after the speaker's start, ` +
      `unanswered probes at the handback in total ${r.reduce((a, x) => a + x.handbackUnanswered, 0)}, answered twice ${r.reduce((a, x) => a + x.handbackDoubles, 0)}`);
  }
} finally {
  for (const s of speakers.values()) await s.kill();
  await bridge?.stop();
  await site?.destroy();
  await cp.stop();
}
