import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { join, resolve } from 'node:path';
import type { CoreV1Event, V1Node, V1Service } from '@kubernetes/client-node';
import { forEachLimited } from '../../src/util/parallel.ts';
import { EVENTS, NODES, ResourceClient, SERVICES } from '../../src/kube/resources.ts';
import type { KubeTransport } from '../../src/kube/transport.ts';
import { ADDRESS_POOL_ANNOTATION } from '../../src/lb/requests.ts';
import { replaceFile } from '../harness/files.ts';
import { CcmProcess, tempDir } from '../harness/ccm-process.ts';
import { sharedControlPlane } from '../harness/control-plane.ts';
import { eventually } from '../harness/eventually.ts';
import { kubeletNode } from '../harness/nodes.ts';
import { transportFor } from '../harness/kubeconfig.ts';

/**
 * The compiled binary (dist/edge-ccm) with the static provider against the real control plane:
 * nodes initialised from an inventory file, 200 LoadBalancer services given distinct addresses
 * from a pool and the pool reused after they are deleted, inventory edits reaching node labels
 * without a restart (and a bad edit changing nothing), and a requested address outside the
 * service's pools refused with a Warning event.
 */

const ID = `sbin-${process.pid}`;
const SERVICE_LABEL = { 'edge-ccm-test': ID };
const SERVICE_COUNT = 200;
const UNINITIALIZED = 'node.cloudprovider.kubernetes.io/uninitialized';
const CLOUD_LABELS_ANNOTATION = 'node.edge-ccm.io/cloud-labels';
const NS = 'default';

const nodeName = (n: number) => `${ID}-n${n}`;

interface InventoryEdit {
  /** Machine m1's own zone (overrides its site's). */
  m1Zone?: string;
  /** Machine m1's extra label value. */
  m1Extra: string;
  /** The rack's label; left out when undefined. */
  powerFeed?: string;
  /** Machine m3's zone. */
  m3Zone: string;
  /** loadBalancer.classes, when set. */
  classes?: string[];
}

/**
 * The inventory: three machines in one rack of one site, with a site zone, rack and machine
 * labels; one /24 pool for this test's services (selected by label, so leftovers of other tests
 * never take from it) and one pool only kube-system may use.
 */
function inventory(edit: InventoryEdit, typo = false): string {
  return `# written by test/integration/static-binary.test.ts
inventory:
  defaults:
    region: it-region
    instanceType: metal-s
  sites:
    site-a:
      zone: zone-a
  racks:
    rack-1:
      site: site-a
${edit.powerFeed === undefined ? '' : `      labels:\n        example.com/power-feed: ${edit.powerFeed}\n`}  machines:
    - id: ${ID}-m1
      nodeName: ${nodeName(1)}
      rack: rack-1
${edit.m1Zone ? `      zone: ${edit.m1Zone}\n` : ''}      labels:
        example.com/extra: ${edit.m1Extra}
      addresses:
        - { type: InternalIP, address: 10.77.0.11 }
        - { type: ExternalIP, address: 203.0.113.11 }
    - id: ${ID}-m2
      hostname: ${ID}-host2
      rack: rack-1
      instanceType: metal-l
      addresses:
        - { type: InternalIP, address: 10.77.0.12 }
    - id: ${ID}-m3
      nodeName: ${nodeName(3)}
      rack: rack-1
      ${typo ? 'zoen' : 'zone'}: ${edit.m3Zone}
      addresses:
        - { type: InternalIP, address: 10.77.0.13 }
loadBalancer:
${edit.classes ? `  classes: [${edit.classes.join(', ')}]\n` : ''}  pools:
    - name: it-pool
      addresses: [198.51.100.0/24]
      exclude: [198.51.100.0, 198.51.100.255]
      namespaces: [${NS}]
      serviceSelector: edge-ccm-test=${ID}
    - name: tiny
      addresses: [198.51.101.1-198.51.101.2]
      autoAssign: false
      namespaces: [${NS}]
      serviceSelector: edge-ccm-test=${ID}
    - name: system-only
      addresses: [192.0.2.0/28]
      namespaces: [kube-system]
`;
}
const FIRST: InventoryEdit = { m1Extra: 'one', powerFeed: 'a', m3Zone: 'zone-a' };

let admin: KubeTransport;
let nodes: ResourceClient<V1Node>;
let services: ResourceClient<V1Service>;
let ccm: CcmProcess | undefined;
/** eventually()'s failure shows edge-ccm's recent output. */
const ccmLog = { explain: () => ccm?.logs().slice(-4000) ?? '' };
let inventoryPath: string;

