/**
 * The main job, end to end on this machine: a real local control plane (etcd + kube-apiserver),
 * three nodes registered the way kubelets with --cloud-provider=external register (uninitialized
 * taint), the compiled edge-ccm with the static provider, and LoadBalancer services. Shows the
 * result and keeps edge-ccm running until Ctrl-C, which stops everything it started.
 *   --scenario basic   (default) examples/inventory.yaml, one service given an external IP
 *   --scenario outage  what nobody else does: an inventory outage (the provider lists no machine
 *                      while every node is NotReady) deletes nothing; a machine really removed is
 *                      deleted alone; a pool running out leaves the next service pending with an event
 *   --scenario cluster real nodes instead (kubelets, containerd, kube-proxy, pods in network
 *                      namespaces; needs root): scripts/demo-cluster.ts
 *   --once             exit after showing the result (used by the tests)
 * edge-ccm's log goes to a file (its path is printed); it stays after the demo ends.
 */
import type { CoreV1Event, V1Node, V1Service } from '@kubernetes/client-node';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { startControlPlane } from '../test/harness/control-plane.ts';
import { transportFor } from '../test/harness/kubeconfig.ts';
import { freeLoopbackPorts } from '../test/harness/ports.ts';
import { eventually } from '../test/harness/eventually.ts';
import { LoggedProcess } from '../test/harness/processes.ts';
import { EVENTS, NODES, ResourceClient, SERVICES } from '../src/kube/resources.ts';
import { findKubectl } from './demo-kubectl.ts';

const root = resolve(import.meta.dir, '..');
const once = process.argv.includes('--once');
const scenarioArg = process.argv.indexOf('--scenario');
const scenario = scenarioArg >= 0 ? process.argv[scenarioArg + 1] : 'basic';
if (scenario !== 'basic' && scenario !== 'outage' && scenario !== 'cluster') {
  console.error(`--scenario: basic, outage or cluster, not ${scenario}`);
  process.exit(2);
}
if (scenario === 'cluster') {
  const { runClusterDemo } = await import('./demo-cluster.ts');
  process.exit(await runClusterDemo({ once }));
}
const binary = join(root, 'dist/edge-ccm');
if (!existsSync(binary)) {
  console.error(`${binary} is missing: run bash scripts/demo.sh (it builds it)`);
  process.exit(1);
}
const UNINITIALIZED = 'node.cloudprovider.kubernetes.io/uninitialized';
// What a reader of the node table would otherwise take for a fault of edge-ccm.
const NO_KUBELET_NOTE = [
  '  (No kubelet runs in this demo: the nodes are API objects only. Ready=Unknown because no kubelet',
  '   reports the Ready condition, and the node.kubernetes.io/not-ready taint is put on at registration',
  '   by the API server and taken off by kube-controller-manager once a kubelet reports Ready. Neither',
  '   is edge-ccm\'s: its work is the providerID, the labels, the addresses and the removed uninitialized taint.)',
].join('\n');
const DEMO_NODES = [
  { name: 'node-a', ip: '10.0.0.11', podCIDR: '10.244.1.0/24' },
  { name: 'node-b', ip: '10.0.0.12', podCIDR: '10.244.2.0/24' },
  { name: 'node-c', ip: '10.0.0.13', podCIDR: '10.244.3.0/24' },
];
// Not removed at the end: the log is there to be read afterwards.
const logDir = mkdtempSync(join(tmpdir(), 'edge-ccm-demo-'));
const logPath = join(logDir, 'edge-ccm.log');

console.log('== starting a local control plane (etcd + kube-apiserver on loopback)');
const cp = await startControlPlane();
let ccm: LoggedProcess | undefined;
let stopping = false;

/** Stops edge-ccm (SIGTERM: it releases its lease) and the control plane, once, and exits. */
const shutdown = async (code: number) => {
  if (stopping) return;
  stopping = true;
  console.log('\n== stopping edge-ccm and the control plane');
  if (ccm?.running) {
    process.kill(ccm.pid, 'SIGTERM'); // at Ctrl-C the terminal has sent it SIGINT already: the same stop
    const exited = await Promise.race([ccm.exited, Bun.sleep(60_000).then(() => undefined)]);
    if (exited === undefined) await ccm.kill();
  }
  if (ccm) console.log(`   edge-ccm stopped; its log: ${logPath}`);
  await cp.stop();
  process.exit(code);
};
process.on('SIGINT', () => void shutdown(0));
process.on('SIGTERM', () => void shutdown(0));

const log = () => (existsSync(logPath) ? readFileSync(logPath, 'utf8') : '');
async function waitForLog(text: string, timeoutMs = 60_000): Promise<void> {
  await eventually(`edge-ccm to log "${text}"`, () => {
    if (ccm && !ccm.running) throw new Error(`edge-ccm exited; its log: ${logPath}\n${ccm.logTail(20)}`);
    return log().includes(text);
  }, timeoutMs);
}

const quote = (s: string) => `'${s.replaceAll("'", "'\\''")}'`;

