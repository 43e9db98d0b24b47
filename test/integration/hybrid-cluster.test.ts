import { afterAll, beforeAll, expect, test } from 'bun:test';
import { rmSync } from 'node:fs';
import type { CoreV1Event, V1Node } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
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
import { startNodeTestCluster, type NodeTestCluster } from '../harness/node-cluster.ts';
import { UNINITIALIZED, kubeletNode, nodeExists, setReady } from '../harness/nodes.ts';

// Issue 37 against a real API server and the real providers: static machines and Proxmox VMs
// (the Proxmox test server) under one composite provider, and a node of a platform nobody here
// serves. Each node is initialised by its provider; the Proxmox API then goes dark: only its
// nodes' existence goes unknown and none is deleted, while a machine removed from the static
// inventory meanwhile has only its node deleted. The foreign node is never touched.

const PREFIX = `hyb-${process.pid}-`;
const GRACE_MS = 1_000;
const TOKEN_ID = 'ccm@pve!edge-ccm';
const TOKEN_SECRET = crypto.randomUUID();
const logger = createLogger({ write: (l) => process.env.HYB_DEBUG && console.error(l) });
const cleanups: (() => unknown)[] = [];
let cluster: NodeTestCluster | undefined;

beforeAll(async () => {
  cluster = await startNodeTestCluster(PREFIX, logger);
}, 240_000);

afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
  await cluster?.stop();
});

test('static + proxmox in one process: each initialises its own nodes; a Proxmox outage deletes nothing; a machine gone from the static inventory takes only its node; a foreign node is never touched', async () => {
  const { nodes, events, nodeInformer, broadcaster } = cluster!;
  const name = (s: string) => `${PREFIX}${s}`;
  const statics = ['s0', 's1', 's2'].map(name);
  const vms = ['p0', 'p1', 'p2'].map(name);
  const foreign = name('lxd0');
  const vmid = (i: number) => 501 + i;

  const dir = tempDir('edge-ccm-hybrid-');
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
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
  const cloud = new CompositeProvider([{ name: 'static', provider: staticProvider }, { name: 'proxmox', provider: proxmoxProvider }]);
  cleanups.push(() => cloud.close());

  // Kubelets waiting for a cloud provider (p1 says its platform), and an LXD node some other CCM initialised.
  await Promise.all([...statics, ...vms].map(async (n) => {
    const node = kubeletNode(n);
    if (n === vms[1]) node.metadata!.annotations = { [PLATFORM_ANNOTATION]: 'proxmox' };
    await nodes.create(node);
    await setReady(nodes, n, 'True');
  }));
  await nodes.create({ apiVersion: 'v1', kind: 'Node', metadata: { name: foreign, labels: { keep: 'me' } }, spec: { providerID: `lxd://${foreign}` } });
  await setReady(nodes, foreign, 'False');
  const foreignBefore = (await nodes.get(foreign)).metadata!.resourceVersion;

  const registry = new Registry();
  // As the app wires it (src/app/settings.ts): the ownership flags (the test's nodes) and the platforms served.
  const ours = new Set([...statics, ...vms, foreign]);
  const ctxFor = (component: string) => {
    const ctx = cluster!.context(component, cloud, [...ours], registry);
    return { ...ctx, isManagedNode: (n: V1Node) => cloud.servesNode(n) && ctx.isManagedNode(n) };
  };
  const stop = new AbortController();
  await cloud.initialize({ transport: cluster!.transport, logger, signal: stop.signal, registry, recorder: broadcaster.recorder('static,proxmox-cloud-provider') });
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
    [...statics, ...vms].every((n) => !!nodeInformer.store.get(n)?.spec?.providerID && !nodeInformer.store.get(n)?.spec?.taints?.some((t) => t.key === UNINITIALIZED.key)), { timeoutMs: 20_000, explain: () => JSON.stringify([...statics, ...vms].map((n) => [n, nodeInformer.store.get(n)?.spec])) });
  for (const n of statics) expect(nodeInformer.store.get(n)!.spec!.providerID).toBe(`static://${n}`);
  vms.forEach((n, i) => expect(nodeInformer.store.get(n)!.spec!.providerID).toBe(`proxmox://it/${vmid(i)}`));

  // Both judged, once each provider's answer is in.
  const metric = async (n: string, labels: Record<string, string>) =>
    (await registry.getSingleMetric(n)?.get())?.values.find((v) => Object.entries(labels).every(([k, val]) => v.labels[k] === val))?.value ?? 0;
  await eventually('both providers answered', async () =>
    (await metric('edge_ccm_instance_existence_answers_total', { answer: 'exists', provider: 'proxmox' })) >= 3 &&
    (await metric('edge_ccm_instance_existence_answers_total', { answer: 'exists', provider: 'static' })) >= 3);

  // The Proxmox API goes dark; p0 and s2 go NotReady; s2's machine leaves the static inventory.
  responder.beginOutage();
  cleanups.push(() => responder.endOutage());
  await setReady(nodes, vms[0]!, 'False');
  await setReady(nodes, statics[2]!, 'False');
  expect(staticProvider.reload(inventory(statics.slice(0, 2))).ok).toBe(true);
  const started = performance.now();

  await eventually(`${statics[2]} deleted`, async () => !(await nodeExists(nodes, statics[2]!)), { timeoutMs: 30_000 });
  await eventually('proxmox answers unknown', async () => (await metric('edge_ccm_instance_existence_answers_total', { answer: 'unknown', provider: 'proxmox' })) >= 3);
  // Well past the grace period with Proxmox dark: none of its nodes deleted.
  await eventually('three grace periods of the outage', () => performance.now() - started > 3 * GRACE_MS);
  for (const n of [...vms, ...statics.slice(0, 2), foreign]) expect(await nodeExists(nodes, n)).toBe(true);
  expect(await metric('edge_ccm_nodes_deleted_total', {})).toBe(1);
  const checks = Object.fromEntries(cloud.healthChecks().map((c) => [c.name, c.check]));
  expect(() => checks['cloud-provider-static']!()).not.toThrow();
  expect(() => checks['cloud-provider-proxmox']!()).toThrow(/proxmox provider cannot tell whether its machines exist/);

  // The foreign node: never written (same resourceVersion: no label, taint or status change of ours), no event about it.
  expect((await nodes.get(foreign)).metadata!.resourceVersion).toBe(foreignBefore);
  await broadcaster.flush();
  const about = (n: string) => events.list({ namespace: 'default', query: { fieldSelector: `involvedObject.name=${n}` } }).then((l) => l.items as CoreV1Event[]);
  expect(await about(foreign)).toEqual([]);
  expect((await about(statics[2]!)).map((e) => e.reason)).toContain('DeletingNode');
  expect((await about(vms[0]!)).map((e) => e.reason)).not.toContain('DeletingNode');
}, 120_000);