function writeInventory(text: string): void {
  replaceFile(inventoryPath, text);
}

beforeAll(async () => {
  const cp = await sharedControlPlane();
  admin = transportFor(cp.adminKubeconfig);
  nodes = new ResourceClient<V1Node>(admin, NODES);
  services = new ResourceClient<V1Service>(admin, SERVICES);
  const dir = tempDir('edge-ccm-static-binary-');
  inventoryPath = join(dir, 'inventory.yaml');
  writeInventory(inventory(FIRST));
  ccm = CcmProcess.binary([
    '--cloud-provider=static', `--cloud-config=${inventoryPath}`, `--kubeconfig=${cp.adminKubeconfig}`,
    '--secure-port=0', `--leader-elect-resource-name=${ID}`,
    '--leader-elect-lease-duration=3s', '--leader-elect-renew-deadline=2s', '--leader-elect-retry-period=500ms',
    // Enough client rate and workers for 200 services in reasonable time on a small machine.
    '--kube-api-qps=100', '--kube-api-burst=200', '--concurrent-service-syncs=4',
  ]);
  await ccm.waitForLog('successfully acquired lease', 60_000);
}, 240_000);

afterAll(async () => {
  // Our services first, while the controller manager still runs to remove its finalizers.
  if (services) {
    const ours = await listOurServices().catch(() => []);
    await Promise.allSettled(ours.map((s) => services.delete(s.metadata!.name!, { namespace: NS })));
    await eventually('our services gone', async () => (await listOurServices()).length === 0, 120_000).catch(() => undefined);
  }
  const code = await ccm?.stop();
  if (code !== undefined && code !== 0) console.error(`edge-ccm exited ${code}:\n${ccm?.logs().slice(-4000)}`);
  if (nodes) {
    const ours = (await nodes.list()).items.filter((n) => n.metadata?.name?.startsWith(`${ID}-`));
    await Promise.allSettled(ours.map((n) => nodes.delete(n.metadata!.name!)));
  }
  // Anything left (the controller manager died early): drop the finalizers so deletion completes.
  if (services) {
    for (const s of await listOurServices().catch(() => [])) {
      await services.patch(s.metadata!.name!, 'merge', { metadata: { finalizers: null } }, { namespace: NS }).catch(() => undefined);
      await services.delete(s.metadata!.name!, { namespace: NS }).catch(() => undefined);
    }
  }
}, 240_000);

async function listOurServices(): Promise<V1Service[]> {
  return (await services.list({ namespace: NS, query: { labelSelector: `edge-ccm-test=${ID}` } })).items;
}

const isInitialised = (n: V1Node) => !!n.spec?.providerID && !(n.spec.taints ?? []).some((t) => t.key === UNINITIALIZED) && (n.status?.addresses ?? []).some((a) => a.type === 'InternalIP');

async function initialised(name: string, timeoutMs = 60_000): Promise<V1Node> {
  return eventually(`node ${name} initialised`, async () => {
    const n = await nodes.get(name);
    return isInitialised(n) ? n : undefined;
  }, { timeoutMs, ...ccmLog });
}

async function eventsAbout(kind: string, name: string): Promise<CoreV1Event[]> {
  const events = new ResourceClient<CoreV1Event>(admin, EVENTS);
  return (await events.list({ namespace: NS, query: { fieldSelector: `involvedObject.kind=${kind},involvedObject.name=${name}` } })).items;
}

function lbService(name: string, extra: Partial<NonNullable<V1Service['spec']>> = {}, annotations?: Record<string, string>): V1Service {
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name, namespace: NS, labels: SERVICE_LABEL, annotations },
    spec: { type: 'LoadBalancer', ports: [{ port: 80, protocol: 'TCP' }], ...extra },
  };
}

const ingressIPs = (s: V1Service) => (s.status?.loadBalancer?.ingress ?? []).map((i) => i.ip).filter((ip): ip is string => !!ip);

