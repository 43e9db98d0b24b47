import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import type { CoreV1Event, V1Node, V1NodeAddress } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import { CloudNodeController } from '../../src/controllers/node/index.ts';
import { EventBroadcaster } from '../../src/kube/events.ts';
import { Informer } from '../../src/kube/informer/index.ts';
import { ANNOTATION_PROVIDED_NODE_IP, TAINT_EXTERNAL_CLOUD_PROVIDER } from '../../src/kube/node-helpers.ts';
import { EVENTS, NODES, ResourceClient } from '../../src/kube/resources.ts';
import type { KubeTransport } from '../../src/kube/transport.ts';
import { createLogger } from '../../src/log.ts';
import { FakeCloud, fakeMetadata } from '../fakes/fake-cloud.ts';
import { type ControlPlane, sharedControlPlane } from '../harness/control-plane.ts';
import { transportFor } from '../harness/kubeconfig.ts';
import { eventually } from '../harness/eventually.ts';
import { controllerContext } from '../fakes/controller-context.ts';

// The cloud node controller against a real API server: nodes registered as a kubelet with
// --cloud-provider=external registers them (uninitialized taint, Hostname address, maybe the
// provided-node-ip annotation) get initialised by the controller's real writes.

const PREFIX = `ncit-${process.pid}-`;
const STATUS_PERIOD_MS = 1_000;

let cp: ControlPlane;
let transport: KubeTransport;
let nodes: ResourceClient<V1Node>;
let cloud: FakeCloud;
let broadcaster: EventBroadcaster;
let registry: Registry;
const stop = new AbortController();
const running: Promise<void>[] = [];

beforeAll(async () => {
  cp = await sharedControlPlane();
  transport = transportFor(cp.adminKubeconfig);
  nodes = new ResourceClient<V1Node>(transport, NODES);
  const logger = createLogger({ verbosity: 0, write: () => {} });
  const nodeInformer = new Informer<V1Node>({ transport, type: NODES, logger });
  broadcaster = new EventBroadcaster({ transport, logger });
  cloud = new FakeCloud();
  registry = new Registry();
  const ctx = controllerContext({
    transport,
    recorder: broadcaster.recorder('cloud-node-controller'),
    logger,
    registry,
    cloud,
    clusterName: 'it',
    nodeInformer,
    // Other test files may share this control plane: only our nodes are ours.
    isManagedNode: (n) => n.metadata?.name?.startsWith(PREFIX) ?? false,
  });
  const controller = new CloudNodeController(ctx, { workers: 2, nodeStatusUpdateFrequencyMs: STATUS_PERIOD_MS });
  running.push(nodeInformer.run(stop.signal), controller.run(stop.signal));
}, 240_000);

afterAll(async () => {
  stop.abort();
  await Promise.allSettled(running);
  await broadcaster?.close(1_000);
  if (nodes) {
    const ours = (await nodes.list()).items.filter((n) => n.metadata?.name?.startsWith(PREFIX));
    await Promise.allSettled(ours.map((n) => nodes.delete(n.metadata!.name!)));
  }
});

/** A node as a kubelet with --cloud-provider=external registers it. */
function kubeletNode(name: string, extra: { providedNodeIP?: string; labels?: Record<string, string>; tainted?: boolean } = {}): V1Node {
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: {
      name,
      labels: { 'kubernetes.io/hostname': name, ...extra.labels },
      annotations: extra.providedNodeIP ? { [ANNOTATION_PROVIDED_NODE_IP]: extra.providedNodeIP } : undefined,
    },
    spec: extra.tainted === false ? {} : { taints: [{ key: TAINT_EXTERNAL_CLOUD_PROVIDER, value: 'true', effect: 'NoSchedule' }] },
    status: { addresses: [{ type: 'Hostname', address: name }] },
  };
}


async function eventsFor(name: string): Promise<CoreV1Event[]> {
  const events = new ResourceClient<CoreV1Event>(transport, EVENTS);
  const list = await events.list({ namespace: 'default', query: { fieldSelector: `involvedObject.kind=Node,involvedObject.name=${name}` } });
  return list.items;
}

const isTainted = (n: V1Node) => (n.spec?.taints ?? []).some((t) => t.key === TAINT_EXTERNAL_CLOUD_PROVIDER);

