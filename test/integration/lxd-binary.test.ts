import { afterAll, beforeAll, expect, test } from 'bun:test';
import { X509Certificate } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { connect, createServer, type Server } from 'node:net';
import { join } from 'node:path';
import type { V1Node } from '@kubernetes/client-node';
import { NODES, ResourceClient } from '../../src/kube/resources.ts';
import { CcmProcess, tempDir } from '../harness/ccm-process.ts';
import { type ControlPlane, sharedControlPlane } from '../harness/control-plane.ts';
import { eventually } from '../harness/eventually.ts';
import { transportFor } from '../harness/kubeconfig.ts';
import { LXD_BRIDGE_ADDRESS, LxdDaemon } from '../harness/lxd-daemon.ts';
import { nodeExists, setReady } from '../harness/nodes.ts';
import { ClosableSocketRelay, relay } from '../harness/socket-relay.ts';
import { ownNodes } from '../harness/own-nodes.ts';

// The compiled binary with --cloud-provider=lxd against the real API server and a real LXD
// daemon (Debian's 5.0, in namespaces of its own: test/harness/lxd-daemon.ts) with three
// unprivileged busybox containers: nodes initialised from the instances, a stopped one tainted
// shut down, its socket gone deletes nothing, a deleted one's node deleted after the grace
// period, the HTTPS endpoint with a client certificate, an untrusted certificate refused with a
// clear message. Nodes are created by the test (no kubelet runs).

const PREFIX = `lxd${process.pid}-`;
const SHUTDOWN_TAINT = 'node.cloudprovider.kubernetes.io/shutdown';
const WAIT_MS = 60_000;
const own = ownNodes(() => nodes, 'edge-ccm-test/lxd', PREFIX, WAIT_MS);
const { name, initialised, create: createNode } = own;

let cp: ControlPlane;
let nodes: ResourceClient<V1Node>;
let lxd: LxdDaemon;
let dir: string;
let ccm: CcmProcess | undefined;
let forwarder: ReturnType<typeof Bun.spawn> | undefined;
let tcpBridge: Server | undefined;
// The edge-ccm's own path to the socket, which the test can take away (test/harness/socket-relay.ts).
let socketView: ClosableSocketRelay;

function ccmArgs(config: string, id: string): string[] {
  return [
    '--cloud-provider=lxd', `--cloud-config=${config}`, `--kubeconfig=${cp.adminKubeconfig}`,
    '--secure-port=0', '--controllers=cloud-node,cloud-node-lifecycle', '--v=2',
    `--leader-elect-resource-name=lxd-it-${id}-${process.pid}`, '--leader-elect-retry-period=500ms',
    own.selectorFlag,
    '--node-monitor-period=500ms', '--node-deletion-grace-period=3s', '--node-deletion-not-found-threshold=3',
    '--node-deletion-breaker-max-share=1', '--node-lifecycle-provider-timeout=3s',
  ];
}

beforeAll(async () => {
  dir = tempDir('edge-ccm-lxd-it-');
  [cp, lxd] = await Promise.all([sharedControlPlane(), LxdDaemon.start(join(dir, 'daemon'))]);
  nodes = new ResourceClient<V1Node>(transportFor(cp.adminKubeconfig), NODES);
  await lxd.launch(name('a'), 11, { 'user.instance-type': 'edge-small', 'user.rack': 'r1' });
  await lxd.launch(name('stops'), 12, { 'limits.cpu': '2', 'limits.memory': '256MiB' });
  await lxd.launch(name('gone'), 13);
  // The edge-ccm's own path to the socket, a relay this test can take away with every open
  // connection (LXD's own hooks call back through the real one, which stays).
  socketView = new ClosableSocketRelay(join(dir, 'ccm-view.socket'), lxd.socket);
  await socketView.open();
  const config = join(dir, 'lxd.yaml');
  writeFileSync(config, [
    'region: it-region',
    `socket: ${socketView.path}`,
    'timeoutSeconds: 1',
    'cacheSeconds: 0.2',
    'maxBackoffSeconds: 2',
    'nodeRules:',
    '  - name: rack',
    '    nodeSelector: [{matchExpressions: [{key: tags, operator: In, values: ["user.rack=r1"]}]}]',
    '    labels: {example.com/rack: r1}',
    '',
  ].join('\n'));
  ccm = CcmProcess.binary(ccmArgs(config, 'unix'));
  await ccm.waitForLog('successfully acquired lease', WAIT_MS);
}, 240_000);

afterAll(async () => {
  await ccm?.stop();
  forwarder?.kill();
  await forwarder?.exited;
  tcpBridge?.close();
  socketView?.close();
  await lxd?.stop();
  if (nodes) await own.removeAll();
}, 60_000);

test('nodes are initialised from the instances: providerID, instance type, zone, region, addresses, rules', async () => {
  const [a, stops] = await Promise.all(['a', 'stops', 'gone'].map(async (s) => initialised(await createNode(s))));
  expect(a!.spec?.providerID).toBe(`lxd://default/${name('a')}`);
  // Not clustered: the zone is the server's name (the machine's host name).
  const serverName = JSON.parse((await lxd.lxc(['query', '/1.0'])).out).environment.server_name;
  expect(a!.metadata?.labels).toMatchObject({
    'node.kubernetes.io/instance-type': 'edge-small',
    'topology.kubernetes.io/zone': serverName,
    'topology.kubernetes.io/region': 'it-region',
    'example.com/rack': 'r1',
  });
  // Only eth0's global address: not lo, not the IPv6 link-local one.
  expect(a!.status?.addresses).toEqual([{ type: 'InternalIP', address: '198.51.100.11' }, { type: 'Hostname', address: name('a') }]);
  expect(stops!.metadata?.labels?.['node.kubernetes.io/instance-type']).toBe('2CPU-256MiB');
  expect(stops!.metadata?.labels?.['example.com/rack']).toBeUndefined();
}, 120_000);

