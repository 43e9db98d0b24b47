import { afterAll, afterEach, beforeAll, expect, test } from 'bun:test';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { V1Service } from '@kubernetes/client-node';
import { ResourceClient, SERVICES } from '../../src/kube/resources.ts';
import type { KubeTransport } from '../../src/kube/transport.ts';
import { ApiProxy } from '../harness/api-proxy.ts';
import { CcmProcess, tempDir } from '../harness/ccm-process.ts';
import { sharedControlPlane, type ControlPlane } from '../harness/control-plane.ts';
import { eventually } from '../harness/eventually.ts';
import { transportFor } from '../harness/kubeconfig.ts';
import { leaseHolder } from '../harness/leases.ts';
import { createNamespace, deleteNamespace } from '../harness/namespaces.ts';

/**
 * Stopping a leader while the API server is slow (a proxy in front of the real one holds chosen
 * requests): no write of the old leadership term may land after the lease is released, or a new
 * leader's write could be overwritten by the old one's.
 */

const ID = `fence-${process.pid}`;
const NS = ID;

let cp: ControlPlane;
let admin: KubeTransport;
let services: ResourceClient<V1Service>;
let proxy: ApiProxy | undefined;

beforeAll(async () => {
  cp = await sharedControlPlane();
  admin = transportFor(cp.adminKubeconfig);
  services = new ResourceClient<V1Service>(admin, SERVICES);
  await createNamespace(admin, NS);
}, 240_000);

afterEach(async () => {
  await CcmProcess.stopAll();
  proxy?.stop();
  proxy = undefined;
});

afterAll(() => deleteNamespace(admin, NS));

test('a status write cut off by SIGTERM on a slow API: the lease is not released before it lands, it expires instead', async () => {
  proxy = ApiProxy.start(cp.adminKubeconfig);
  const dir = tempDir('edge-ccm-fence-');
  writeFileSync(join(dir, 'fake.json'), JSON.stringify({ ingressIP: '198.51.100.99' }));
  const ccm = CcmProcess.fake([
    '--cloud-provider=fake', `--cloud-config=${join(dir, 'fake.json')}`, `--kubeconfig=${proxy.kubeconfig(dir)}`,
    '--secure-port=0', '--controllers=service', `--leader-elect-resource-name=${ID}`,
    '--leader-elect-lease-duration=60s', '--leader-elect-renew-deadline=2s', '--leader-elect-retry-period=500ms',
    '--shutdown-grace-period=1s',
  ]);
  await ccm.waitForLog('Starting service controller');
  const leader = await leaseHolder(admin, ID);
  expect(leader).not.toBe('');

  // The API server is slow to commit this service's status writes: one it has received lands,
  // later, whether or not the client is still waiting for the answer.
  const statusPath = `/api/v1/namespaces/${NS}/services/slow/status`;
  const held = proxy.hold((method, path) => method === 'PATCH' && path === statusPath, { landsAnyway: true });
  await services.create({ metadata: { name: 'slow', namespace: NS }, spec: { type: 'LoadBalancer', ports: [{ port: 80, protocol: 'TCP' }] } });
  await eventually('a status write in flight', () => held.waiting() > 0);

  expect(await ccm.stop('SIGTERM'), ccm.logs()).toBe(0);
  // Gone, and its write not landed yet: the lease must still be the old leader's, or a new
  // leader could write in between and be overwritten by the old term's write.
  expect(await leaseHolder(admin, ID), ccm.logs()).toBe(leader);
  expect(ccm.logs()).toContain('not releasing the lease');

  held.release();
  await eventually('the held status write landed', () => proxy!.writes.some((w) => w.path.startsWith(statusPath)));
  const releasedAt = proxy.writes.findIndex((w) => w.path.includes(`/leases/${ID}`) && w.body.includes('"holderIdentity":""'));
  const landedAt = proxy.writes.findIndex((w) => w.path.startsWith(statusPath));
  expect(releasedAt === -1 || releasedAt > landedAt, JSON.stringify(proxy.writes.map((w) => `${w.method} ${w.path}`))).toBe(true);
}, 120_000);
