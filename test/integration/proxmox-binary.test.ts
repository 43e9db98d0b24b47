import { afterAll, beforeAll, expect, test } from 'bun:test';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { CoreV1Event, V1Node } from '@kubernetes/client-node';
import { isNotFound } from '../../src/kube/errors.ts';
import { EVENTS, NODES, ResourceClient } from '../../src/kube/resources.ts';
import { ProxmoxResponder } from '../fakes/proxmox-responder.ts';
import { CcmProcess, tempDir } from '../harness/ccm-process.ts';
import { type ControlPlane, sharedControlPlane } from '../harness/control-plane.ts';
import { eventually } from '../harness/eventually.ts';
import { replaceFile } from '../harness/files.ts';
import { transportFor } from '../harness/kubeconfig.ts';
import { nodeExists, setReady } from '../harness/nodes.ts';
import { ownNodes } from '../harness/own-nodes.ts';

// The compiled binary with --cloud-provider=proxmox against the real API server and a local
// Proxmox VE API: nodes are initialised from VMs, a stopped VM's node gets the shutdown taint,
// a destroyed VM's node goes only when the lifecycle safety rules allow it, and an API that
// goes away deletes nothing. Nodes are created by the test (no kubelet runs).

const PREFIX = `px-${process.pid}-`;
const TOKEN_ID = 'ccm@pve!edge-ccm';
const TOKEN_SECRET = crypto.randomUUID();
const SHUTDOWN_TAINT = 'node.cloudprovider.kubernetes.io/shutdown';
const GRACE = '3s';
const WAIT_MS = 60_000;
const own = ownNodes(() => nodes, 'edge-ccm-test/proxmox', PREFIX, WAIT_MS);
const { name, initialised, create: createNode } = own;

let cp: ControlPlane;
let nodes: ResourceClient<V1Node>;
let responder: ProxmoxResponder;
let ccm: CcmProcess | undefined;
let configPath: string;
let clusterLines: string[];

beforeAll(async () => {
  cp = await sharedControlPlane();
  nodes = new ResourceClient<V1Node>(transportFor(cp.adminKubeconfig), NODES);
  responder = ProxmoxResponder.start({
    tokens: { [TOKEN_ID]: TOKEN_SECRET },
    vms: [
      { vmid: 201, name: name('a'), node: 'pve1', cores: 4, memoryMiB: 8192, ipconfig: ['ip=10.30.0.1/24'] },
      { vmid: 202, name: name('stops'), node: 'pve2', cores: 2, memoryMiB: 4096, ipconfig: ['ip=10.30.0.2/24'] },
      { vmid: 203, name: name('destroyed'), node: 'pve1', cores: 2, memoryMiB: 2048, tags: ['instance-type.small'], ipconfig: ['ip=10.30.0.3/24'] },
      { vmid: 204, name: name('agent'), node: 'pve2', cores: 8, memoryMiB: 16384, agent: true, agentRunning: true, interfaces: { eth0: ['10.30.0.4', 'fd30::4'] } },
    ],
  });
  const dir = tempDir('edge-ccm-proxmox-it-');
  writeFileSync(join(dir, 'token'), `${TOKEN_SECRET}\n`, { mode: 0o600 });
  configPath = join(dir, 'proxmox.yaml');
  clusterLines = [
    'clusters:',
    '  - region: it-region',
    `    url: ${responder.url}`,
    '    allowInsecureHTTP: true',
    `    tokenId: ${TOKEN_ID}`,
    `    tokenSecretFile: ${join(dir, 'token')}`,
    '    timeoutSeconds: 1',
    '    cacheSeconds: 0.2',
    // Short, so the test sees the API's return soon after the outage.
    '    maxBackoffSeconds: 2',
  ];
  writeFileSync(configPath, [...clusterLines, ''].join('\n'));
  ccm = CcmProcess.binary([
    '--cloud-provider=proxmox', `--cloud-config=${configPath}`, `--kubeconfig=${cp.adminKubeconfig}`,
    '--secure-port=0', '--controllers=cloud-node,cloud-node-lifecycle', '--v=2',
    `--leader-elect-resource-name=proxmox-it-${process.pid}`, '--leader-elect-retry-period=500ms',
    own.selectorFlag,
    '--node-monitor-period=500ms', `--node-deletion-grace-period=${GRACE}`, '--node-deletion-not-found-threshold=3',
    // The breaker counts shares of managed nodes: with four nodes, one gone is 25%.
    '--node-deletion-breaker-max-share=1', '--node-lifecycle-provider-timeout=3s',
  ]);
  await ccm.waitForLog('successfully acquired lease', WAIT_MS);
}, 240_000);

afterAll(async () => {
  await ccm?.stop();
  responder?.stop();
  if (nodes) await own.removeAll();
});

