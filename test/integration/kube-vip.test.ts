import { afterAll, afterEach, beforeAll, expect, test } from 'bun:test';
import { readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { V1Service } from '@kubernetes/client-node';
import { KUBE_VIP_ANNOTATION, KUBE_VIP_FIELD_MANAGER, KUBE_VIP_OWNED_ANNOTATION } from '../../src/controllers/service/index.ts';
import { KubeApiError } from '../../src/kube/errors.ts';
import { ResourceClient, SERVICES } from '../../src/kube/resources.ts';
import type { BunKubeTransport } from '../../src/kube/transport.ts';
import { settledAuditLog } from '../harness/audit.ts';
import { CcmProcess, tempDir } from '../harness/ccm-process.ts';
import { startControlPlane, type ControlPlane } from '../harness/control-plane.ts';
import { eventually } from '../harness/eventually.ts';
import { transportFor, writeKubeconfig } from '../harness/kubeconfig.ts';
import { applyManifests } from '../harness/manifests.ts';

/**
 * --kube-vip-annotation through the CLI against a real API server, as
 * kube-system/cloud-controller-manager under exactly rbac.yaml and rbac-kube-vip.yaml: a
 * LoadBalancer service gets kube-vip's annotation with its address, written once; it goes when
 * the service stops being a LoadBalancer; without the flag nothing is written. A control plane of
 * its own: the RBAC is applied, and the audit log must show no 403.
 */
const DEPLOY = resolve(import.meta.dir, '../../deploy/kubernetes');
const CCM_USER = 'system:serviceaccount:kube-system:cloud-controller-manager';
const INGRESS_IP = '203.0.113.9';
const NS = 'default';

let cp: ControlPlane;
let admin: BunKubeTransport;
let services: ResourceClient<V1Service>;
let dir: string;
let kubeconfig: string;
let ccm: CcmProcess | undefined;

/** eventually()'s failure shows edge-ccm's recent output. */
const withCcmLog = { explain: () => ccm?.logs().slice(-3000) ?? '' };

beforeAll(async () => {
  cp = await startControlPlane();
  admin = transportFor(cp.adminKubeconfig);
  services = new ResourceClient<V1Service>(admin, SERVICES);
  await applyManifests(admin, readFileSync(join(DEPLOY, 'rbac.yaml'), 'utf8'));
  dir = tempDir('edge-ccm-kube-vip-');
  const token = await cp.serviceAccountToken('kube-system', 'cloud-controller-manager');
  kubeconfig = await writeKubeconfig(join(dir, 'ccm.yaml'), cp.server, cp.caPem, 'ccm', { token });
  writeFileSync(join(dir, 'fake.json'), JSON.stringify({ ingressIP: INGRESS_IP }));
}, 240_000);

afterEach(() => CcmProcess.stopAll());
afterAll(() => cp?.stop());

/** Only the service controller, one worker (so syncs run in queue order), its debug lines logged. */
async function startCcm(extraFlags: string[]): Promise<CcmProcess> {
  const started = CcmProcess.fake([
    '--cloud-provider=fake', `--cloud-config=${join(dir, 'fake.json')}`, `--kubeconfig=${kubeconfig}`,
    '--controllers=service', '--leader-elect=false', '--secure-port=0', '--concurrent-service-syncs=1', '--v=2',
    ...extraFlags,
  ]);
  ccm = started;
  await started.waitForLog('Starting service controller');
  return started;
}

async function stopCcm(): Promise<void> {
  expect(await ccm!.stop('SIGTERM')).toBe(0);
  ccm = undefined;
}

function createLoadBalancer(name: string, annotations?: Record<string, string>, loadBalancerClass?: string): Promise<V1Service> {
  return services.create({
    metadata: { name, namespace: NS, annotations },
    spec: { type: 'LoadBalancer', loadBalancerClass, ports: [{ port: 80, protocol: 'TCP' }] },
  }, { namespace: NS });
}

const get = (name: string) => services.get(name, { namespace: NS });
const hasIngress = (s: V1Service) => s.status?.loadBalancer?.ingress?.some((i) => i.ip === INGRESS_IP) ?? false;

/**
 * Creates a service and waits until it is fully synced. With one worker, every service event
 * that reached the controller before it has then been synced too.
 */
async function barrier(name: string, flagOn: boolean): Promise<void> {
  await createLoadBalancer(name);
  if (flagOn) await ccm!.waitForLog(`Patching kube-vip annotation for service" controller=service-lb-controller service=${NS}/${name}`);
  // Without the flag, the status is the sync's last write.
  else await eventually(`${name} synced`, async () => hasIngress(await get(name)), withCcmLog);
}

const logCount = (what: string, name: string) => ccm!.logs().split('\n').filter((l) => l.includes(`"${what}"`) && l.includes(`service=${NS}/${name}`)).length;

test('rbac.yaml alone may not patch services; with rbac-kube-vip.yaml edge-ccm may write the kube-vip annotation', async () => {
  const asCcm = new ResourceClient<V1Service>(transportFor(kubeconfig), SERVICES);
  await services.create({ metadata: { name: 'probe', namespace: NS }, spec: { ports: [{ port: 80 }] } }, { namespace: NS });
  const dryRunPatch = () => asCcm.patch('probe', 'merge', { metadata: { annotations: { [KUBE_VIP_ANNOTATION]: INGRESS_IP } } }, { namespace: NS, dryRun: true, fieldManager: KUBE_VIP_FIELD_MANAGER });
  const refused = await dryRunPatch().then(() => undefined, (e: unknown) => e);
  expect(refused).toBeInstanceOf(KubeApiError);
  expect((refused as KubeApiError).status).toBe(403);

  await applyManifests(admin, readFileSync(join(DEPLOY, 'rbac-kube-vip.yaml'), 'utf8'));
  await eventually('patch allowed', () => dryRunPatch().then(() => true, () => false), withCcmLog);
  await services.delete('probe', { namespace: NS });
}, 60_000);

/** What the API server answers a merge patch of service NAME: 'allowed', or the status code and message. */
function patchOutcome(client: ResourceClient<V1Service>, name: string, body: unknown, opts: { fieldManager?: string; dryRun?: boolean } = {}): Promise<string> {
  return client.patch(name, 'merge', body, { namespace: NS, fieldManager: opts.fieldManager ?? KUBE_VIP_FIELD_MANAGER, dryRun: opts.dryRun }).then(
    () => 'allowed',
    (e: unknown) => (e instanceof KubeApiError ? `${e.status} ${e.message}` : String(e)),
  );
}

test("rbac-kube-vip.yaml's admission policy: edge-ccm may change the kube-vip annotation and nothing else of a Service", async () => {
  // (The policy's status.typeChecking is filled in by kube-controller-manager, which the harness
  // does not run: each expression is proven below by a refusal carrying its own message, and the
  // allowed writes prove that none fails to evaluate, which failurePolicy: Fail would turn into a refusal.)
  await applyManifests(admin, readFileSync(join(DEPLOY, 'rbac-kube-vip.yaml'), 'utf8'));
  await services.create({
    metadata: { name: 'guarded', namespace: NS, labels: { app: 'web' }, annotations: { team: 'a' } },
    spec: { type: 'LoadBalancer', ports: [{ port: 80, protocol: 'TCP' }] },
  }, { namespace: NS });
  const asCcm = new ResourceClient<V1Service>(transportFor(kubeconfig), SERVICES);
  const externalIPs = { spec: { externalIPs: ['203.0.113.66'] } };
  // The API server loads a new policy shortly after it is stored: wait until it refuses (a dry run changes nothing).
  await eventually('policy in force', async () => (await patchOutcome(asCcm, 'guarded', externalIPs, { dryRun: true })).startsWith('422 ') || undefined, withCcmLog);

  const refusals: [string, unknown, string?][] = [
    ["may not change a Service's spec", externalIPs],
    ["may not change a Service's spec", { spec: { type: 'NodePort' } }],
    ['may change only the annotations kube-vip.io/loadbalancerIPs and edge-ccm.io/kube-vip-annotation', { metadata: { annotations: { team: 'b' } } }],
    ['may change only the annotations kube-vip.io/loadbalancerIPs and edge-ccm.io/kube-vip-annotation', { metadata: { annotations: { team: null } } }],
    ['may change only the annotations kube-vip.io/loadbalancerIPs and edge-ccm.io/kube-vip-annotation', { metadata: { annotations: { 'kube-vip.io/vipHost': 'node-a' } } }],
    ["may not change a Service's labels, finalizers or owner references", { metadata: { labels: { app: 'evil' } } }],
    ["may not change a Service's labels, finalizers or owner references", { metadata: { finalizers: ['example.com/hold'] } }],
    // The right annotation, but not as the kube-vip field manager.
    ['only as the field manager edge-ccm-kube-vip', { metadata: { annotations: { [KUBE_VIP_ANNOTATION]: INGRESS_IP } } }, 'edge-ccm'],
  ];
  for (const [message, body, fieldManager] of refusals) {
    const outcome = await patchOutcome(asCcm, 'guarded', body, { fieldManager });
    expect({ body, outcome }).toEqual({ body, outcome: expect.stringMatching(/^422 .*edge-ccm-kube-vip-annotation-only/) });
    expect({ body, outcome }).toEqual({ body, outcome: expect.stringContaining(message) });
  }
  // No Service is created or deleted by edge-ccm either (RBAC already refuses both; the policy too).
  expect(await asCcm.delete('guarded', { namespace: NS, dryRun: true }).then(() => 'allowed', (e: KubeApiError) => e.status)).toBe(403);

  // What --kube-vip-annotation writes goes through, attributed to its own field manager.
  const written = { metadata: { annotations: { [KUBE_VIP_ANNOTATION]: INGRESS_IP, [KUBE_VIP_OWNED_ANNOTATION]: 'true' } } };
  expect(await patchOutcome(asCcm, 'guarded', written)).toBe('allowed');
  const after = await get('guarded');
  expect(after.metadata?.annotations).toEqual({ team: 'a', [KUBE_VIP_ANNOTATION]: INGRESS_IP, [KUBE_VIP_OWNED_ANNOTATION]: 'true' });
  expect(after.metadata?.labels).toEqual({ app: 'web' });
  expect(after.spec?.externalIPs).toBeUndefined();
  const managers = (after.metadata?.managedFields ?? []).filter((m) => m.manager === KUBE_VIP_FIELD_MANAGER);
  expect(managers.map((m) => Object.keys((m.fieldsV1 as { 'f:metadata'?: { 'f:annotations'?: object } })['f:metadata']?.['f:annotations'] ?? {}).sort()))
    .toEqual([[`f:${KUBE_VIP_OWNED_ANNOTATION}`, `f:${KUBE_VIP_ANNOTATION}`].sort()]);
  expect(await patchOutcome(asCcm, 'guarded', { metadata: { annotations: { [KUBE_VIP_ANNOTATION]: null, [KUBE_VIP_OWNED_ANNOTATION]: null } } })).toBe('allowed');

  // With --use-service-account-credentials the service controller's own account is held to the same rule.
  const serviceController = new ResourceClient<V1Service>(
    transportFor(await writeKubeconfig(join(dir, 'service-controller.yaml'), cp.server, cp.caPem, 'sc', { token: await cp.serviceAccountToken('kube-system', 'service-controller') })),
    SERVICES,
  );
  expect(await patchOutcome(serviceController, 'guarded', externalIPs)).toMatch(/^422 .*may not change a Service's spec/);
  expect(await patchOutcome(serviceController, 'guarded', written, { dryRun: true })).toBe('allowed');
  // Anyone else is not affected by the policy.
  expect(await patchOutcome(services, 'guarded', externalIPs, { fieldManager: 'admin', dryRun: true })).toBe('allowed');
  await services.delete('guarded', { namespace: NS });
}, 120_000);

test('with --kube-vip-annotation: the address is written once, and removed when the service stops being a LoadBalancer', async () => {
  await startCcm(['--kube-vip-annotation']);
  await createLoadBalancer('web', { team: 'a' });
  // A kube-vip annotation set by hand on another controller's service is never touched.
  await createLoadBalancer('foreign', { [KUBE_VIP_ANNOTATION]: '198.51.100.1' }, 'other.example/lb');

  const web = await eventually('kube-vip annotation on web', async () => {
    const s = await get('web');
    return s.metadata?.annotations?.[KUBE_VIP_ANNOTATION] === INGRESS_IP ? s : undefined;
  }, withCcmLog);
  expect(web.metadata?.annotations).toEqual({ team: 'a', [KUBE_VIP_ANNOTATION]: INGRESS_IP, [KUBE_VIP_OWNED_ANNOTATION]: 'true' });
  expect(hasIngress(web)).toBe(true);
  // Written under its own field manager, the one the shipped admission policy accepts.
  expect(web.metadata?.managedFields?.map((m) => m.manager)).toContain(KUBE_VIP_FIELD_MANAGER);

  // Our write re-queued web once (its annotations changed): that sync ensured again and wrote nothing.
  await barrier('barrier-1', true);
  expect(logCount('Ensuring load balancer for service', 'web')).toBe(2);
  expect(logCount('Patching kube-vip annotation for service', 'web')).toBe(1);
  expect((await get('foreign')).metadata?.annotations).toEqual({ [KUBE_VIP_ANNOTATION]: '198.51.100.1' });

  await services.patch('web', 'merge', { spec: { type: 'ClusterIP' } }, { namespace: NS });
  const cleaned = await eventually('web cleaned up', async () => {
    const s = await get('web');
    return !s.metadata?.finalizers?.length && !s.status?.loadBalancer?.ingress?.length && !s.metadata?.annotations?.[KUBE_VIP_ANNOTATION] ? s : undefined;
  }, withCcmLog);
  expect(cleaned.metadata?.annotations).toEqual({ team: 'a' });
  expect(logCount('Patching kube-vip annotation for service', 'web')).toBe(2);
  await stopCcm();

  const entries = (await settledAuditLog(cp.auditLogPath)).filter((e) => e.user?.username === CCM_USER);
  expect(entries.filter((e) => e.responseStatus?.code === 403 && !e.requestURI.includes('dryRun')).map((e) => `${e.verb} ${e.requestURI}`)).toEqual([]);
}, 180_000);

test('without the flag no kube-vip annotation is written', async () => {
  await startCcm([]);
  await createLoadBalancer('plain');
  // Its own status first (the workers take services in any order, and a retried sync comes later
  // than a barrier created after it), then a barrier for any write that would follow.
  await eventually('plain synced', async () => hasIngress(await get('plain')), withCcmLog);
  await barrier('barrier-2', false);
  const plain = await get('plain');
  expect(plain.metadata?.annotations ?? {}).toEqual({});
  expect(logCount('Patching kube-vip annotation for service', 'plain')).toBe(0);
  await stopCcm();
}, 180_000);
