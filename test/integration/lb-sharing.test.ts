import { afterAll, beforeAll, expect, test } from 'bun:test';
import { join } from 'node:path';
import type { CoreV1Event, V1Service } from '@kubernetes/client-node';
import { EVENTS, ResourceClient, SERVICES } from '../../src/kube/resources.ts';
import type { KubeTransport } from '../../src/kube/transport.ts';
import { CcmProcess, tempDir } from '../harness/ccm-process.ts';
import { sharedControlPlane } from '../harness/control-plane.ts';
import { eventually } from '../harness/eventually.ts';
import { replaceFile } from '../harness/files.ts';
import { transportFor } from '../harness/kubeconfig.ts';
import { createNamespace, deleteNamespace } from '../harness/namespaces.ts';

/**
 * Sharing keys (edge-ccm.io/allow-shared-ip) through edge-ccm with the static provider against
 * the real API server: a key is its namespace's own, so a service in another namespace carrying
 * the victim's key gets an address of its own (and a request for the victim's address is
 * refused); a sharer whose port is taken on the key's address is told why in a Normal event.
 */

const ID = `lbshare-${process.pid}`;
const TEAM_A = `${ID}-a`;
const TEAM_B = `${ID}-b`;
const KEY = { 'edge-ccm.io/allow-shared-ip': 'web' };

let admin: KubeTransport;
let services: ResourceClient<V1Service>;
let ccm: CcmProcess;

beforeAll(async () => {
  const cp = await sharedControlPlane();
  admin = transportFor(cp.adminKubeconfig);
  services = new ResourceClient<V1Service>(admin, SERVICES);
  for (const name of [TEAM_A, TEAM_B]) await createNamespace(admin, name);
  const dir = tempDir('edge-ccm-lb-sharing-');
  const config = join(dir, 'static.yaml');
  // A range, so every address of it is handed out; only this file's namespaces may use it.
  replaceFile(config, `loadBalancer:
  pools:
    - name: shared-web
      addresses: [198.51.100.40-198.51.100.49]
      namespaces: [${TEAM_A}, ${TEAM_B}]
`);
  ccm = CcmProcess.fake([
    '--cloud-provider=static', `--cloud-config=${config}`, `--kubeconfig=${cp.adminKubeconfig}`,
    '--secure-port=0', '--controllers=service', `--leader-elect-resource-name=${ID}`,
    '--leader-elect-lease-duration=3s', '--leader-elect-renew-deadline=2s', '--leader-elect-retry-period=500ms',
  ]);
  await ccm.waitForLog('load-balancer addresses rebuilt from service status', 60_000);
}, 240_000);

afterAll(async () => {
  // Ours first, while edge-ccm still runs to remove its finalizers; then whatever is left.
  const ours = async () => (await Promise.all([TEAM_A, TEAM_B].map((ns) => services.list({ namespace: ns })))).flatMap((l) => l.items);
  for (const s of await ours().catch(() => [])) await services.delete(s.metadata!.name!, { namespace: s.metadata!.namespace }).catch(() => undefined);
  await eventually('our services gone', async () => (await ours()).length === 0, 60_000).catch(() => undefined);
  await CcmProcess.stopAll('SIGTERM');
  for (const name of [TEAM_A, TEAM_B]) await deleteNamespace(admin, name);
}, 120_000);

function lbService(namespace: string, name: string, port: number, extra: { loadBalancerIP?: string } = {}): V1Service {
  return {
    metadata: { name, namespace, annotations: KEY },
    spec: { type: 'LoadBalancer', ports: [{ port, protocol: 'TCP' }], selector: { app: name }, ...extra },
  };
}

async function ingressOf(namespace: string, name: string): Promise<string> {
  return eventually(`the ingress of ${namespace}/${name}`, async () => {
    const s = await services.get(name, { namespace });
    return s.status?.loadBalancer?.ingress?.[0]?.ip;
  }, { timeoutMs: 60_000, explain: () => ccm.logs().slice(-3000) });
}

async function eventsOf(namespace: string, name: string, reason: string): Promise<CoreV1Event[]> {
  const events = new ResourceClient<CoreV1Event>(admin, EVENTS);
  const list = await events.list({ namespace, query: { fieldSelector: `involvedObject.kind=Service,involvedObject.name=${name},reason=${reason}` } });
  return list.items;
}

