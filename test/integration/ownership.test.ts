import { afterAll, beforeAll, expect, test } from 'bun:test';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { V1Node } from '@kubernetes/client-node';
import { sharedControlPlane, type ControlPlane } from '../harness/control-plane.ts';
import { CcmProcess, tempDir } from '../harness/ccm-process.ts';
import { eventually } from '../harness/eventually.ts';
import { transportFor } from '../harness/kubeconfig.ts';
import { NODES, ResourceClient } from '../../src/kube/resources.ts';
import { isNotFound } from '../../src/kube/errors.ts';
import { UNINITIALIZED } from '../harness/nodes.ts';

/**
 * Hybrid clusters: with ownership flags, nodes from another source are left alone by every
 * controller — not initialised, not deleted — while our own are handled as usual.
 */
const P = `own-${process.pid}`;
let cp: ControlPlane;
let ccm: CcmProcess | undefined;
let nodes: ResourceClient<V1Node>;
const notReady = { status: { conditions: [{ type: 'Ready', status: 'False', reason: 'KubeletDown', lastHeartbeatTime: new Date(), lastTransitionTime: new Date() }] } };

beforeAll(async () => {
  cp = await sharedControlPlane();
  nodes = new ResourceClient<V1Node>(transportFor(cp.adminKubeconfig), NODES);
}, 240_000);
afterAll(async () => {
  await ccm?.stop();
  for (const n of (await nodes.list()).items) if (n.metadata?.name?.startsWith(P)) await nodes.delete(n.metadata.name).catch(() => {});
});

test('nodes outside the providerID prefixes and label selector are never initialised or deleted', async () => {
  const dir = tempDir('edge-ccm-ownership-');
  // Every machine the fake is asked about is "not found", so anything managed and NotReady goes.
  writeFileSync(join(dir, 'fake.json'), JSON.stringify({
    autoMetadata: { instanceType: 't', zone: 'z', region: 'r' },
    existence: { [`${P}-foreign-id`]: 'not-found', [`${P}-ours-gone`]: 'not-found', [`${P}-ours-gone-later`]: 'not-found', [`${P}-unlabelled`]: 'not-found' },
  }));
  ccm = CcmProcess.fake([
    '--cloud-provider=fake', `--cloud-config=${join(dir, 'fake.json')}`, `--kubeconfig=${cp.adminKubeconfig}`,
    '--secure-port=0', '--configure-cloud-routes=false', `--leader-elect-resource-name=${P}`,
    '--managed-node-provider-id-prefixes=fake://', '--managed-node-selector=edge-ccm.io/managed=true', '--concurrent-node-syncs=1',
    '--node-monitor-period=300ms', '--node-deletion-grace-period=0s', '--node-deletion-not-found-threshold=1', '--node-deletion-breaker-max-share=1',
  ]);
  await ccm.waitForLog('successfully acquired lease');
  const managed = { 'edge-ccm.io/managed': 'true' };
  // No label: not initialised, kept. Ours, tainted: initialised. Foreign providerID, gone: kept.
  // Ours, gone: deleted. Created in this order on purpose, see below.
  await nodes.create({ metadata: { name: `${P}-unlabelled` }, spec: { taints: [UNINITIALIZED] } });
  await nodes.create({ metadata: { name: `${P}-ours`, labels: managed }, spec: { taints: [UNINITIALIZED] } });
  await nodes.create({ metadata: { name: `${P}-foreign-id`, labels: managed }, spec: { providerID: `hcloud://${P}` } });
  await nodes.create({ metadata: { name: `${P}-ours-gone`, labels: managed }, spec: { providerID: `fake://${P}-ours-gone` } });
  for (const n of [`${P}-unlabelled`, `${P}-foreign-id`, `${P}-ours-gone`]) await nodes.patch(n, 'strategic', notReady, { subresource: 'status' });

  const deleted = (name: string) => nodes.get(name).then(() => undefined, (e: unknown) => (isNotFound(e) ? true : Promise.reject(e)));
  // An absence is proven by what came after it: the one node worker (--concurrent-node-syncs=1)
  // takes nodes in the order they came, so ours is initialised only after unlabelled was seen.
  await eventually('our node initialised', async () => ((await nodes.get(`${P}-ours`)).spec?.providerID ? true : undefined));
  await eventually('our gone node deleted', () => deleted(`${P}-ours-gone`));
  // Lifecycle passes do not overlap: a node gone only after that deletion is deleted by a later
  // pass, so at least one whole pass has judged the foreign node, NotReady all along.
  await nodes.create({ metadata: { name: `${P}-ours-gone-later`, labels: managed }, spec: { providerID: `fake://${P}-ours-gone-later` } });
  await nodes.patch(`${P}-ours-gone-later`, 'strategic', notReady, { subresource: 'status' });
  await eventually('a later gone node deleted', () => deleted(`${P}-ours-gone-later`));
  const foreign = await nodes.get(`${P}-foreign-id`);
  expect(foreign.spec?.providerID).toBe(`hcloud://${P}`);
  const unlabelled = await nodes.get(`${P}-unlabelled`);
  expect(unlabelled.spec?.providerID).toBeUndefined();
  expect(unlabelled.spec?.taints?.some((t) => t.key === UNINITIALIZED.key)).toBe(true);
  expect(ccm.logs()).not.toContain(`node=${P}-foreign-id`);
  expect(ccm.logs()).not.toContain(`node=${P}-unlabelled`);
}, 60_000);
