import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parse } from 'yaml';
import type { V1Node, V1Service } from '@kubernetes/client-node';
import { NODES, ResourceClient, SERVICES } from '../../src/kube/resources.ts';
import type { KubeTransport } from '../../src/kube/transport.ts';
import { DELETION_HELD_CONDITION } from '../../src/controllers/nodelifecycle/held-condition.ts';
import { ACKNOWLEDGE_NODE_DELETIONS_ANNOTATION } from '../../src/status/resources.ts';
import { CcmProcess, tempDir } from '../harness/ccm-process.ts';
import { sharedControlPlane } from '../harness/control-plane.ts';
import { eventually } from '../harness/eventually.ts';
import { replaceFile } from '../harness/files.ts';
import { transportFor } from '../harness/kubeconfig.ts';
import { applyManifests } from '../harness/manifests.ts';
import { setReady } from '../harness/nodes.ts';

/**
 * What kubectl shows of edge-ccm, against the real API server with the chart's CRDs: the
 * AddressPool objects (usage in `kubectl get` columns, Exhausted, a rejected config edit as
 * Invalid), the EdgeCCMStatus object (config state, breaker), a breaker acknowledged with
 * `kubectl annotate` on that object (the annotation removed once used), and each held node
 * saying why it is kept (condition edge-ccm.io/DeletionHeld).
 */

const ID = `cstatus-${process.pid}`;
const CRDS = resolve(import.meta.dir, '../../deploy/kubernetes/crds.yaml');
const API = '/apis/edge-ccm.io/v1alpha1';

let admin: KubeTransport;
let kubeconfig: string;

interface Table {
  columnDefinitions: { name: string }[];
  rows: { cells: unknown[]; object: { metadata: { name: string } } }[];
}

/**
 * What `kubectl get` prints: the API server's Table of the CRD's additionalPrinterColumns (the
 * Accept header kubectl sends), with the admin kubeconfig's client certificate.
 */
async function kubectlGet(plural: string, name: string): Promise<Record<string, unknown>> {
  const kc = parse(readFileSync(kubeconfig, 'utf8')) as { clusters: { cluster: { server: string; 'certificate-authority-data': string } }[]; users: { user: Record<string, string> }[] };
  const pem = (b64: string) => Buffer.from(b64, 'base64').toString('utf8');
  const user = kc.users[0]!.user;
  const res = await fetch(`${kc.clusters[0]!.cluster.server}${API}/${plural}/${name}`, {
    headers: { accept: 'application/json;as=Table;v=v1;g=meta.k8s.io' },
    tls: { ca: pem(kc.clusters[0]!.cluster['certificate-authority-data']), cert: pem(user['client-certificate-data']!), key: pem(user['client-key-data']!) },
  });
  if (!res.ok) throw new Error(`GET ${plural}/${name} as a Table: ${res.status} ${await res.text()}`);
  const table = (await res.json()) as Table;
  const row = table.rows[0]!;
  return Object.fromEntries(table.columnDefinitions.map((c, i) => [c.name, row.cells[i]]));
}

const get = <T>(plural: string, name: string) => admin.request<T>({ method: 'GET', path: `${API}/${plural}/${name}` });
type Cond = { type: string; status: string; reason: string; message: string };
const cond = (o: { status?: { conditions?: Cond[] } }, type: string) => o.status?.conditions?.find((c) => c.type === type);

beforeAll(async () => {
  const cp = await sharedControlPlane();
  admin = transportFor(cp.adminKubeconfig);
  kubeconfig = cp.adminKubeconfig;
  await applyManifests(admin, readFileSync(CRDS, 'utf8'));
  await eventually('the edge-ccm.io CRDs served', () => admin.request({ method: 'GET', path: `${API}/addresspools` }).then(() => true, () => undefined));
}, 240_000);

afterAll(async () => {
  await CcmProcess.stopAll('SIGTERM');
  const services = new ResourceClient<V1Service>(admin, SERVICES);
  for (const s of (await services.list({ namespace: 'default', query: { labelSelector: `edge-ccm-test=${ID}` } })).items) {
    await services.patch(s.metadata!.name!, 'merge', { metadata: { finalizers: null } }, { namespace: 'default' }).catch(() => undefined);
    await services.delete(s.metadata!.name!, { namespace: 'default' }).catch(() => undefined);
  }
  const nodes = new ResourceClient<V1Node>(admin, NODES);
  for (const n of (await nodes.list({ query: { labelSelector: `edge-ccm-test=${ID}` } })).items) await nodes.delete(n.metadata!.name!).catch(() => undefined);
}, 120_000);

