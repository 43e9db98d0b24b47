import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { rmSync } from 'node:fs';
import type { CoreV1Event } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import { createProxmoxProvider } from '../../providers/proxmox/provider.ts';
import { createStaticProvider } from '../../providers/static/provider.ts';
import type { CloudProvider } from '../../src/cloud/types.ts';
import { CloudNodeLifecycleController, type LifecycleOptionsInput } from '../../src/controllers/nodelifecycle/index.ts';
import { createLogger } from '../../src/log.ts';
import { ProxmoxResponder } from '../fakes/proxmox-responder.ts';
import { tempDir } from '../harness/ccm-process.ts';
import { createCertificateAuthority, issueCertificate } from '../harness/certs.ts';
import { eventually } from '../harness/eventually.ts';
import { startNodeTestCluster, type NodeTestCluster } from '../harness/node-cluster.ts';
import { nodeExists, setReady } from '../harness/nodes.ts';

// Issue 11, item 1, against a real API server and the real providers: a provider answer that
// lists none of the machines (a Proxmox token that lost its ACL answers HTTP 200 with no VMs; a
// static inventory edited down to nothing) deletes no node, however long it lasts, and says so
// with a Warning event; once the other machines are listed again, a really gone one still goes.

const PREFIX = `nle-${process.pid}-`;
const GRACE_MS = 1_500;
const OPTIONS: LifecycleOptionsInput = { monitorPeriodMs: 200, gracePeriodMs: GRACE_MS, notFoundThreshold: 2, providerTimeoutMs: 2_000 };
const TOKEN_ID = 'ccm@pve!edge-ccm';
const TOKEN_SECRET = crypto.randomUUID();
const COUNT = 10;

let cluster: NodeTestCluster | undefined;
let nodes: NodeTestCluster['nodes'], events: NodeTestCluster['events'];
let nodeInformer: NodeTestCluster['nodeInformer'], broadcaster: NodeTestCluster['broadcaster'];
const logger = createLogger({ write: () => {} });
const cleanups: (() => unknown)[] = [];

beforeAll(async () => {
  cluster = await startNodeTestCluster(PREFIX, logger);
  ({ nodes, events, nodeInformer, broadcaster } = cluster);
}, 240_000);

afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
  await cluster?.stop();
});

/** `count` nodes with these providerIDs, the first NotReady and the others Ready; waits for the informer. */
async function createCluster(scenario: string, providerID: (i: number, name: string) => string): Promise<string[]> {
  const names = Array.from({ length: COUNT }, (_, i) => `${PREFIX}${scenario}-${i}`);
  await Promise.all(names.map(async (name, i) => {
    await nodes.create({ apiVersion: 'v1', kind: 'Node', metadata: { name }, spec: { providerID: providerID(i, name) } });
    await setReady(nodes, name, i === 0 ? 'False' : 'True');
  }));
  await eventually('the informer to see the nodes with their Ready conditions', () =>
    names.every((n, i) => nodeInformer.store.get(n)?.status?.conditions?.some((c) => c.type === 'Ready' && c.status === (i === 0 ? 'False' : 'True'))));
  return names;
}

function startController(provider: CloudProvider, names: string[]) {
  // Counts the controller's passes: one bulk existence call each.
  let passes = 0;
  const instances = provider.instances!;
  const cloud: CloudProvider = {
    ...provider,
    providerName: provider.providerName,
    instances: {
      instanceExists: (node, signal) => instances.instanceExists(node, signal),
      instanceShutdown: (node, signal) => instances.instanceShutdown(node, signal),
      instanceMetadata: (node, signal) => instances.instanceMetadata(node, signal),
      instancesExist: (list, signal) => {
        passes++;
        return instances.instancesExist!(list, signal);
      },
    },
  };
  const registry = new Registry();
  const ctx = cluster!.context('cloud-node-lifecycle-controller', cloud, names, registry);
  const abort = new AbortController();
  const run = new CloudNodeLifecycleController(ctx, OPTIONS).run(abort.signal);
  const stop = async () => {
    abort.abort();
    await run;
  };
  cleanups.push(stop);
  const metric = async (name: string, labels: Record<string, string> = {}) =>
    (await registry.getSingleMetric(name)?.get())?.values.find((v) => Object.entries(labels).every(([k, val]) => v.labels[k] === val))?.value ?? 0;
  return { metric, stop, passes: () => passes };
}

async function eventsFor(name: string, reason: string): Promise<CoreV1Event[]> {
  await broadcaster.flush();
  return (await events.list({ namespace: 'default', query: { fieldSelector: `involvedObject.name=${name},reason=${reason}` } })).items;
}

/**
 * Every node listed first, then none for well over the grace period and many passes: nothing is
 * deleted, the NotReady node gets the Warning event, the metrics say why. Then every machine but
 * the NotReady node's is listed again: that one answer is believed and the node goes.
 */