test('a stopped instance\'s NotReady node gets the shutdown taint, and loses it when running and Ready again', async () => {
  const n = name('stops');
  await lxd.lxc(['stop', '--force', n]);
  await setReady(nodes, n, 'False');
  await eventually('the shutdown taint', async () => ((await nodes.get(n)).spec?.taints ?? []).some((t) => t.key === SHUTDOWN_TAINT), WAIT_MS);
  expect(await nodeExists(nodes, n)).toBe(true);
  await lxd.lxc(['start', n]);
  await setReady(nodes, n, 'True');
  await eventually('the shutdown taint removed', async () => !((await nodes.get(n)).spec?.taints ?? []).some((t) => t.key === SHUTDOWN_TAINT), WAIT_MS);
}, 120_000);

test('the socket gone deletes nothing; a deleted instance\'s node goes only after the grace period', async () => {
  const gone = name('gone');
  await Promise.all([name('a'), gone].map((n) => setReady(nodes, n, 'False')));
  socketView.close();
  await lxd.lxc(['delete', '--force', gone]);
  const unknownLogs = () => ccm!.logs().split('\n').filter((l) => l.includes('cannot tell whether node exists') && l.includes(gone)).length;
  await eventually('several passes answered unknown', () => unknownLogs() >= 4, WAIT_MS);
  for (const n of [name('a'), gone, name('stops')]) expect(await nodeExists(nodes, n)).toBe(true);

  await socketView.open();
  await ccm!.waitForLog(new RegExp(`node not found in the cloud provider; waiting for the grace period and threshold.*${gone}`), WAIT_MS);
  expect(await nodeExists(nodes, gone)).toBe(true);
  await eventually('the deleted instance\'s node deleted', async () => !(await nodeExists(nodes, gone)), WAIT_MS);
  for (const n of [name('a'), name('stops')]) expect(await nodeExists(nodes, n)).toBe(true);
}, 120_000);

/** The daemon's HTTPS endpoint (inside its namespace) at 127.0.0.1:PORT: a forwarder in the namespace, a bridge here. */
async function httpsEndpoint(): Promise<string> {
  const sock = join(dir, 'https.sock');
  const proc = Bun.spawn(['nsenter', '-t', String(lxd.pid), '-n', process.execPath, join(import.meta.dir, '..', 'fakes', 'unix-to-tcp-forwarder-main.ts'), sock, `${LXD_BRIDGE_ADDRESS}:8443`], { stdout: 'pipe', stderr: 'inherit' });
  forwarder = proc;
  const reader = proc.stdout.getReader();
  expect(new TextDecoder().decode((await reader.read()).value)).toContain('listening');
  tcpBridge = createServer((client) => relay(client, connect(sock)));
  await new Promise<void>((resolve) => tcpBridge!.listen(0, '127.0.0.1', resolve));
  return `https://127.0.0.1:${(tcpBridge.address() as { port: number }).port}`;
}

async function clientCertificate(base: string): Promise<{ cert: string; key: string }> {
  const cert = join(dir, `${base}.crt`);
  const key = join(dir, `${base}.key`);
  const p = Bun.spawn(['openssl', 'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '1', '-subj', `/CN=${base}`, '-keyout', key, '-out', cert], { stdout: 'ignore', stderr: 'pipe' });
  expect(await p.exited).toBe(0);
  return { cert, key };
}

test('the HTTPS endpoint with a trusted client certificate and the pinned server fingerprint; an untrusted certificate refused, saying so', async () => {
  await ccm!.stop();
  ccm = undefined;
  const url = await httpsEndpoint();
  const fingerprint = new X509Certificate(readFileSync(join(lxd.lxdDir, 'server.crt'))).fingerprint256;
  const trusted = await clientCertificate('trusted');
  const untrusted = await clientCertificate('untrusted');
  await lxd.lxc(['config', 'trust', 'add', trusted.cert]);
  await lxd.launch(name('late'), 14);
  const write = (file: string, c: { cert: string; key: string }) => {
    writeFileSync(file, [`region: it-region`, `url: ${url}`, `clientCertFile: ${c.cert}`, `clientKeyFile: ${c.key}`, `fingerprint: "${fingerprint}"`, 'timeoutSeconds: 2', ''].join('\n'));
    return file;
  };
  ccm = CcmProcess.binary(ccmArgs(write(join(dir, 'https.yaml'), trusted), 'https'));
  await ccm.waitForLog('successfully acquired lease', WAIT_MS);
  await ccm.waitForLog(/LXD daemon answers.*auth=trusted/, WAIT_MS);
  const late = await initialised(await createNode('late'));
  expect(late.spec?.providerID).toBe(`lxd://default/${name('late')}`);
  expect(late.status?.addresses?.[0]).toEqual({ type: 'InternalIP', address: '198.51.100.14' });
  await ccm.stop();

  ccm = CcmProcess.binary(ccmArgs(write(join(dir, 'wrong.yaml'), untrusted), 'wrong'));
  await ccm.waitForLog('LXD daemon does not trust this client', WAIT_MS);
  const n = await createNode('refused');
  await ccm.waitForLog(/HTTP 403.*the server does not trust the client certificate/, WAIT_MS);
  expect((await nodes.get(n)).spec?.providerID).toBeUndefined();
}, 150_000);
