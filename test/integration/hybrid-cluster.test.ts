import { afterAll, beforeAll, expect, test } from 'bun:test';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import type { CoreV1Event, V1Node } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import { createLxdProvider } from '../../providers/lxd/provider.ts';
import { createProxmoxProvider } from '../../providers/proxmox/provider.ts';
import { createStaticProvider } from '../../providers/static/provider.ts';
import { CompositeProvider, PLATFORM_ANNOTATION } from '../../src/cloud/composite-provider.ts';
import { CloudNodeController } from '../../src/controllers/node/index.ts';
import { CloudNodeLifecycleController } from '../../src/controllers/nodelifecycle/index.ts';
import { createLogger } from '../../src/log.ts';
import { ProxmoxResponder } from '../fakes/proxmox-responder.ts';
import { tempDir } from '../harness/ccm-process.ts';
import { createCertificateAuthority, issueCertificate } from '../harness/certs.ts';
import { eventually } from '../harness/eventually.ts';
import { LxdDaemon } from '../harness/lxd-daemon.ts';
import { startNodeTestCluster, type NodeTestCluster } from '../harness/node-cluster.ts';
import { UNINITIALIZED, kubeletNode, nodeExists, setReady } from '../harness/nodes.ts';
import { ClosableSocketRelay } from '../harness/socket-relay.ts';

// Issue 37 against a real API server and the real providers: static machines, Proxmox VMs (the
// Proxmox test server) and LXD containers (the real daemon, test/harness/lxd-daemon.ts) under one
// composite provider, and a node of a platform nobody here serves (kubevirt). Each node is
// initialised by its provider; the LXD socket then goes away (and one of its instances is really
// deleted meanwhile): only the LXD nodes' existence goes unknown and none is deleted, while the
// other providers keep answering and a machine removed from the static inventory has only its
// node deleted. The foreign node is never touched.

const PREFIX = `hyb-${process.pid}-`;
const GRACE_MS = 1_000;
const TOKEN_ID = 'ccm@pve!edge-ccm';
const TOKEN_SECRET = crypto.randomUUID();
const logger = createLogger({ write: (l) => process.env.HYB_DEBUG && console.error(l) });
const cleanups: (() => unknown)[] = [];
let cluster: NodeTestCluster | undefined;
let lxd: LxdDaemon | undefined;
const dir = tempDir('edge-ccm-hybrid-');
const name = (s: string) => `${PREFIX}${s}`;
const containers = ['l0', 'l1', 'l2'].map(name);

beforeAll(async () => {
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const started = await Promise.allSettled([startNodeTestCluster(PREFIX, logger), LxdDaemon.start(join(dir, 'lxd'))]);
  if (started[0].status === 'fulfilled') cluster = started[0].value;
  if (started[1].status === 'fulfilled') lxd = started[1].value;
  if (lxd) cleanups.push(() => lxd!.stop());
  for (const r of started) if (r.status === 'rejected') throw r.reason;
  await Promise.all(containers.map((c, i) => lxd!.launch(c, 21 + i)));
}, 240_000);

afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
  await cluster?.stop();
}, 60_000);