async function emptyAnswerScenario(names: string[], c: ReturnType<typeof startController>, listNone: () => void, listAllBut: (name: string) => void) {
  const [down] = names as [string];
  await eventually('every machine answered as existing', async () => (await c.metric('edge_ccm_instance_existence_answers_total', { answer: 'exists' })) >= COUNT);

  listNone();
  const [started, passesBefore] = [performance.now(), c.passes()];
  // Well past the grace period (a grace period and a pass more deleted the node before the fix), with many passes.
  await eventually('three grace periods of empty answers (or the node deleted)', async () =>
    performance.now() - started > 3 * GRACE_MS && (c.passes() >= passesBefore + 10 || !(await nodeExists(nodes, down))));
  for (const name of names) expect(await nodeExists(nodes, name)).toBe(true);
  expect(await c.metric('edge_ccm_nodes_deleted_total')).toBe(0);
  expect(await eventsFor(down, 'DeletingNode')).toEqual([]);
  const held = await eventually('the ProviderAnswerDistrusted event', async () => (await eventsFor(down, 'ProviderAnswerDistrusted'))[0]);
  expect(held.type).toBe('Warning');
  expect(held.message).toContain(`Not judging node ${down} gone: the cloud provider's answer listed none of the ${COUNT} managed nodes`);
  expect(await c.metric('edge_ccm_provider_answer_distrusted', { reason: 'empty' })).toBe(1);
  expect(await c.metric('edge_ccm_provider_answers_distrusted_total', { reason: 'empty' })).toBeGreaterThanOrEqual(10 * COUNT);

  // The rule is about the empty answer, not a blanket refusal: with the others listed again, the
  // NotReady node's missing machine is believed and, after the grace period, its node goes.
  listAllBut(down);
  await eventually(`${down} deleted`, async () => !(await nodeExists(nodes, down)));
  for (const name of names.slice(1)) expect(await nodeExists(nodes, name)).toBe(true);
  expect(await c.metric('edge_ccm_provider_answer_distrusted', { reason: 'empty' })).toBe(0);
}

describe('an empty provider answer deletes no node (real API server, real providers)', () => {
  test('proxmox: 10 nodes, one NotReady, every VM gone from /cluster/resources -> nothing deleted, Warning event', async () => {
    const vmid = (i: number) => 401 + i;
    const names = await createCluster('px', (i) => `proxmox://it/${vmid(i)}`);
    // HTTPS as a real pveproxy, with a certificate of a CA of the test's own.
    const dir = tempDir('edge-ccm-nle-');
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const ca = await createCertificateAuthority(dir, 'ca', 'pve-ca');
    const leaf = await issueCertificate(ca, dir, 'pve-ssl', { commonName: 'pve1', usage: 'server', ipAddresses: ['127.0.0.1'] });
    const responder = ProxmoxResponder.start({
      tokens: { [TOKEN_ID]: TOKEN_SECRET },
      vms: names.map((name, i) => ({ vmid: vmid(i), name, node: 'pve1', cores: 2, memoryMiB: 2048 })),
      tls: { cert: leaf.certPem, key: leaf.keyPem },
    });
    cleanups.push(() => responder.stop());
    const provider = createProxmoxProvider({
      config: ['clusters:', '  - region: it', `    url: ${responder.url}`, `    tokenId: ${TOKEN_ID}`, '    tokenSecretFile: /secrets/token',
        '    caFile: /secrets/ca.pem', '    timeoutSeconds: 1', '    cacheSeconds: 0.1', ''].join('\n'),
      configPath: undefined,
      logger,
      secrets: { readFile: (path) => (path === '/secrets/ca.pem' ? ca.certPem : TOKEN_SECRET), env: () => undefined },
    });
    cleanups.push(() => provider.close());
    const c = startController(provider, names);
    // What a token that lost its ACL sees: HTTP 200, `data: []`.
    await emptyAnswerScenario(names, c,
      () => names.forEach((_, i) => responder.removeVm(vmid(i))),
      (keepGone) => names.forEach((name, i) => name !== keepGone && responder.setVm({ vmid: vmid(i), name, node: 'pve1', cores: 2, memoryMiB: 2048 })));
    await c.stop();
  }, 120_000);

  test('static: the inventory edited down to zero machines (authoritative) -> nothing deleted, Warning event', async () => {
    const names = await createCluster('st', (_, name) => `static://${name}`);
    const inventory = (machines: string[]) => ['inventory:', '  authoritative: true', `  machines:${machines.length ? '' : ' []'}`,
      ...machines.map((id) => `    - id: ${id}`), ''].join('\n');
    const provider = createStaticProvider({ config: inventory(names), configPath: undefined, logger });
    cleanups.push(() => provider.close());
    const c = startController(provider, names);
    // reload() is what the file watcher calls with the edited file's text.
    const reload = (machines: string[]) => expect(provider.reload(inventory(machines)).ok).toBe(true);
    await emptyAnswerScenario(names, c, () => reload([]), (keepGone) => reload(names.filter((n) => n !== keepGone)));
    await c.stop();
  }, 120_000);
});