test('nodes are initialised from their VMs: providerID, instance type, zone, region, addresses', async () => {
  const names = await Promise.all(['a', 'stops', 'destroyed', 'agent'].map(createNode));
  const [a, , destroyed, agent] = await Promise.all(names.map(initialised));
  expect(a!.spec?.providerID).toBe('proxmox://it-region/201');
  expect(a!.metadata?.labels).toMatchObject({
    'node.kubernetes.io/instance-type': '4VCPU-8GB',
    'topology.kubernetes.io/zone': 'pve1',
    'topology.kubernetes.io/region': 'it-region',
  });
  expect(a!.status?.addresses).toEqual([{ type: 'InternalIP', address: '10.30.0.1' }, { type: 'Hostname', address: name('a') }]);
  expect(destroyed!.metadata?.labels?.['node.kubernetes.io/instance-type']).toBe('small');
  // No static address in its config: the guest agent's answer.
  expect(agent!.status?.addresses).toEqual([
    { type: 'InternalIP', address: '10.30.0.4' },
    { type: 'InternalIP', address: 'fd30::4' },
    { type: 'Hostname', address: name('agent') },
  ]);
  expect(responder.requests.every((r) => r.auth === 'token')).toBe(true);
}, 120_000);

test('a stopped VM\'s NotReady node gets the shutdown taint, and loses it when Ready again', async () => {
  const n = name('stops');
  responder.updateVm(202, { status: 'stopped' });
  await setReady(nodes, n, 'False');
  await eventually('the shutdown taint', async () => ((await nodes.get(n)).spec?.taints ?? []).some((t) => t.key === SHUTDOWN_TAINT), WAIT_MS);
  expect(await nodeExists(nodes, n)).toBe(true);
  responder.updateVm(202, { status: 'running' });
  await setReady(nodes, n, 'True');
  await eventually('the shutdown taint removed', async () => !((await nodes.get(n)).spec?.taints ?? []).some((t) => t.key === SHUTDOWN_TAINT), WAIT_MS);
}, 120_000);

test('the API going away deletes nothing; a destroyed VM\'s node goes only after the grace period and threshold', async () => {
  const gone = name('destroyed');
  await Promise.all([name('a'), name('agent'), gone].map((n) => setReady(nodes, n, 'False')));

  // The Proxmox API stops answering: every NotReady node is "unknown", nothing is acted on.
  responder.beginOutage();
  responder.removeVm(203);
  const unknownLogs = () => ccm!.logs().split('\n').filter((l) => l.includes('cannot tell whether node exists') && l.includes(gone)).length;
  await eventually('several passes answered unknown', () => unknownLogs() >= 6, WAIT_MS);
  for (const n of [name('a'), name('agent'), gone, name('stops')]) expect(await nodeExists(nodes, n)).toBe(true);

  // The API is back and the VM is really gone: first held for the grace period, then deleted.
  responder.endOutage();
  await ccm!.waitForLog(new RegExp(`node not found in the cloud provider; waiting for the grace period and threshold.*${gone}`), WAIT_MS);
  expect(await nodeExists(nodes, gone)).toBe(true);
  await eventually('the destroyed VM\'s node deleted', async () => !(await nodeExists(nodes, gone)), WAIT_MS);
  expect(ccm!.logs()).toContain('deleting node since it is no longer present in cloud provider');
  // Its neighbours' VMs exist: they stay, NotReady or not.
  for (const n of [name('a'), name('agent'), name('stops')]) expect(await nodeExists(nodes, n)).toBe(true);
}, 180_000);

test('the config file is watched: a broken edit is refused with an event and changes nothing; a good one applies without a restart', async () => {
  const lease = `proxmox-it-${process.pid}`;
  // A typo: every problem is reported with its line, as a Warning event on edge-ccm's Lease.
  replaceFile(configPath, [...clusterLines, '    zoen: host', ''].join('\n'));
  const events = new ResourceClient<CoreV1Event>(transportFor(cp.adminKubeconfig), EVENTS);
  const rejected = await eventually('the CloudConfigRejected event', async () => (await events.list({
    namespace: 'kube-system', query: { fieldSelector: `involvedObject.kind=Lease,involvedObject.name=${lease},reason=CloudConfigRejected` },
  })).items[0], WAIT_MS);
  expect(rejected.type).toBe('Warning');
  expect(rejected.message).toContain(`${configPath}:${clusterLines.length + 1}: clusters[0].zoen: unknown key "zoen"`);

  // The last good config is still in force: a new VM's node is initialised as before.
  responder.setVm({ vmid: 205, name: name('late'), node: 'pve1', cores: 2, memoryMiB: 2048, ipconfig: ['ip=10.30.0.5/24'] });
  const late = await initialised(await createNode('late'));
  expect(late.metadata?.labels?.['node.kubernetes.io/instance-type']).toBe('2VCPU-2GB');

  // A good edit (another instance-type naming) applies to the next node, without a restart.
  replaceFile(configPath, [...clusterLines, 'instanceType:', '  format: "c{cores}-m{memoryGiB}"', ''].join('\n'));
  await ccm!.waitForLog('proxmox provider configuration loaded', WAIT_MS);
  responder.setVm({ vmid: 206, name: name('later'), node: 'pve2', cores: 4, memoryMiB: 6144, ipconfig: ['ip=10.30.0.6/24'] });
  const later = await initialised(await createNode('later'));
  expect(later.metadata?.labels?.['node.kubernetes.io/instance-type']).toBe('c4-m6');
  expect(ccm!.proc.exitCode).toBeNull();
}, 180_000);
