import { afterAll, afterEach, beforeAll, expect, test } from 'bun:test';
import { join } from 'node:path';
import type { CoreV1Event, V1Service } from '@kubernetes/client-node';
import { EVENTS, ResourceClient, SERVICES } from '../../src/kube/resources.ts';
import type { KubeTransport } from '../../src/kube/transport.ts';
import { CcmProcess, tempDir } from '../harness/ccm-process.ts';
import { sharedControlPlane, type ControlPlane } from '../harness/control-plane.ts';
import { eventually } from '../harness/eventually.ts';
import { replaceFile } from '../harness/files.ts';
import { transportFor } from '../harness/kubeconfig.ts';
import { createNamespace, deleteNamespace } from '../harness/namespaces.ts';

/**
 * Two edge-ccm processes with --leader-elect=false and the static provider's address pools
 * against the real API server: each would hand out addresses from its own memory, so two
 * services could get one address. The second finds the first on the Lease, refuses to allocate
 * and says so (a Warning event on the Lease, SyncLoadBalancerFailed on the services); once the
 * first has stopped, it allocates.
 */

const ID = `replicas-${process.pid}`;
const NS = ID;

let cp: ControlPlane;
let admin: KubeTransport;
let services: ResourceClient<V1Service>;
let config: string;

beforeAll(async () => {
  cp = await sharedControlPlane();
  admin = transportFor(cp.adminKubeconfig);
  services = new ResourceClient<V1Service>(admin, SERVICES);
  await createNamespace(admin, NS);
  config = join(tempDir('edge-ccm-replicas-'), 'static.yaml');
  replaceFile(config, `loadBalancer:
  pools:
    - name: replicas
      addresses: [198.51.100.60-198.51.100.69]
      namespaces: [${NS}]
`);
}, 240_000);

afterEach(() => CcmProcess.stopAll());

afterAll(() => deleteNamespace(admin, NS));

function replica(): CcmProcess {
  return CcmProcess.fake([
    '--cloud-provider=static', `--cloud-config=${config}`, `--kubeconfig=${cp.adminKubeconfig}`,
    '--secure-port=0', '--controllers=service', '--leader-elect=false', `--leader-elect-resource-name=${ID}`,
    '--leader-elect-lease-duration=3s', '--leader-elect-renew-deadline=2s', '--leader-elect-retry-period=500ms',
  ]);
}

async function events(namespace: string, selector: string): Promise<CoreV1Event[]> {
  return (await new ResourceClient<CoreV1Event>(admin, EVENTS).list({ namespace, query: { fieldSelector: selector } })).items;
}

const ingress = (s: V1Service) => s.status?.loadBalancer?.ingress?.[0]?.ip;

test('a second replica without leader election refuses to allocate, with events, until the first has stopped', async () => {
  const first = replica();
  await first.waitForLog('load-balancer addresses rebuilt from service status');
  const second = replica();
  /** eventually()'s failure shows the second replica's recent output. */
  const secondLog = { explain: () => second.logs().slice(-3000) };
  const refusal = await eventually('an AnotherReplicaActive event on the Lease', async () => {
    const found = await events('kube-system', `involvedObject.kind=Lease,involvedObject.name=${ID},reason=AnotherReplicaActive`);
    return found.length ? found[0] : undefined;
  }, { timeoutMs: 60_000, ...secondLog });
  expect(refusal.type).toBe('Warning');
  expect(refusal.message).toContain('--leader-elect=false');

  const names = ['s1', 's2', 's3', 's4'];
  for (const name of names) {
    await services.create({ metadata: { name, namespace: NS }, spec: { type: 'LoadBalancer', ports: [{ port: 80, protocol: 'TCP' }] } });
  }
  const addresses = await eventually('every service with an address', async () => {
    const got = (await services.list({ namespace: NS })).items.map(ingress);
    return got.length === names.length && got.every(Boolean) ? got : undefined;
  }, 60_000);
  expect(new Set(addresses).size).toBe(names.length);
  // The second replica said why it did not take part, on the services too.
  const refused = await eventually('a SyncLoadBalancerFailed event from the second replica', async () => {
    const found = await events(NS, 'involvedObject.kind=Service,reason=SyncLoadBalancerFailed');
    return found.find((e) => e.message?.includes('allocates no load-balancer addresses'));
  }, 60_000);
  expect(refused.message).toContain(`Lease kube-system/${ID}`);
  expect(second.logs()).not.toContain('Patching status for service');

  // Once the first has stopped (and released the Lease), the second takes it, re-reads what the
  // first handed out, and allocates: an address the first gave s1 is not given again.
  const rebuilds = () => second.logs().split('load-balancer addresses rebuilt from service status').length - 1;
  const rebuiltBefore = rebuilds();
  expect(await first.stop('SIGTERM')).toBe(0);
  await eventually('the second replica holding the Lease, its addresses re-read', () => rebuilds() > rebuiltBefore, { timeoutMs: 60_000, ...secondLog });
  const taken = ingress(await services.get('s1', { namespace: NS }))!;
  await services.create({ metadata: { name: 's5', namespace: NS }, spec: { type: 'LoadBalancer', loadBalancerIP: taken, ports: [{ port: 80, protocol: 'TCP' }] } });
  await services.create({ metadata: { name: 's6', namespace: NS }, spec: { type: 'LoadBalancer', ports: [{ port: 80, protocol: 'TCP' }] } });
  const sixth = await eventually('s6 with an address', async () => ingress(await services.get('s6', { namespace: NS })), { timeoutMs: 60_000, ...secondLog });
  expect(addresses).not.toContain(sixth);
  const s5 = await eventually('s5 refused', async () => {
    const found = await events(NS, 'involvedObject.kind=Service,involvedObject.name=s5,reason=SyncLoadBalancerFailed');
    return found.find((e) => e.message?.includes('already used by service'));
  }, 60_000);
  expect(s5.message).toContain(`address ${taken} is already used by service ${NS}/s1`);
  expect(ingress(await services.get('s5', { namespace: NS }))).toBeUndefined();
}, 180_000);