try {
  const admin = transportFor(cp.adminKubeconfig);
  const nodes = new ResourceClient<V1Node>(admin, NODES);
  const services = new ResourceClient<V1Service>(admin, SERVICES);
  const events = new ResourceClient<CoreV1Event>(admin, EVENTS);
  console.log(`   API server ${cp.server}, admin kubeconfig ${cp.adminKubeconfig}`);

  console.log('== registering nodes as kubelets with --cloud-provider=external do (uninitialized taint)');
  for (const n of DEMO_NODES) {
    await nodes.create({
      metadata: { name: n.name },
      spec: { podCIDR: n.podCIDR, podCIDRs: [n.podCIDR], taints: [{ key: UNINITIALIZED, value: 'true', effect: 'NoSchedule' }] },
    });
    await nodes.patch(n.name, 'merge', { status: { addresses: [{ type: 'InternalIP', address: n.ip }, { type: 'Hostname', address: n.name }] } }, { subresource: 'status' });
  }

  // The outage scenario's inventory: the same machines, authoritative (an unlisted node is "not
  // found"), and a pool of two addresses.
  const outageInventory = (machines: typeof DEMO_NODES) => [
    '# edge-ccm demo, scenario outage (written by scripts/demo.ts)',
    'inventory:',
    '  authoritative: true',
    '  defaults: { region: demo, zone: lab-1, instanceType: small-metal }',
    machines.length ? '  machines:' : '  machines: []',
    ...machines.map((m) => `    - { id: ${m.name}, addresses: [{ type: InternalIP, address: ${m.ip} }] }`),
    'loadBalancer:',
    '  pools:',
    '    - { name: demo-small, addresses: ["198.51.100.10-198.51.100.11"] }',
    '',
  ].join('\n');
  const inventory = scenario === 'basic' ? join(root, 'examples/inventory.yaml') : join(logDir, 'inventory.yaml');
  if (scenario === 'outage') writeFileSync(inventory, outageInventory(DEMO_NODES));

  const [port] = await freeLoopbackPorts(1);
  const started = performance.now();
  console.log(`== starting dist/edge-ccm with the static provider and ${scenario === 'basic' ? 'examples/inventory.yaml' : inventory}`);
  console.log(`   edge-ccm log: ${logPath}`);
  const lifecycleFlags = scenario === 'outage'
    // Short periods so the demo shows in seconds what takes minutes with the defaults; the breaker
    // allows one node of three.
    ? ['--node-monitor-period=1s', '--node-deletion-grace-period=5s', '--node-deletion-breaker-max-share=0.5']
    : [];
  ccm = LoggedProcess.spawn('edge-ccm', [
    binary, '--cloud-provider=static', `--cloud-config=${inventory}`, `--kubeconfig=${cp.adminKubeconfig}`,
    '--bind-address=127.0.0.1', `--secure-port=${port}`, '--configure-cloud-routes=false', ...lifecycleFlags,
  ], logDir);
  await waitForLog('successfully acquired lease');

  for (const n of DEMO_NODES) {
    await eventually(`${n.name} initialised`, async () => {
      const node = await nodes.get(n.name);
      return node.spec?.taints?.some((t) => t.key === UNINITIALIZED) ? undefined : node;
    });
  }
  console.log(`   all nodes initialised ${(performance.now() - started).toFixed(0)} ms after edge-ccm was started`);

  const printNodes = async () => {
    console.log('\nNODES');
    for (const n of (await nodes.list()).items) {
      const l = n.metadata?.labels ?? {};
      const addrs = (n.status?.addresses ?? []).map((a) => `${a.type}=${a.address}`).join(' ');
      const ready = n.status?.conditions?.find((c) => c.type === 'Ready')?.status ?? 'Unknown';
      const taints = (n.spec?.taints ?? []).map((t) => `${t.key}:${t.effect}`).join(',') || 'none';
      console.log(`  ${n.metadata?.name}  ${n.spec?.providerID}  type=${l['node.kubernetes.io/instance-type']}  zone=${l['topology.kubernetes.io/zone']}  region=${l['topology.kubernetes.io/region']}  ready=${ready}  taints=${taints}  ${addrs}`);
    }
    console.log(NO_KUBELET_NOTE);
  };
  const createService = async (name: string) =>
    services.create({ metadata: { name, namespace: 'default' }, spec: { type: 'LoadBalancer', ports: [{ name: 'http', port: 80, protocol: 'TCP', targetPort: 8080 }] } });
  const externalIP = (s: V1Service) => s.status?.loadBalancer?.ingress?.map((i) => i.ip).join(',');
  // Events about nodes go to the default namespace, as upstream's recorder puts them.
  const eventsOf = async (kind: string, name: string, reason: string) => (await events.list({
    namespace: 'default', query: { fieldSelector: `involvedObject.kind=${kind},involvedObject.name=${name},reason=${reason}` },
  })).items;

  if (scenario === 'basic') {
    console.log('== creating a LoadBalancer service default/demo-web');
    await createService('demo-web');
    const svc = await eventually('external IP', async () => {
      const s = await services.get('demo-web', { namespace: 'default' });
      return s.status?.loadBalancer?.ingress?.length ? s : undefined;
    });
    await printNodes();
    console.log('\nSERVICES');
    console.log(`  default/demo-web  type=LoadBalancer  external IP=${externalIP(svc)}`);
  } else {
    const setReady = async (name: string, status: 'True' | 'False') => {
      const now = new Date().toISOString();
      await nodes.patch(name, 'merge', { status: { conditions: [{ type: 'Ready', status, reason: status === 'True' ? 'KubeletReady' : 'KubeletStopped', message: 'set by the demo', lastHeartbeatTime: now, lastTransitionTime: now }] } }, { subresource: 'status' });
    };
    console.log('\n== 1. an outage: every node goes NotReady and the inventory lists no machine at all');
    for (const n of DEMO_NODES) await setReady(n.name, 'False');
    writeFileSync(inventory, outageInventory([]));
    const held = await eventually('ProviderAnswerDistrusted', async () => (await eventsOf('Node', 'node-a', 'ProviderAnswerDistrusted'))[0], 60_000);
    // Well past the grace period (5s) and the threshold (3 answers): nothing is deleted.
    await Bun.sleep(10_000); // a demonstration pause, not a wait for a condition
    const left = (await nodes.list()).items.map((n) => n.metadata?.name);
    console.log(`   after 10 s (twice the grace period): ${left.length} of 3 nodes still there (${left.join(', ')})`);
    console.log(`   Warning ProviderAnswerDistrusted on node-a: ${held.message}`);

    console.log('\n== 2. the inventory is back, without node-c (its machine was really removed); node-a and node-b are Ready again');
    writeFileSync(inventory, outageInventory(DEMO_NODES.filter((n) => n.name !== 'node-c')));
    for (const n of ['node-a', 'node-b']) await setReady(n, 'True');
    await eventually('node-c deleted', async () => !(await nodes.list()).items.some((n) => n.metadata?.name === 'node-c'), 60_000);
    const deleting = (await eventsOf('Node', 'node-c', 'DeletingNode'))[0];
    console.log(`   node-c deleted once the grace period passed: ${deleting?.message ?? '(event not found)'}`);
    await printNodes();

    console.log('\n== 3. the pool demo-small has two addresses; three LoadBalancer services ask for one');
    for (const name of ['web-1', 'web-2', 'web-3']) await createService(name);
    const withIP = await eventually('two services with an address', async () => {
      const list = await Promise.all(['web-1', 'web-2', 'web-3'].map((n) => services.get(n, { namespace: 'default' })));
      const got = list.filter((s) => externalIP(s));
      return got.length === 2 ? list : undefined;
    }, 60_000);
    const pending = withIP.find((s) => !externalIP(s))!;
    const failed = await eventually('the SyncLoadBalancerFailed event', async () => (await eventsOf('Service', pending.metadata!.name!, 'SyncLoadBalancerFailed'))[0], 60_000);
    console.log('\nSERVICES');
    for (const s of withIP) console.log(`  default/${s.metadata?.name}  type=LoadBalancer  external IP=${externalIP(s) ?? '<pending>'}`);
    console.log(`  Warning SyncLoadBalancerFailed on default/${pending.metadata?.name}: ${failed.message}`);
  }

  const token = readFileSync(cp.tokenKubeconfig('admin'), 'utf8').match(/token: (\S+)/)?.[1] ?? '';
  console.log(`\nedge-ccm is running (pid ${ccm.pid}); its log: ${logPath}`);
  console.log(`  health:  curl -k ${quote(`https://127.0.0.1:${port}/healthz?verbose`)}`);
  console.log(`  ready:   curl -k ${quote(`https://127.0.0.1:${port}/readyz`)}`);
  console.log(`  metrics: curl -k -H ${quote(`Authorization: Bearer ${token}`)} ${quote(`https://127.0.0.1:${port}/metrics`)}`);
  const kubectl = findKubectl();
  if (kubectl.command) console.log(`  kubectl: KUBECONFIG=${quote(cp.adminKubeconfig)} ${quote(kubectl.command)} get nodes,services,events -A   (${kubectl.note})`);
  else console.log(`  kubectl: ${kubectl.note}; then: KUBECONFIG=${quote(cp.adminKubeconfig)} kubectl get nodes,services,events -A`);
  if (once) await shutdown(0);
  console.log('Press Ctrl-C to stop everything.');
  const code = await ccm.exited;
  // Ctrl-C: the terminal's SIGINT reached edge-ccm too, and shutdown() reports the stop.
  if (!stopping) {
    console.error(`\nedge-ccm exited unexpectedly (code ${code}); the end of its log (${logPath}):\n${ccm.logTail(20)}`);
    await shutdown(1);
  }
} catch (e) {
  if (!stopping) {
    console.error(`demo failed: ${(e as Error).message}`);
    if (ccm) console.error(`edge-ccm's log: ${logPath}\n${ccm.logTail(20)}`);
    await shutdown(1);
  }
}
