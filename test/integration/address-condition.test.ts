import { afterAll, beforeAll, expect, test } from 'bun:test';
import { join } from 'node:path';
import type { V1Service } from '@kubernetes/client-node';
import { ResourceClient, SERVICES } from '../../src/kube/resources.ts';
import type { KubeTransport } from '../../src/kube/transport.ts';
import { ADDRESS_ASSIGNED_CONDITION, ASSIGNED_POOL_ANNOTATION } from '../../src/controllers/service/address-condition.ts';
import { readAuditLog, type AuditEntry } from '../harness/audit.ts';
import { CcmProcess, tempDir } from '../harness/ccm-process.ts';
import { sharedControlPlane, type ControlPlane } from '../harness/control-plane.ts';
import { eventually } from '../harness/eventually.ts';
import { replaceFile } from '../harness/files.ts';
import { transportFor } from '../harness/kubeconfig.ts';

/**
 * The AddressAssigned condition and the assigned-pool annotation against the real API server:
 * a pending service says why in one line of `kubectl describe`, the condition and annotation
 * travel on the status patch edge-ccm already makes (the audit log shows the writes and their
 * bodies), and a sync that changes nothing writes nothing.
 */

const ID = `addrcond-${process.pid}`;
const LABEL = { 'edge-ccm-test': ID };
const NS = 'default';

let cp: ControlPlane;
let admin: KubeTransport;
let services: ResourceClient<V1Service>;
let ccm: CcmProcess;

beforeAll(async () => {
  cp = await sharedControlPlane();
  admin = transportFor(cp.adminKubeconfig);
  services = new ResourceClient<V1Service>(admin, SERVICES);
  const config = join(tempDir('edge-ccm-addrcond-'), 'static.yaml');
  replaceFile(config, `loadBalancer:
  pools:
    - name: ${ID}-one
      addresses: [203.0.113.201]
      serviceSelector: edge-ccm-test=${ID}
`);
  ccm = CcmProcess.fake([
    '--cloud-provider=static', `--cloud-config=${config}`, `--kubeconfig=${cp.adminKubeconfig}`,
    '--secure-port=0', '--controllers=service', '--v=2', `--leader-elect-resource-name=${ID}`,
    '--leader-elect-lease-duration=3s', '--leader-elect-renew-deadline=2s', '--leader-elect-retry-period=500ms',
  ]);
  await ccm.waitForLog('load-balancer addresses rebuilt from service status', 60_000);
}, 240_000);

afterAll(async () => {
  const ours = async () => (await services.list({ namespace: NS, query: { labelSelector: `edge-ccm-test=${ID}` } })).items;
  for (const s of await ours().catch(() => [])) await services.delete(s.metadata!.name!, { namespace: NS }).catch(() => undefined);
  await eventually('our services gone', async () => (await ours()).length === 0, 60_000).catch(() => undefined);
  await CcmProcess.stopAll('SIGTERM');
}, 120_000);

const lb = (name: string): V1Service => ({
  metadata: { name, namespace: NS, labels: LABEL },
  spec: { type: 'LoadBalancer', ports: [{ port: 80, protocol: 'TCP' }] },
});

const condition = (s: V1Service) => s.status?.conditions?.find((c) => c.type === ADDRESS_ASSIGNED_CONDITION);

function statusWrites(name: string): AuditEntry[] {
  return readAuditLog(cp.auditLogPath).filter((e) =>
    e.verb === 'patch' && e.objectRef?.resource === 'services' && e.objectRef.subresource === 'status' && e.objectRef.name === name && e.objectRef.namespace === NS);
}

/** eventually()'s failure shows edge-ccm's recent output. */
const logs = { explain: () => ccm.logs().slice(-3000) };

test('assigned: condition True and the pool annotation, on the same patch as the ingress; no write when a sync changes nothing', async () => {
  const name = `${ID}-a`;
  await services.create(lb(name));
  const s = await eventually('condition Assigned', async () => {
    const got = await services.get(name, { namespace: NS });
    return condition(got)?.status === 'True' ? got : undefined;
  }, { timeoutMs: 60_000, ...logs });
  expect(condition(s)).toMatchObject({ reason: 'Assigned', message: `Assigned 203.0.113.201 from pool ${ID}-one` });
  expect(s.metadata!.annotations![ASSIGNED_POOL_ANNOTATION]).toBe(`${ID}-one`);
  expect(s.status!.loadBalancer!.ingress).toEqual([{ ip: '203.0.113.201', ipMode: 'VIP' }]);

  // Two writes: the finalizer (upstream writes it first), then ingress + condition + annotation in one.
  const writes = await eventually('both writes in the audit log', async () => {
    const w = statusWrites(name);
    return w.length >= 2 ? w : undefined;
  });
  expect(writes).toHaveLength(2);
  const body = writes[1]!.requestObject as { metadata: { annotations: Record<string, string> }; status: { loadBalancer: unknown; conditions: { type: string }[] } };
  expect(body.metadata.annotations[ASSIGNED_POOL_ANNOTATION]).toBe(`${ID}-one`);
  expect(body.status.loadBalancer).toEqual({ ingress: [{ ip: '203.0.113.201' }] });
  expect(body.status.conditions.map((c) => c.type)).toEqual([ADDRESS_ASSIGNED_CONDITION]);

  // A user's annotation edit makes the controller sync the service again (needsUpdate compares
  // annotations): it ensures, finds nothing changed, and writes nothing.
  const ensures = () => ccm.logs().split('\n').filter((l) => l.includes('Ensuring load balancer for service') && l.includes(`${NS}/${name}`)).length;
  const before = ensures();
  await services.patch(name, 'merge', { metadata: { annotations: { 'example.com/touched': '1' } } }, { namespace: NS });
  await eventually('another ensure of the service', async () => ensures() > before || undefined, { timeoutMs: 30_000, ...logs });
  expect(statusWrites(name)).toHaveLength(2);
}, 120_000);

test('pending: `kubectl describe` explains it in one line (condition False, reason and what to change)', async () => {
  const name = `${ID}-b`;
  await services.create(lb(name));
  const s = await eventually('condition PoolExhausted', async () => {
    const got = await services.get(name, { namespace: NS });
    return condition(got)?.status === 'False' ? got : undefined;
  }, { timeoutMs: 60_000, ...logs });
  expect(condition(s)).toMatchObject({
    reason: 'PoolExhausted',
    message: `Pool ${ID}-one exhausted: add addresses to it in the cloud config, or delete a LoadBalancer service that holds one`,
  });
  expect(s.metadata!.annotations?.[ASSIGNED_POOL_ANNOTATION]).toBeUndefined();
  expect(s.status?.loadBalancer?.ingress).toBeUndefined();
  // The first service goes: its address is free, and the pending one turns True.
  await services.delete(`${ID}-a`, { namespace: NS });
  const after = await eventually('condition Assigned after the address was freed', async () => {
    const got = await services.get(name, { namespace: NS });
    return condition(got)?.status === 'True' ? got : undefined;
  }, { timeoutMs: 120_000, ...logs });
  expect(after.metadata!.annotations![ASSIGNED_POOL_ANNOTATION]).toBe(`${ID}-one`);
}, 180_000);