describe('cloud node controller against a real API server', () => {
  test('a node registered with the uninitialized taint gets initialised', async () => {
    const name = `${PREFIX}init`;
    const addresses: V1NodeAddress[] = [
      { type: 'InternalIP', address: '10.0.0.1' },
      { type: 'InternalIP', address: '10.0.0.9' },
      { type: 'ExternalIP', address: '203.0.113.5' },
    ];
    cloud.setNode(name, {
      metadata: fakeMetadata(name, {
        instanceType: 'm1.small',
        zone: 'zone-a',
        region: 'region-1',
        nodeAddresses: addresses,
        additionalLabels: { 'example.com/rack': 'r12', 'node.kubernetes.io/forbidden': 'x' },
      }),
    });
    const created = performance.now();
    await nodes.create(kubeletNode(name, { providedNodeIP: '10.0.0.1' }));

    const node = await eventually('the node to be initialised', async () => {
      const n = await nodes.get(name);
      return !isTainted(n) && (n.status?.addresses?.length ?? 0) > 1 ? n : undefined;
    });
    const initializedMs = performance.now() - created;
    console.log(`node-controller: node creation to initialised (taint gone, addresses written): ${initializedMs.toFixed(0)} ms`);

    expect(node.spec?.providerID).toBe(`fake://${name}`);
    // Only the uninitialized taint went: the API server's admission added not-ready, which stays.
    expect(node.spec?.taints).toEqual([{ key: 'node.kubernetes.io/not-ready', effect: 'NoSchedule' }]);
    expect(node.metadata?.labels).toMatchObject({
      'node.kubernetes.io/instance-type': 'm1.small',
      'beta.kubernetes.io/instance-type': 'm1.small',
      'topology.kubernetes.io/zone': 'zone-a',
      'failure-domain.beta.kubernetes.io/zone': 'zone-a',
      'topology.kubernetes.io/region': 'region-1',
      'failure-domain.beta.kubernetes.io/region': 'region-1',
      'example.com/rack': 'r12',
    });
    expect(node.metadata?.labels?.['node.kubernetes.io/forbidden']).toBeUndefined();
    // The node IP first and the only InternalIP, then the other types, then the kubelet's Hostname.
    expect(node.status?.addresses).toEqual([
      { type: 'InternalIP', address: '10.0.0.1' },
      { type: 'ExternalIP', address: '203.0.113.5' },
      { type: 'Hostname', address: name },
    ]);

    const synced = await eventually('the Synced event', async () => (await eventsFor(name)).find((e) => e.reason === 'Synced'));
    expect(synced).toMatchObject({ type: 'Normal', message: 'Node synced successfully', source: { component: 'cloud-node-controller' } });
    expect(cloud.count('instanceMetadata', name)).toBeGreaterThanOrEqual(1);
    expect(await registry.getSingleMetricAsString('node_controller_cloud_provider_taint_removal_delay_seconds')).toContain('_count 1');
  }, 120_000);

  test('a node the provider had no metadata for is tried again with backoff, and initialised once the provider knows it (no change notice, no Node update)', async () => {
    const name = `${PREFIX}late`;
    // As a Proxmox VM list still empty, or cached from before the VM appeared, when the kubelet registers.
    cloud.setNode(name, { metadata: null });
    await nodes.create(kubeletNode(name));
    await eventually('the provider asked once', () => cloud.count('instanceMetadata', name) >= 1);
    expect(isTainted(await nodes.get(name))).toBe(true);
    cloud.setNode(name, { metadata: fakeMetadata(name, { nodeAddresses: [{ type: 'InternalIP', address: '10.2.0.1' }] }) });
    const node = await eventually('the node initialised by a retry', async () => {
      const n = await nodes.get(name);
      return isTainted(n) ? undefined : n;
    });
    expect(node.spec?.providerID).toBe(`fake://${name}`);
    expect(cloud.count('instanceMetadata', name)).toBeGreaterThanOrEqual(2);
  }, 120_000);

  test('a provided node IP the provider does not know keeps the taint and raises a Warning', async () => {
    const name = `${PREFIX}badip`;
    cloud.setNode(name, { metadata: fakeMetadata(name, { nodeAddresses: [{ type: 'InternalIP', address: '10.0.0.1' }] }) });
    await nodes.create(kubeletNode(name, { providedNodeIP: '10.0.0.2' }));
    const warning = await eventually('the Warning event', async () => (await eventsFor(name)).find((e) => e.type === 'Warning'));
    expect(warning.message).toContain('10.0.0.2');
    const node = await nodes.get(name);
    expect(isTainted(node)).toBe(true);
    expect(node.spec?.providerID).toBeUndefined();
  }, 120_000);

  test('an untainted node gets its GA labels from the beta ones and is not initialised', async () => {
    const name = `${PREFIX}plain`;
    // Were it initialised, it would get this providerID and a Synced event.
    cloud.setNode(name, { metadata: fakeMetadata(name, { instanceType: 'would-be-set' }) });
    await nodes.create(kubeletNode(name, { tainted: false, labels: { 'failure-domain.beta.kubernetes.io/zone': 'old-zone' } }));
    const node = await eventually('the GA zone label', async () => {
      const n = await nodes.get(name);
      return n.metadata?.labels?.['topology.kubernetes.io/zone'] === 'old-zone' ? n : undefined;
    });
    expect(node.metadata?.labels?.['failure-domain.beta.kubernetes.io/zone']).toBe('old-zone');
    expect(node.metadata?.labels?.['node.kubernetes.io/instance-type']).toBeUndefined();
    expect(node.spec?.providerID).toBeUndefined();
    expect((await eventsFor(name)).filter((e) => e.reason === 'Synced')).toEqual([]);
  }, 120_000);

  test('the periodic pass writes changed addresses of initialised nodes', async () => {
    const name = `${PREFIX}periodic`;
    cloud.setNode(name, { metadata: fakeMetadata(name, { nodeAddresses: [{ type: 'InternalIP', address: '10.1.0.1' }] }) });
    await nodes.create(kubeletNode(name));
    await eventually('initial addresses', async () => ((await nodes.get(name)).status?.addresses?.some((a) => a.address === '10.1.0.1') ? true : undefined));
    cloud.setNode(name, { metadata: fakeMetadata(name, { nodeAddresses: [{ type: 'InternalIP', address: '10.1.0.2' }] }) });
    const node = await eventually('the new address', async () => {
      const n = await nodes.get(name);
      return n.status?.addresses?.some((a) => a.address === '10.1.0.2') ? n : undefined;
    });
    expect(node.status?.addresses).toEqual([
      { type: 'InternalIP', address: '10.1.0.2' },
      { type: 'Hostname', address: name },
    ]);
  }, 120_000);
});
