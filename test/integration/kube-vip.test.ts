import { afterAll, afterEach, beforeAll, expect, test } from 'bun:test';
import { readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { V1Service } from '@kubernetes/client-node';
import { KUBE_VIP_ANNOTATION, KUBE_VIP_OWNED_ANNOTATION } from '../../src/controllers/service/index.ts';
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

/** eventually(), with edge-ccm's recent output in the failure. */
const until = <T>(what: string, probe: () => Promise<T | undefined | false>) =>
  eventually(what, probe).catch((e: Error) => {
    throw new Error(`${e.message}\n${ccm?.logs().slice(-3000)}`);
  });

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
  else await until(`${name} synced`, async () => hasIngress(await get(name)));
}

const logCount = (what: string, name: string) => ccm!.logs().split('\n').filter((l) => l.includes(`"${what}"`) && l.includes(`service=${NS}/${name}`)).length;

test('rbac.yaml alone may not patch services; with rbac-kube-vip.yaml edge-ccm may', async () => {
  const asCcm = new ResourceClient<V1Service>(transportFor(kubeconfig), SERVICES);
  await services.create({ metadata: { name: 'probe', namespace: NS }, spec: { ports: [{ port: 80 }] } }, { namespace: NS });
  const dryRunPatch = () => asCcm.patch('probe', 'merge', { metadata: { annotations: { probe: 'x' } } }, { namespace: NS, dryRun: true });
  const refused = await dryRunPatch().then(() => undefined, (e: unknown) => e);
  expect(refused).toBeInstanceOf(KubeApiError);
  expect((refused as KubeApiError).status).toBe(403);

  await applyManifests(admin, readFileSync(join(DEPLOY, 'rbac-kube-vip.yaml'), 'utf8'));
  await until('patch allowed', () => dryRunPatch().then(() => true, () => false));
  await services.delete('probe', { namespace: NS });
}, 60_000);

test('with --kube-vip-annotation: the address is written once, and removed when the service stops being a LoadBalancer', async () => {
  await startCcm(['--kube-vip-annotation']);
  await createLoadBalancer('web', { team: 'a' });
  // A kube-vip annotation set by hand on another controller's service is never touched.
  await createLoadBalancer('foreign', { [KUBE_VIP_ANNOTATION]: '198.51.100.1' }, 'other.example/lb');

  const web = await until('kube-vip annotation on web', async () => {
    const s = await get('web');
    return s.metadata?.annotations?.[KUBE_VIP_ANNOTATION] === INGRESS_IP ? s : undefined;
  });
  expect(web.metadata?.annotations).toEqual({ team: 'a', [KUBE_VIP_ANNOTATION]: INGRESS_IP, [KUBE_VIP_OWNED_ANNOTATION]: 'true' });
  expect(hasIngress(web)).toBe(true);

  // Our write re-queued web once (its annotations changed): that sync ensured again and wrote nothing.
  await barrier('barrier-1', true);
  expect(logCount('Ensuring load balancer for service', 'web')).toBe(2);
  expect(logCount('Patching kube-vip annotation for service', 'web')).toBe(1);
  expect((await get('foreign')).metadata?.annotations).toEqual({ [KUBE_VIP_ANNOTATION]: '198.51.100.1' });

  await services.patch('web', 'merge', { spec: { type: 'ClusterIP' } }, { namespace: NS });
  const cleaned = await until('web cleaned up', async () => {
    const s = await get('web');
    return !s.metadata?.finalizers?.length && !s.status?.loadBalancer?.ingress?.length && !s.metadata?.annotations?.[KUBE_VIP_ANNOTATION] ? s : undefined;
  });
  expect(cleaned.metadata?.annotations).toEqual({ team: 'a' });
  expect(logCount('Patching kube-vip annotation for service', 'web')).toBe(2);
  await stopCcm();

  const entries = (await settledAuditLog(cp.auditLogPath)).filter((e) => e.user?.username === CCM_USER);
  expect(entries.filter((e) => e.responseStatus?.code === 403 && !e.requestURI.includes('dryRun')).map((e) => `${e.verb} ${e.requestURI}`)).toEqual([]);
}, 180_000);

test('without the flag no kube-vip annotation is written', async () => {
  await startCcm([]);
  await createLoadBalancer('plain');
  await barrier('barrier-2', false);
  const plain = await get('plain');
  expect(hasIngress(plain)).toBe(true);
  expect(plain.metadata?.annotations ?? {}).toEqual({});
  expect(logCount('Patching kube-vip annotation for service', 'plain')).toBe(0);
  await stopCcm();
}, 180_000);
