import { afterAll, beforeAll, expect, test } from 'bun:test';
import { readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { V1Node, V1Service } from '@kubernetes/client-node';
import { startControlPlane, type ControlPlane } from '../harness/control-plane.ts';
import { CcmProcess, tempDir } from '../harness/ccm-process.ts';
import { applyManifests } from '../harness/manifests.ts';
import { transportFor, writeKubeconfig } from '../harness/kubeconfig.ts';
import { freeLoopbackPorts } from '../harness/ports.ts';
import { NODES, ResourceClient, SERVICES } from '../../src/kube/resources.ts';
import type { BunKubeTransport } from '../../src/kube/transport.ts';
import { eventually } from '../harness/eventually.ts';

/**
 * Least privilege, proven: edge-ccm runs every controller, leader election, events and
 * delegated auth under exactly deploy/kubernetes/rbac.yaml, and the API server's audit log
 * shows that its service account made every kind of request it needs and got no 403.
 */
const SA_USER = 'system:serviceaccount:kube-system:cloud-controller-manager';
const UNINITIALIZED = { key: 'node.cloudprovider.kubernetes.io/uninitialized', value: 'true', effect: 'NoSchedule' };

let cp: ControlPlane;
let admin: BunKubeTransport;
let ccm: CcmProcess | undefined;

/** eventually(), with edge-ccm's recent output in the failure. */
const until = <T>(what: string, probe: () => Promise<T | undefined>) =>
  eventually(what, probe).catch((e: Error) => {
    throw new Error(`${e.message}\n${ccm?.logs().slice(-3000)}`);
  });

beforeAll(async () => {
  cp = await startControlPlane();
  admin = transportFor(cp.adminKubeconfig);
}, 240_000);

afterAll(async () => {
  await ccm?.stop('SIGKILL');
  await cp?.stop();
});


test('every controller works under the shipped ClusterRole with no 403', async () => {
  await applyManifests(admin, readFileSync(resolve(import.meta.dir, '../../deploy/kubernetes/rbac.yaml'), 'utf8'));
  const dir = tempDir('edge-ccm-rbac-');
  const token = await cp.serviceAccountToken('kube-system', 'cloud-controller-manager');
  const kubeconfig = await writeKubeconfig(join(dir, 'ccm.yaml'), cp.server, cp.caPem, 'ccm', { token });
  const fakeConfig = join(dir, 'fake.json');
  writeFileSync(fakeConfig, JSON.stringify({ autoMetadata: { instanceType: 'fake.small', zone: 'z1', region: 'r1', externalIP: '203.0.113.7' } }));
  const [port] = await freeLoopbackPorts(1);

  ccm = CcmProcess.fake([
    '--cloud-provider=fake', `--cloud-config=${fakeConfig}`, `--kubeconfig=${kubeconfig}`,
    '--cluster-cidr=10.244.0.0/16', '--bind-address=127.0.0.1', `--secure-port=${port}`,
    '--leader-elect-lease-duration=3s', '--leader-elect-renew-deadline=2s', '--leader-elect-retry-period=500ms',
    '--node-monitor-period=300ms', '--route-reconciliation-period=1s',
    '--node-deletion-grace-period=0s', '--node-deletion-not-found-threshold=1', '--node-deletion-breaker-max-share=1',
  ]);
  await ccm.waitForLog('successfully acquired lease');

  const nodes = new ResourceClient<V1Node>(admin, NODES);
  const services = new ResourceClient<V1Service>(admin, SERVICES);
  // A kubelet with --cloud-provider=external registers with the uninitialized taint.
  for (const name of ['rbac-a', 'rbac-b']) {
    await nodes.create({ metadata: { name }, spec: { podCIDRs: [name === 'rbac-a' ? '10.244.1.0/24' : '10.244.2.0/24'], taints: [UNINITIALIZED] } });
    await nodes.patch(name, 'merge', { status: { addresses: [{ type: 'InternalIP', address: name === 'rbac-a' ? '10.1.0.1' : '10.1.0.2' }] } }, { subresource: 'status' });
  }
  await until('node initialised', async () => {
    const n = await nodes.get('rbac-a');
    return n.spec?.providerID && !n.spec.taints?.some((t) => t.key === UNINITIALIZED.key) && n.status?.addresses?.some((a) => a.type === 'ExternalIP') ? n : undefined;
  });
  await until('route condition', async () => {
    const n = await nodes.get('rbac-a');
    return n.status?.conditions?.some((c) => c.type === 'NetworkUnavailable' && c.reason === 'RouteCreated') ? n : undefined;
  });

  await services.create({ metadata: { name: 'rbac-lb', namespace: 'default' }, spec: { type: 'LoadBalancer', ports: [{ port: 80, protocol: 'TCP' }] } });
  await until('ingress', async () => {
    const s = await services.get('rbac-lb', { namespace: 'default' });
    return s.status?.loadBalancer?.ingress?.length ? s : undefined;
  });
  await services.delete('rbac-lb', { namespace: 'default' });
  await until('service gone (finalizer removed)', async () => services.get('rbac-lb', { namespace: 'default' }).then(() => undefined, () => true));

  // The machine behind rbac-b disappears and its node goes NotReady: the lifecycle controller deletes it.
  writeFileSync(fakeConfig, JSON.stringify({ autoMetadata: { instanceType: 'fake.small', zone: 'z1', region: 'r1' }, existence: { 'rbac-b': 'not-found' } }));
  await nodes.patch('rbac-b', 'strategic', { status: { conditions: [{ type: 'Ready', status: 'False', reason: 'KubeletDown', lastHeartbeatTime: new Date(), lastTransitionTime: new Date() }] } }, { subresource: 'status' });
  await until('node rbac-b deleted', async () => nodes.get('rbac-b').then(() => undefined, () => true));

  // Delegated auth: a token that is not system:masters goes through TokenReview and SubjectAccessReview.
  const viewer = readFileSync(cp.tokenKubeconfig('viewer'), 'utf8').match(/token: (\S+)/)?.[1];
  const res = await fetch(`https://127.0.0.1:${port}/metrics`, { headers: { authorization: `Bearer ${viewer}` }, tls: { rejectUnauthorized: false } });
  expect(res.status).toBe(403);

  expect(await ccm.stop('SIGTERM')).toBe(0);
  ccm = undefined;

  // The audit log is written asynchronously: wait for the lease release to appear.
  const entries = await until('audit entries', async () => {
    const lines = readFileSync(cp.auditLogPath, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
    const ours = lines.filter((e) => e.user?.username === SA_USER && e.stage === 'ResponseComplete');
    return ours.some((e) => e.verb === 'update' && e.objectRef?.resource === 'leases') ? ours : undefined;
  });
  const forbidden = entries.filter((e) => e.responseStatus?.code === 403).map((e) => `${e.verb} ${e.requestURI}`);
  expect(forbidden).toEqual([]);
  // The test proves something only if every kind of request really happened.
  const seen = new Set(entries.map((e) => `${e.verb} ${e.objectRef?.resource}${e.objectRef?.subresource ? '/' + e.objectRef.subresource : ''}`));
  for (const want of [
    'list nodes', 'watch nodes', 'patch nodes', 'patch nodes/status', 'delete nodes',
    'list services', 'watch services', 'patch services/status',
    'create events', 'create leases', 'update leases', 'get leases',
    'create tokenreviews', 'create subjectaccessreviews',
  ]) expect(seen).toContain(want);
}, 180_000);