test('static + proxmox + lxd in one process: each initialises its own nodes; the LXD socket gone deletes nothing and holds back no other provider; a machine gone from the static inventory takes only its node; a foreign node is never touched', async () => {
  const { nodes, events, nodeInformer, broadcaster } = cluster!;
  const statics = ['s0', 's1', 's2'].map(name);
  const vms = ['p0', 'p1', 'p2'].map(name);
  const foreign = name('kv0');
  const vmid = (i: number) => 501 + i;

  const ca = await createCertificateAuthority(dir, 'ca', 'pve-ca');
  const leaf = await issueCertificate(ca, dir, 'pve-ssl', { commonName: 'pve1', usage: 'server', ipAddresses: ['127.0.0.1'] });
  const responder = ProxmoxResponder.start({
    tokens: { [TOKEN_ID]: TOKEN_SECRET },
    vms: vms.map((n, i) => ({ vmid: vmid(i), name: n, node: 'pve1', cores: 2, memoryMiB: 2048 })),
    tls: { cert: leaf.certPem, key: leaf.keyPem },
  });
  cleanups.push(() => responder.stop());
  const inventory = (machines: string[]) => ['inventory:', '  authoritative: true', '  machines:', ...machines.map((id) => `    - id: ${id}`), ''].join('\n');
  const staticProvider = createStaticProvider({ config: inventory(statics), configPath: undefined, logger });
  const proxmoxProvider = createProxmoxProvider({
    config: ['clusters:', '  - region: it', `    url: ${responder.url}`, `    tokenId: ${TOKEN_ID}`, '    tokenSecretFile: /secrets/token',
      '    caFile: /secrets/ca.pem', '    timeoutSeconds: 5', '    cacheSeconds: 0.1', '    maxBackoffSeconds: 1', ''].join('\n'),
    configPath: undefined,
    logger,
    secrets: { readFile: (path) => (path === '/secrets/ca.pem' ? ca.certPem : TOKEN_SECRET), env: () => undefined },
  });
  // edge-ccm's own path to the LXD socket, which the test takes away below.
  const lxdSocket = new ClosableSocketRelay(join(dir, 'ccm-lxd.socket'), lxd!.socket);
  await lxdSocket.open();
  cleanups.push(() => lxdSocket.close());
  const lxdProvider = createLxdProvider({
    config: ['region: it', `socket: ${lxdSocket.path}`, 'timeoutSeconds: 1', 'cacheSeconds: 0.1', 'maxBackoffSeconds: 1', ''].join('\n'),
    configPath: undefined,
    logger,
  });
  const cloud = new CompositeProvider([
    { name: 'static', provider: staticProvider }, { name: 'proxmox', provider: proxmoxProvider }, { name: 'lxd', provider: lxdProvider },
  ]);
  cleanups.push(() => cloud.close());

  // Kubelets waiting for a cloud provider (p1 and l1 say their platform; the others are found by
  // asking the providers in order), and a KubeVirt node some other CCM initialised.
  const ownNodes = [...statics, ...vms, ...containers];
  await Promise.all(ownNodes.map(async (n) => {
    const node = kubeletNode(n);
    if (n === vms[1]) node.metadata!.annotations = { [PLATFORM_ANNOTATION]: 'proxmox' };
    if (n === containers[1]) node.metadata!.annotations = { [PLATFORM_ANNOTATION]: 'lxd' };
    await nodes.create(node);
    await setReady(nodes, n, 'True');
  }));
  await nodes.create({ apiVersion: 'v1', kind: 'Node', metadata: { name: foreign, labels: { keep: 'me' } }, spec: { providerID: `kubevirt://it/${foreign}` } });
  await setReady(nodes, foreign, 'False');
  const foreignBefore = (await nodes.get(foreign)).metadata!.resourceVersion;

  const registry = new Registry();
  // As the app wires it (src/app/settings.ts): the ownership flags (the test's nodes) and the platforms served.
  const ours = new Set([...ownNodes, foreign]);
  const ctxFor = (component: string) => {
    const ctx = cluster!.context(component, cloud, [...ours], registry);
    return { ...ctx, isManagedNode: (n: V1Node) => cloud.servesNode(n) && ctx.isManagedNode(n) };
  };
  const stop = new AbortController();
  await cloud.initialize({ transport: cluster!.transport, logger, signal: stop.signal, registry, recorder: broadcaster.recorder('static,proxmox,lxd-cloud-provider') });
  const runs = [
    new CloudNodeController(ctxFor('cloud-node-controller'), { workers: 2, nodeStatusUpdateFrequencyMs: 1_000 }).run(stop.signal),
    new CloudNodeLifecycleController(ctxFor('cloud-node-lifecycle-controller'), { monitorPeriodMs: 200, gracePeriodMs: GRACE_MS, notFoundThreshold: 2, providerTimeoutMs: 1_500 }).run(stop.signal),
  ];
  cleanups.push(async () => {
    stop.abort();
    await Promise.allSettled(runs);
  });

  // Each initialised by its provider.
  await eventually('every node initialised with its own provider\'s providerID', () =>
    ownNodes.every((n) => !!nodeInformer.store.get(n)?.spec?.providerID && !nodeInformer.store.get(n)?.spec?.taints?.some((t) => t.key === UNINITIALIZED.key)), { timeoutMs: 20_000, explain: () => JSON.stringify(ownNodes.map((n) => [n, nodeInformer.store.get(n)?.spec])) });
  for (const n of statics) expect(nodeInformer.store.get(n)!.spec!.providerID).toBe(`static://${n}`);
  vms.forEach((n, i) => expect(nodeInformer.store.get(n)!.spec!.providerID).toBe(`proxmox://it/${vmid(i)}`));
  for (const n of containers) expect(nodeInformer.store.get(n)!.spec!.providerID).toBe(`lxd://default/${n}`);
  // The address from the instance's state (its status is written apart from the providerID).
  const internalIP = (n: string) => nodeInformer.store.get(n)?.status?.addresses?.find((a) => a.type === 'InternalIP')?.address;
  await eventually('the LXD nodes\' addresses from their instances', () => containers.every((n, i) => internalIP(n) === `198.51.100.${21 + i}`),
    { explain: () => JSON.stringify(containers.map(internalIP)) });

  // All judged, once each provider's answer is in.
  const metric = async (n: string, labels: Record<string, string>) =>
    (await registry.getSingleMetric(n)?.get())?.values.find((v) => Object.entries(labels).every(([k, val]) => v.labels[k] === val))?.value ?? 0;
  const answers = (provider: string, answer: string) => metric('edge_ccm_instance_existence_answers_total', { answer, provider });
  await eventually('every provider answered', async () =>
    (await answers('static', 'exists')) >= 3 && (await answers('proxmox', 'exists')) >= 3 && (await answers('lxd', 'exists')) >= 3);

  // The LXD socket goes away (every open connection cut) and l2's instance is really deleted
  // meanwhile; l0, l2, p0 and s2 go NotReady; s2's machine leaves the static inventory.
  lxdSocket.close();
  await lxd!.lxc(['delete', '--force', containers[2]!]);
  await Promise.all([containers[0]!, containers[2]!, vms[0]!, statics[2]!].map((n) => setReady(nodes, n, 'False')));
  expect(staticProvider.reload(inventory(statics.slice(0, 2))).ok).toBe(true);
  const started = performance.now();
  const before = { static: await answers('static', 'exists'), proxmox: await answers('proxmox', 'exists'), lxdUnknown: await answers('lxd', 'unknown') };

  await eventually(`${statics[2]} deleted`, async () => !(await nodeExists(nodes, statics[2]!)), { timeoutMs: 30_000 });
  await eventually('lxd answers unknown', async () => (await answers('lxd', 'unknown')) >= before.lxdUnknown + 3);
  // Well past the grace period with LXD dark: none of its nodes deleted (not even l2, whose
  // instance is gone), while the other providers' answers kept coming.
  await eventually('three grace periods of the outage', () => performance.now() - started > 3 * GRACE_MS);
  for (const n of [...containers, ...vms, ...statics.slice(0, 2), foreign]) expect(await nodeExists(nodes, n)).toBe(true);
  expect(await answers('static', 'exists')).toBeGreaterThan(before.static);
  expect(await answers('proxmox', 'exists')).toBeGreaterThan(before.proxmox);
  expect(await metric('edge_ccm_nodes_deleted_total', {})).toBe(1);
  const checks = Object.fromEntries(cloud.healthChecks().map((c) => [c.name, c.check]));
  expect(() => checks['cloud-provider-static']!()).not.toThrow();
  expect(() => checks['cloud-provider-proxmox']!()).not.toThrow();
  expect(() => checks['cloud-provider-lxd']!()).toThrow(/lxd provider cannot tell whether its machines exist/);

  // The foreign node: never written (same resourceVersion: no label, taint or status change of ours), no event about it.
  expect((await nodes.get(foreign)).metadata!.resourceVersion).toBe(foreignBefore);
  await broadcaster.flush();
  const about = (n: string) => events.list({ namespace: 'default', query: { fieldSelector: `involvedObject.name=${n}` } }).then((l) => l.items as CoreV1Event[]);
  expect(await about(foreign)).toEqual([]);
  expect((await about(statics[2]!)).map((e) => e.reason)).toContain('DeletingNode');
  for (const n of [containers[0]!, containers[2]!, vms[0]!]) expect((await about(n)).map((e) => e.reason)).not.toContain('DeletingNode');
}, 120_000);