test('the same sharing key in another namespace never joins an address; a request for it is refused', async () => {
  await services.create(lbService(TEAM_A, 'victim', 80));
  const victim = await ingressOf(TEAM_A, 'victim');

  await services.create(lbService(TEAM_B, 'intruder', 8080));
  const intruder = await ingressOf(TEAM_B, 'intruder');
  expect(intruder).not.toBe(victim);

  await services.create(lbService(TEAM_B, 'asks', 8081, { loadBalancerIP: victim }));
  const refused = await eventually('a SyncLoadBalancerFailed event for team-b/asks', async () => {
    const events = await eventsOf(TEAM_B, 'asks', 'SyncLoadBalancerFailed');
    return events.length ? events : undefined;
  }, 60_000);
  expect(refused[0]!.message).toContain(`address ${victim} is already used by service ${TEAM_A}/victim (sharing keys are scoped to the namespace`);
  expect((await services.get('asks', { namespace: TEAM_B })).status?.loadBalancer?.ingress ?? []).toEqual([]);
}, 120_000);

test('a second TCP/80 with the same key gets an address of its own and a Normal AddressNotShared event naming the clash', async () => {
  const victim = await ingressOf(TEAM_A, 'victim');
  await services.create(lbService(TEAM_A, 'second', 80));
  const second = await ingressOf(TEAM_A, 'second');
  expect(second).not.toBe(victim);
  const events = await eventually('an AddressNotShared event for team-a/second', async () => {
    const found = await eventsOf(TEAM_A, 'second', 'AddressNotShared');
    return found.length ? found : undefined;
  }, 60_000);
  expect(events[0]!.type).toBe('Normal');
  expect(events[0]!.message).toBe(`not sharing ${victim} (edge-ccm.io/allow-shared-ip: web) with service ${TEAM_A}/victim: both use port TCP/80; assigned ${second} instead`);
  // One with a free port still joins the key's address.
  await services.create(lbService(TEAM_A, 'third', 443));
  expect(await ingressOf(TEAM_A, 'third')).toBe(victim);
}, 120_000);

test('a refused edit that adds a port its co-holder serves gives the shared address up, and the status says so (issue 29)', async () => {
  // Seen by the soak (seed 3651965050): a refused spec kept a shared address while its new port
  // clashed with the co-holder's, so kube-proxy would serve UDP/53 twice on it.
  const dns = (name: string, ports: { port: number; protocol: string }[]): V1Service => ({
    metadata: { name, namespace: TEAM_A, annotations: { 'edge-ccm.io/allow-shared-ip': 'dns' } },
    spec: { type: 'LoadBalancer', ports, selector: { app: 'dns' } },
  });
  await services.create(dns('dns-udp', [{ port: 53, protocol: 'UDP' }]));
  const shared = await ingressOf(TEAM_A, 'dns-udp');
  await services.create(dns('dns-tcp', [{ port: 53, protocol: 'TCP' }]));
  expect(await ingressOf(TEAM_A, 'dns-tcp')).toBe(shared);
  const condition = (s: V1Service) => s.status?.conditions?.find((c) => c.type === 'edge-ccm.io/AddressAssigned');

  // A requested address outside the pool: refused, the service keeps what it has.
  await services.patch('dns-tcp', 'merge', { spec: { loadBalancerIP: '203.0.113.99' } }, { namespace: TEAM_A });
  await eventually('dns-tcp refused, keeping its address', async () => {
    const s = await services.get('dns-tcp', { namespace: TEAM_A });
    return condition(s)?.reason === 'RequestedAddressNotInPool' && condition(s)?.observedGeneration === s.metadata?.generation && s.status?.loadBalancer?.ingress?.[0]?.ip === shared;
  }, { timeoutMs: 60_000, explain: () => ccm.logs().slice(-3000) });

  // Still refused, and now UDP/53 too, which dns-udp serves there: the address is given up.
  await services.patch('dns-tcp', 'merge', { spec: { ports: [{ name: 'tcp', port: 53, protocol: 'TCP' }, { name: 'udp', port: 53, protocol: 'UDP' }] } }, { namespace: TEAM_A });
  const after = await eventually('dns-tcp without the shared address', async () => {
    const s = await services.get('dns-tcp', { namespace: TEAM_A });
    return (s.status?.loadBalancer?.ingress ?? []).length === 0 && condition(s)?.observedGeneration === s.metadata?.generation ? s : undefined;
  }, { timeoutMs: 30_000, explain: () => ccm.logs().slice(-3000) });
  expect(condition(after)?.status).toBe('False');
  expect(condition(after)?.message).toContain(`the service gave up ${shared}, which it shared with service ${TEAM_A}/dns-udp (both use port UDP/53)`);
  expect(await ingressOf(TEAM_A, 'dns-udp')).toBe(shared);
}, 120_000);
