import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { join } from 'node:path';
import type { CoreV1Event, V1EndpointSlice, V1Node, V1Service } from '@kubernetes/client-node';
import { ENDPOINT_SLICES, SERVICE_NAME_LABEL } from '../../src/kube/endpoint-slices.ts';
import { EVENTS, NODES, ResourceClient, SERVICES } from '../../src/kube/resources.ts';
import type { KubeTransport } from '../../src/kube/transport.ts';
import { replaceFile } from '../harness/files.ts';
import { CcmProcess, tempDir } from '../harness/ccm-process.ts';
import { sharedControlPlane } from '../harness/control-plane.ts';
import { eventually } from '../harness/eventually.ts';
import { transportFor } from '../harness/kubeconfig.ts';
import { setReady, UNINITIALIZED } from '../harness/nodes.ts';

/**
 * Node-address pools with the compiled binary (static provider) against the real API server: a
 * service of the pool gets the InternalIPs of the eligible nodes, and its status follows nodes
 * joining (initialised by edge-ccm: providerID first, addresses after), being excluded, tainted
 * by the cluster autoscaler and leaving; a second service on the same port is refused with a
 * Warning naming the holder, one on another port shares the addresses. With
 * externalTrafficPolicy: Local the addresses are those of the nodes with a ready endpoint, and
 * follow the EndpointSlices.
 */
const ID = `nap-${process.pid}`;
const NS = 'default';
const LABEL = { 'edge-ccm-test': ID };
const name = (n: number) => `${ID}-n${n}`;
const ip = (n: number) => `198.51.100.${20 + n}`;

function inventory(): string {
  const machines = [1, 2, 3].map((n) => `    - id: ${ID}-m${n}\n      nodeName: ${name(n)}\n      addresses:\n        - { type: InternalIP, address: ${ip(n)} }\n`).join('');
  return `inventory:\n  machines:\n${machines}loadBalancer:\n  pools:\n    - name: ${ID}-nodes\n      nodeAddresses: InternalIP\n      namespaces: [${NS}]\n      serviceSelector: edge-ccm-test=${ID}\n`;
}

let admin: KubeTransport;
let nodes: ResourceClient<V1Node>;
let services: ResourceClient<V1Service>;
let ccm: CcmProcess | undefined;

beforeAll(async () => {
  const cp = await sharedControlPlane();
  admin = transportFor(cp.adminKubeconfig);
  nodes = new ResourceClient<V1Node>(admin, NODES);
  services = new ResourceClient<V1Service>(admin, SERVICES);
  const path = join(tempDir('edge-ccm-node-pools-'), 'inventory.yaml');
  replaceFile(path, inventory());
  for (const n of [1, 2]) await addNode(n);
  ccm = CcmProcess.binary([
    '--cloud-provider=static', `--cloud-config=${path}`, `--kubeconfig=${cp.adminKubeconfig}`,
    '--secure-port=0', '--leader-elect=false', '--configure-cloud-routes=false',
  ]);
}, 120_000);

afterAll(async () => {
  await new ResourceClient<V1EndpointSlice>(admin, ENDPOINT_SLICES).delete(`${ID}-local-1`, { namespace: NS }).catch(() => undefined);
  for (const s of ['web', 'clash', 'other', 'local']) await services.delete(`${ID}-${s}`, { namespace: NS }).catch(() => undefined);
  await eventually('our services gone', async () => (await services.list({ namespace: NS, query: { labelSelector: `edge-ccm-test=${ID}` } })).items.length === 0, 60_000).catch(() => undefined);
  await ccm?.stop();
  for (const n of [1, 2, 3]) await nodes.delete(name(n)).catch(() => undefined);
}, 120_000);

async function addNode(n: number): Promise<void> {
  await nodes.create({ apiVersion: 'v1', kind: 'Node', metadata: { name: name(n), labels: { 'kubernetes.io/hostname': name(n) } }, spec: { taints: [UNINITIALIZED] } });
  await setReady(nodes, name(n), 'True');
}

async function createService(suffix: string, port: number, opts: { local?: boolean } = {}): Promise<void> {
  await services.create({
    apiVersion: 'v1', kind: 'Service',
    metadata: { name: `${ID}-${suffix}`, namespace: NS, labels: LABEL },
    spec: { type: 'LoadBalancer', selector: { app: suffix }, ports: [{ port, protocol: 'TCP' }], ...(opts.local ? { externalTrafficPolicy: 'Local' } : {}) },
  }, { namespace: NS });
}

/** Waits until the service's ingress is exactly `expected` (in order). */
async function ingressIs(suffix: string, expected: string[]): Promise<void> {
  let last: (string | undefined)[] = [];
  await eventually(`${suffix} ingress ${expected.join(',') || '(none)'}`, async () => {
    const s = await services.get(`${ID}-${suffix}`, { namespace: NS });
    last = (s.status?.loadBalancer?.ingress ?? []).map((i) => i.ip);
    return JSON.stringify(last) === JSON.stringify(expected);
  }, 60_000).catch((e: Error) => {
    throw new Error(`${e.message}; last seen ${JSON.stringify(last)}\n${ccm?.logs().slice(-3000)}`);
  });
}