/** Creates `count` services (20 requests at a time) and waits until every one has an ingress address; returns name -> address. */
async function createServicesAndWait(prefix: string, count: number): Promise<{ addresses: Map<string, string>; ms: number }> {
  const names = Array.from({ length: count }, (_, i) => `${prefix}-${i}`);
  const started = performance.now();
  await forEachLimited(names, 20, async (name) => void (await services.create(lbService(name))));
  const addresses = await eventually(`${count} services with ingress`, async () => {
    const ours = (await listOurServices()).filter((s) => s.metadata!.name!.startsWith(`${prefix}-`));
    const withIngress = ours.filter((s) => ingressIPs(s).length > 0);
    return withIngress.length === count ? new Map(withIngress.map((s) => [s.metadata!.name!, ingressIPs(s)[0]!])) : undefined;
  }, { timeoutMs: 300_000, intervalMs: 250, ...ccmLog });
  return { addresses, ms: performance.now() - started };
}

/** In it-pool: 198.51.100.0/24 minus .0 and .255. */
function inPool(ip: string): boolean {
  const last = /^198\.51\.100\.(\d{1,3})$/.exec(ip)?.[1];
  return last !== undefined && Number(last) >= 1 && Number(last) <= 254;
}

describe('the compiled binary with the static provider', () => {
  test('nodes registered with the uninitialized taint are initialised from the inventory', async () => {
    const created = performance.now();
    // n1 matches its machine by node name, n2 by hostname.
    await Promise.all([
      nodes.create(kubeletNode(nodeName(1), { labels: { 'example.com/owner': 'ops' } })),
      nodes.create(kubeletNode(nodeName(2), { hostname: `${ID}-host2` })),
    ]);
    const [n1, n2] = await Promise.all([initialised(nodeName(1)), initialised(nodeName(2))]);
    console.log(`static-binary: node creation to initialised (2 nodes, taint gone, addresses written): ${(performance.now() - created).toFixed(0)} ms`);

    expect(n1.spec?.providerID).toBe(`static://${ID}-m1`);
    expect(n1.metadata?.labels).toMatchObject({
      'node.kubernetes.io/instance-type': 'metal-s',
      'beta.kubernetes.io/instance-type': 'metal-s',
      'topology.kubernetes.io/zone': 'zone-a',
      'failure-domain.beta.kubernetes.io/zone': 'zone-a',
      'topology.kubernetes.io/region': 'it-region',
      'failure-domain.beta.kubernetes.io/region': 'it-region',
      'edge-ccm.io/site': 'site-a',
      'edge-ccm.io/rack': 'rack-1',
      'example.com/power-feed': 'a',
      'example.com/extra': 'one',
      'example.com/owner': 'ops',
    });
    // The static provider turns label re-sync on: initialisation records the keys it set.
    expect(n1.metadata?.annotations?.[CLOUD_LABELS_ANNOTATION]).toBe('edge-ccm.io/rack,edge-ccm.io/site,example.com/extra,example.com/power-feed');
    expect(n1.status?.addresses).toEqual([
      { type: 'InternalIP', address: '10.77.0.11' },
      { type: 'ExternalIP', address: '203.0.113.11' },
      { type: 'Hostname', address: nodeName(1) },
    ]);
    expect((n1.spec?.taints ?? []).map((t) => t.key)).not.toContain(UNINITIALIZED);

    expect(n2.spec?.providerID).toBe(`static://${ID}-m2`);
    expect(n2.metadata?.labels).toMatchObject({ 'node.kubernetes.io/instance-type': 'metal-l', 'topology.kubernetes.io/zone': 'zone-a', 'edge-ccm.io/rack': 'rack-1' });
    expect(n2.status?.addresses).toContainEqual({ type: 'InternalIP', address: '10.77.0.12' });

    for (const name of [nodeName(1), nodeName(2)]) {
      const synced = await eventually(`Synced event for ${name}`, async () => (await eventsAbout('Node', name)).find((e) => e.reason === 'Synced'));
      expect(synced).toMatchObject({ type: 'Normal', message: 'Node synced successfully' });
    }
  }, 120_000);

  test('editing the inventory changes node labels without a restart', async () => {
    await initialised(nodeName(1));
    const pid = ccm!.pid;
    const edited = performance.now();
    // m1 gets its own zone and a new extra value; the rack's label goes away.
    writeInventory(inventory({ ...FIRST, m1Zone: 'zone-b', m1Extra: 'two', powerFeed: undefined }));
    const n1 = await eventually('n1 relabelled', async () => {
      const n = await nodes.get(nodeName(1));
      const l = n.metadata?.labels ?? {};
      return l['topology.kubernetes.io/zone'] === 'zone-b' && l['example.com/extra'] === 'two' && !('example.com/power-feed' in l) ? n : undefined;
    }, { timeoutMs: 60_000, ...ccmLog });
    console.log(`static-binary: inventory edit to node labels changed: ${(performance.now() - edited).toFixed(0)} ms`);
    expect(n1.metadata?.labels).toMatchObject({ 'failure-domain.beta.kubernetes.io/zone': 'zone-b', 'edge-ccm.io/site': 'site-a', 'example.com/owner': 'ops' });
    expect(n1.metadata?.annotations?.[CLOUD_LABELS_ANNOTATION]).toBe('edge-ccm.io/rack,edge-ccm.io/site,example.com/extra');
    // n2 lost the rack label it was given too, and kept its zone.
    const n2 = await eventually('n2 relabelled', async () => {
      const n = await nodes.get(nodeName(2));
      return 'example.com/power-feed' in (n.metadata?.labels ?? {}) ? undefined : n;
    });
    expect(n2.metadata?.labels?.['topology.kubernetes.io/zone']).toBe('zone-a');
    expect(ccm!.logs()).not.toContain('error re-syncing node labels');
    expect(ccm!.pid).toBe(pid);
    expect(ccm!.proc.exitCode).toBeNull();
  }, 120_000);

  test('an invalid edit is reported with its line and the last good inventory stays in force', async () => {
    const before = (await nodes.get(nodeName(1))).metadata?.labels;
    // A typo, and values that would change n1 and m3 if the file were taken.
    writeInventory(inventory({ m1Zone: 'zone-x', m1Extra: 'three', powerFeed: 'b', m3Zone: 'zone-x' }, true));
    await ccm!.waitForLog(/static provider configuration rejected.*inventory\.yaml:\d+: inventory\.machines\[2\]\.zoen: unknown key/, 30_000);
    // ... and as a Warning event on our Lease, for kubectl users.
    const events = new ResourceClient<CoreV1Event>(admin, EVENTS);
    await eventually('CloudConfigRejected event', async () => {
      const list = await events.list({ namespace: 'kube-system', query: { fieldSelector: `involvedObject.kind=Lease,involvedObject.name=${ID},reason=CloudConfigRejected` } });
      return list.items.find((e) => e.type === 'Warning' && e.message?.includes('zoen: unknown key'));
    });

    // Proof the provider still answers from the last good file: a node registering now is
    // initialised with m3's zone from it, not from the rejected text.
    await nodes.create(kubeletNode(nodeName(3)));
    const n3 = await initialised(nodeName(3));
    expect(n3.metadata?.labels).toMatchObject({ 'topology.kubernetes.io/zone': 'zone-a', 'edge-ccm.io/rack': 'rack-1' });
    expect(n3.metadata?.labels?.['example.com/power-feed']).toBeUndefined();
    expect((await nodes.get(nodeName(1))).metadata?.labels).toEqual(before);

    // A good edit after the bad one is taken again.
    writeInventory(inventory({ ...FIRST, m1Zone: 'zone-b', m1Extra: 'two', powerFeed: undefined, m3Zone: 'zone-c' }));
    await eventually('n3 relabelled after the fix', async () => (await nodes.get(nodeName(3))).metadata?.labels?.['topology.kubernetes.io/zone'] === 'zone-c', 60_000);
  }, 120_000);

  test(`${SERVICE_COUNT} LoadBalancer services get distinct addresses; deleted and recreated, they reuse the pool`, async () => {
    const first = await createServicesAndWait(`${ID}-a`, SERVICE_COUNT);
    console.log(`static-binary: ${SERVICE_COUNT} services created to all with ingress: ${first.ms.toFixed(0)} ms (--concurrent-service-syncs=4, --kube-api-qps=100)`);
    const firstIPs = [...first.addresses.values()];
    expect(new Set(firstIPs).size).toBe(SERVICE_COUNT);
    expect(firstIPs.filter((ip) => !inPool(ip))).toEqual([]);

    const deleting = performance.now();
    await forEachLimited([...first.addresses.keys()], 20, async (name) => void (await services.delete(name, { namespace: NS })));
    await eventually('the services gone (finalizers removed, addresses released)', async () => (await listOurServices()).length === 0, 300_000, 250);
    console.log(`static-binary: ${SERVICE_COUNT} services deleted to all gone: ${(performance.now() - deleting).toFixed(0)} ms`);

    // 200 more do not fit in the 254-address pool without the released addresses; allocation is
    // lowest-free, so the second round gets exactly the same ones back.
    const second = await createServicesAndWait(`${ID}-b`, SERVICE_COUNT);
    console.log(`static-binary: ${SERVICE_COUNT} services recreated to all with ingress: ${second.ms.toFixed(0)} ms`);
    const secondIPs = [...second.addresses.values()];
    expect(new Set(secondIPs).size).toBe(SERVICE_COUNT);
    expect(secondIPs.filter((ip) => !inPool(ip))).toEqual([]);
    expect(new Set(secondIPs)).toEqual(new Set(firstIPs));

    // Leave the cluster's service IP range (a /24) to the next tests.
    await forEachLimited([...second.addresses.keys()], 20, async (name) => void (await services.delete(name, { namespace: NS })));
    await eventually('the second round gone', async () => (await listOurServices()).length === 0, 300_000, 250);
  }, 900_000);

  test('a full pool refuses the next service with a Warning event; a deletion frees an address for it', async () => {
    // A 2-address pool only services naming it use (the test cluster's service IP range is a /24,
    // so the big pool cannot be filled).
    const tiny = (i: number) => lbService(`${ID}-tiny-${i}`, {}, { [ADDRESS_POOL_ANNOTATION]: 'tiny' });
    await services.create(tiny(0));
    await services.create(tiny(1));
    const held = await eventually('both tiny services with ingress', async () => {
      const ips = await Promise.all([0, 1].map(async (i) => ingressIPs(await services.get(`${ID}-tiny-${i}`, { namespace: NS }))));
      return ips.every((a) => a.length === 1) ? ips.flat() : undefined;
    });
    expect(held.sort()).toEqual(['198.51.101.1', '198.51.101.2']);

    await services.create(tiny(2));
    // Ours, by reason: the API server may warn about the same service too (its ClusterIP repair
    // controller's ClusterIPNotAllocated, after the previous test emptied the service IP range).
    const exhausted = await eventually('the pool exhausted event', async () =>
      (await eventsAbout('Service', `${ID}-tiny-2`)).find((e) => e.type === 'Warning' && e.reason === 'SyncLoadBalancerFailed'));
    expect(exhausted.message).toContain('pool tiny exhausted');
    expect(ingressIPs(await services.get(`${ID}-tiny-2`, { namespace: NS }))).toEqual([]);

    // Released on deletion, the address goes to the waiting service on its retry.
    const freed = ingressIPs(await services.get(`${ID}-tiny-0`, { namespace: NS }))[0];
    await services.delete(`${ID}-tiny-0`, { namespace: NS });
    const taken = await eventually('the freed address reused', async () => ingressIPs(await services.get(`${ID}-tiny-2`, { namespace: NS }))[0], 120_000);
    expect(taken).toBe(freed!);
  }, 180_000);

  test('a service requesting an address outside its pools gets a Warning event and no ingress', async () => {
    // 192.0.2.5 is in a pool, but one only kube-system may use.
    const name = `${ID}-outside`;
    await services.create(lbService(name, { loadBalancerIP: '192.0.2.5' }));
    const warning = await eventually('the Warning event', async () => (await eventsAbout('Service', name)).find((e) => e.type === 'Warning'), 60_000);
    expect(warning.reason).toBe('SyncLoadBalancerFailed');
    expect(warning.message).toContain('requested address 192.0.2.5 is not in any pool this service may use');
    expect(ingressIPs(await services.get(name, { namespace: NS }))).toEqual([]);
  }, 120_000);

  test('a class added to loadBalancer.classes is served without a restart, and released when removed', async () => {
    const pid = ccm!.pid;
    const name = `${ID}-classy`;
    const cls = 'example.com/edge-ccm-it';
    // Another controller's class until the edit (that a foreign class is left alone is proven in
    // test/integration/service-controller.test.ts).
    await services.create(lbService(name, { loadBalancerClass: cls }));
    writeInventory(inventory({ ...FIRST, classes: [cls] }));
    const served = await eventually('the class served', async () => {
      const s = await services.get(name, { namespace: NS });
      return ingressIPs(s).length ? s : undefined;
    }, 60_000);
    expect(inPool(ingressIPs(served)[0]!)).toBe(true);
    expect(served.metadata?.finalizers).toContain('service.kubernetes.io/load-balancer-cleanup');

    writeInventory(inventory(FIRST));
    const released = await eventually('the class released', async () => {
      const s = await services.get(name, { namespace: NS });
      return !ingressIPs(s).length && !s.metadata?.finalizers?.length ? s : undefined;
    }, 60_000);
    expect(released.spec?.loadBalancerClass).toBe(cls);
    expect(ccm!.pid).toBe(pid);
  }, 180_000);
});