const common = (lease: string) => [
  `--kubeconfig=${kubeconfig}`, '--secure-port=0', `--leader-elect-resource-name=${lease}`,
  '--leader-elect-lease-duration=3s', '--leader-elect-renew-deadline=2s', '--leader-elect-retry-period=500ms',
];

describe('AddressPool objects (static provider)', () => {
  const lease = `${ID}-pools`;
  const pool = `${ID}-web`;
  let config: string;
  let ccm: CcmProcess;
  const text = (extra = '') => `loadBalancer:
  pools:
    - name: ${pool}
      addresses: [203.0.113.216-203.0.113.217]
      serviceSelector: edge-ccm-test=${ID}
${extra}`;

  beforeAll(async () => {
    config = join(tempDir('edge-ccm-cstatus-'), 'static.yaml');
    replaceFile(config, text());
    ccm = CcmProcess.fake(['--cloud-provider=static', `--cloud-config=${config}`, '--controllers=service', ...common(lease)]);
    await ccm.waitForLog('load-balancer addresses rebuilt from service status', 60_000);
  }, 120_000);

  /** eventually()'s failure shows edge-ccm's recent output. */
  const logs = { explain: () => ccm.logs().slice(-3000) };

  test('kubectl get shows the usage; a full pool is Exhausted; the services holding addresses are listed', async () => {
    const services = new ResourceClient<V1Service>(admin, SERVICES);
    const svc = (name: string): V1Service => ({ metadata: { name, namespace: 'default', labels: { 'edge-ccm-test': ID } }, spec: { type: 'LoadBalancer', ports: [{ port: 80, protocol: 'TCP' }] } });
    await services.create(svc(`${ID}-a`));
    const one = await eventually('one address used', async () => {
      const row = await kubectlGet('addresspools', pool).catch(() => undefined);
      return row?.['IPv4 Used'] === 1 ? row : undefined;
    }, { timeoutMs: 60_000, ...logs });
    expect(one).toMatchObject({ 'IPv4 Used': 1, 'IPv4 Free': '1', Services: 1, Exhausted: 'False', Invalid: 'False' });
    await services.create(svc(`${ID}-b`));
    const full = await eventually('the pool exhausted', async () => {
      const o = await get<{ status?: { services?: unknown[]; conditions?: Cond[] } }>('addresspools', pool);
      return cond(o, 'Exhausted')?.status === 'True' ? o : undefined;
    }, { timeoutMs: 60_000, ...logs });
    expect(cond(full, 'Exhausted')!.message).toBe('IPv4: all 2 addresses are in use: new services get no address from this pool; add addresses to it in the cloud config');
    expect(full.status!.services).toEqual([
      { service: `default/${ID}-a`, addresses: ['203.0.113.216'] },
      { service: `default/${ID}-b`, addresses: ['203.0.113.217'] },
    ]);
  }, 120_000);

  test('a rejected edit is reported on the pool (Invalid) and on the EdgeCCMStatus object; a good one clears both', async () => {
    replaceFile(config, text('  bogus: true\n'));
    const invalid = await eventually('Invalid on the pool', async () => {
      const o = await get<{ status?: { conditions?: Cond[] } }>('addresspools', pool);
      return cond(o, 'Invalid')?.status === 'True' ? o : undefined;
    }, { timeoutMs: 60_000, ...logs });
    expect(cond(invalid, 'Invalid')!.message).toContain('the last edit of the cloud config was rejected; this pool as last loaded stays in force');
    expect(cond(invalid, 'Invalid')!.message).toContain('bogus');
    expect(await kubectlGet('edgeccmstatuses', lease)).toMatchObject({ 'Config Accepted': 'False', Breaker: 'Closed' });
    replaceFile(config, text());
    await eventually('Invalid cleared', async () => cond(await get('addresspools', pool), 'Invalid')?.status === 'False' || undefined, { timeoutMs: 60_000, ...logs });
    expect(await kubectlGet('edgeccmstatuses', lease)).toMatchObject({ 'Config Accepted': 'True' });
  }, 120_000);

  test('a pool removed from the config: its object goes', async () => {
    replaceFile(config, 'loadBalancer:\n  pools: []\n');
    await eventually('the AddressPool deleted', async () => get('addresspools', pool).then(() => undefined, () => true), { timeoutMs: 60_000, ...logs });
  }, 120_000);
});