describe('node-address pools', () => {
  test('the service gets the InternalIPs of the nodes, and follows them joining, excluded, tainted by the autoscaler and leaving', async () => {
    await createService('web', 80);
    await ingressIs('web', [ip(1), ip(2)]);
    // Joins: edge-ccm initialises it (providerID, then its addresses) and the status follows.
    await addNode(3);
    await ingressIs('web', [ip(1), ip(2), ip(3)]);
    await nodes.patch(name(1), 'merge', { metadata: { labels: { 'node.kubernetes.io/exclude-from-external-load-balancers': 'true' } } });
    await ingressIs('web', [ip(2), ip(3)]);
    await nodes.patch(name(2), 'merge', { spec: { taints: [{ key: 'ToBeDeletedByClusterAutoscaler', value: '1700000000', effect: 'NoSchedule' }] } });
    await ingressIs('web', [ip(3)]);
    await nodes.patch(name(1), 'merge', { metadata: { labels: { 'node.kubernetes.io/exclude-from-external-load-balancers': null } } });
    await ingressIs('web', [ip(1), ip(3)]);
    await nodes.delete(name(3));
    await ingressIs('web', [ip(1)]);
  }, 180_000);

  test('port-aware sharing: the same port is refused with a Warning naming the holder; another port shares the addresses', async () => {
    await ingressIs('web', [ip(1)]);
    await createService('clash', 80);
    await createService('other', 8080);
    await ingressIs('other', [ip(1)]);
    const events = new ResourceClient<CoreV1Event>(admin, EVENTS);
    const warning = await eventually('a SyncLoadBalancerFailed event on the clashing service', async () => {
      const list = await events.list({ namespace: NS, query: { fieldSelector: `involvedObject.name=${ID}-clash` } });
      return list.items.find((e) => e.reason === 'SyncLoadBalancerFailed');
    }, 60_000);
    expect(warning.type).toBe('Warning');
    expect(warning.message).toContain(`port TCP/80 is already served on the node addresses of pool ${ID}-nodes by service ${NS}/${ID}-web`);
    expect((await services.get(`${ID}-clash`, { namespace: NS })).status?.loadBalancer?.ingress ?? []).toEqual([]);
  }, 180_000);

  test('externalTrafficPolicy: Local: the addresses of the nodes with a ready endpoint, following the EndpointSlices', async () => {
    // From the tests above: n1 eligible, n2 tainted ToBeDeletedByClusterAutoscaler, n3 gone.
    await addNode(3);
    await nodes.patch(name(2), 'merge', { spec: { taints: [] } });
    await ingressIs('web', [ip(1), ip(2), ip(3)]);
    const slices = new ResourceClient<V1EndpointSlice>(admin, ENDPOINT_SLICES);
    const slice = (endpoints: { node: number; ready?: boolean }[]): V1EndpointSlice => ({
      apiVersion: 'discovery.k8s.io/v1', kind: 'EndpointSlice',
      metadata: { name: `${ID}-local-1`, namespace: NS, labels: { [SERVICE_NAME_LABEL]: `${ID}-local` } },
      addressType: 'IPv4',
      endpoints: endpoints.map((e, i) => ({ addresses: [`10.244.${e.node}.${10 + i}`], nodeName: name(e.node), conditions: { ready: e.ready ?? true } })),
      ports: [{ port: 9090, protocol: 'TCP' }],
    });
    const setSlice = async (endpoints: { node: number; ready?: boolean }[]) => {
      const current = await slices.get(`${ID}-local-1`, { namespace: NS });
      await slices.update({ ...slice(endpoints), metadata: { ...slice(endpoints).metadata, resourceVersion: current.metadata?.resourceVersion } }, { namespace: NS });
    };
    // No endpoint yet: no address (traffic to any node would be dropped there).
    await createService('local', 9090, { local: true });
    await eventually('the Local service synced once', async () => {
      const events = await new ResourceClient<CoreV1Event>(admin, EVENTS).list({ namespace: NS, query: { fieldSelector: `involvedObject.name=${ID}-local` } });
      return events.items.some((e) => e.reason === 'EnsuredLoadBalancer');
    }, 60_000);
    await ingressIs('local', []);
    await slices.create(slice([{ node: 2 }]), { namespace: NS });
    await ingressIs('local', [ip(2)]);
    await setSlice([{ node: 3 }, { node: 1 }, { node: 2, ready: false }]);
    await ingressIs('local', [ip(1), ip(3)]);
    // An endpoint node that is not eligible (excluded) does not count; the others stay.
    await nodes.patch(name(1), 'merge', { metadata: { labels: { 'node.kubernetes.io/exclude-from-external-load-balancers': 'true' } } });
    await ingressIs('local', [ip(3)]);
    await ingressIs('web', [ip(2), ip(3)]);
    await slices.delete(`${ID}-local-1`, { namespace: NS });
    await ingressIs('local', []);
    // The Cluster service kept every eligible node throughout.
    await ingressIs('web', [ip(2), ip(3)]);
  }, 180_000);
});