describe('the deletion breaker (fake provider)', () => {
  const lease = `${ID}-breaker`;
  const names = ['n1', 'n2', 'n3', 'n4', 'n5'].map((n) => `${ID}-${n}`);
  const [gone1, gone2] = [names[0]!, names[1]!];
  let ccm: CcmProcess;

  test('held nodes say why; kubectl annotate on the EdgeCCMStatus object lets exactly them go, once', async () => {
    const nodes = new ResourceClient<V1Node>(admin, NODES);
    // Both machines already gone (their nodes NotReady) when edge-ccm starts: one pass judges both.
    for (const name of names) {
      await nodes.create({ metadata: { name, labels: { 'edge-ccm-test': ID } } });
      await setReady(nodes, name, name === gone1 || name === gone2 ? 'False' : 'True');
    }
    const dir = tempDir('edge-ccm-cstatus-breaker-');
    const fake = join(dir, 'fake.json');
    writeFileSync(fake, JSON.stringify({ existence: { [gone1]: 'not-found', [gone2]: 'not-found' } }));
    // 5 managed nodes, max share 0.2: one may go within the window; two are gone.
    ccm = CcmProcess.fake([
      '--cloud-provider=fake', `--cloud-config=${fake}`, '--controllers=cloud-node-lifecycle', `--managed-node-selector=edge-ccm-test=${ID}`,
      '--node-monitor-period=300ms', '--node-deletion-grace-period=0s', '--node-deletion-not-found-threshold=1', ...common(lease),
    ]);
    await ccm.waitForLog('successfully acquired lease', 60_000);
    const logs = { explain: () => ccm.logs().slice(-3000) };

    const status = await eventually('the breaker open on the EdgeCCMStatus object', async () => {
      const o = await get<{ status?: { breaker?: { state: string; held: string[] }; conditions?: Cond[] } }>('edgeccmstatuses', lease).catch(() => undefined);
      return o?.status?.breaker?.state === 'Open' && o.status.breaker.held.length === 2 ? o : undefined;
    }, { timeoutMs: 60_000, ...logs });
    expect(status.status!.breaker!.held.sort()).toEqual([gone1, gone2].sort());
    expect(cond(status, 'DeletionBreakerOpen')!.message).toContain(`kubectl annotate edgeccmstatus ${lease} ${ACKNOWLEDGE_NODE_DELETIONS_ANNOTATION}=true`);
    expect(await kubectlGet('edgeccmstatuses', lease)).toMatchObject({ Breaker: 'Open', Held: 2 });

    // Each held node says why, in kubectl describe node.
    for (const name of [gone1, gone2]) {
      const held = await eventually(`${name} says it is held`, async () => {
        const n = await nodes.get(name);
        return n.status?.conditions?.find((c) => c.type === DELETION_HELD_CONDITION);
      }, { timeoutMs: 30_000, ...logs });
      expect(held).toMatchObject({ status: 'True', reason: 'Breaker' });
      expect(held.message).toContain('the deletion breaker is open: 2 of 5 managed nodes judged gone');
      expect(held.message).toContain(`kubectl annotate node ${name} node.edge-ccm.io/acknowledge-deletion=true`);
    }
    // The healthy ones say nothing.
    expect((await nodes.get(names[2]!)).status?.conditions?.some((c) => c.type === DELETION_HELD_CONDITION)).toBe(false);

    // kubectl annotate edgeccmstatus LEASE edge-ccm.io/acknowledge-node-deletions=true
    await admin.request({
      method: 'PATCH', path: `${API}/edgeccmstatuses/${lease}`, contentType: 'application/merge-patch+json',
      body: { metadata: { annotations: { [ACKNOWLEDGE_NODE_DELETIONS_ANNOTATION]: 'true' } } },
    });
    for (const name of [gone1, gone2]) await eventually(`${name} deleted`, async () => nodes.get(name).then(() => undefined, () => true), { timeoutMs: 60_000, ...logs });
    await eventually('the acknowledgment removed once used', async () => {
      const o = await get<{ metadata: { annotations?: Record<string, string> } }>('edgeccmstatuses', lease);
      return o.metadata.annotations?.[ACKNOWLEDGE_NODE_DELETIONS_ANNOTATION] === undefined || undefined;
    }, { timeoutMs: 60_000, ...logs });
    for (const name of names.slice(2)) expect(await nodes.get(name).then(() => true)).toBe(true);
  }, 180_000);
});
