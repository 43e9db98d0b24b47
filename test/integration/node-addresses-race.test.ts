import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import type { V1Node, V1NodeAddress } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import { ApiCloudNodeWriter, CloudNodeController } from '../../src/controllers/node/index.ts';
import { EventBroadcaster } from '../../src/kube/events.ts';
import { Informer } from '../../src/kube/informer/index.ts';
import { TAINT_EXTERNAL_CLOUD_PROVIDER } from '../../src/kube/node-helpers.ts';
import { NODES, ResourceClient } from '../../src/kube/resources.ts';
import type { KubeTransport } from '../../src/kube/transport.ts';
import { createLogger } from '../../src/log.ts';
import { FakeCloud, fakeMetadata } from '../fakes/fake-cloud.ts';
import { type ControlPlane, sharedControlPlane } from '../harness/control-plane.ts';
import { eventually } from '../harness/eventually.ts';
import { transportFor } from '../harness/kubeconfig.ts';
import { sleep } from '../../src/util/time.ts';
import { controllerContext } from '../fakes/controller-context.ts';

// Issue 11, item 9, against a real API server: the cloud node controller's address write must
// not lose the Hostname a kubelet posts between the controller's read and its write.

const PREFIX = `nar-${process.pid}-`;

let cp: ControlPlane;
let transport: KubeTransport;
let nodes: ResourceClient<V1Node>;
let broadcaster: EventBroadcaster;
const logger = createLogger({ verbosity: 0, write: () => {} });
const stops: (() => Promise<void>)[] = [];

beforeAll(async () => {
  cp = await sharedControlPlane();
  transport = transportFor(cp.adminKubeconfig);
  nodes = new ResourceClient<V1Node>(transport, NODES);
  broadcaster = new EventBroadcaster({ transport, logger });
}, 240_000);

afterAll(async () => {
  for (const stop of stops) await stop();
  await broadcaster?.close(1_000);
  if (nodes) {
    const ours = (await nodes.list()).items.filter((n) => n.metadata?.name?.startsWith(PREFIX));
    await Promise.allSettled(ours.map((n) => nodes.delete(n.metadata!.name!)));
  }
});

/** Runs a node controller (with its own informer) for the nodes whose names start with `prefix`. */
function startController(cloud: FakeCloud, prefix: string, writer?: ApiCloudNodeWriter): void {
  const nodeInformer = new Informer<V1Node>({ transport, type: NODES, logger });
  const ctx = controllerContext({
    transport,
    recorder: broadcaster.recorder('cloud-node-controller'),
    logger,
    registry: new Registry(),
    cloud,
    clusterName: 'it',
    nodeInformer,
    // The control plane is shared with other test files: only these nodes are ours.
    isManagedNode: (n) => n.metadata?.name?.startsWith(prefix) ?? false,
  });
  const controller = new CloudNodeController(ctx, { workers: 4, nodeStatusUpdateFrequencyMs: 60_000 }, { writer });
  const abort = new AbortController();
  const running = [nodeInformer.run(abort.signal), controller.run(abort.signal)];
  stops.push(async () => {
    abort.abort();
    await Promise.allSettled(running);
  });
}

/** Registered as a kubelet with --cloud-provider=external does before its first status post: tainted, no addresses yet. */
const registering = (name: string): V1Node => ({
  apiVersion: 'v1',
  kind: 'Node',
  metadata: { name, labels: { 'kubernetes.io/hostname': name } },
  spec: { taints: [{ key: TAINT_EXTERNAL_CLOUD_PROVIDER, value: 'true', effect: 'NoSchedule' }] },
});

/** The kubelet's status post: a strategic merge patch, which merges addresses by type. */
const postHostname = (name: string) =>
  nodes.patch(name, 'strategic', { status: { addresses: [{ type: 'Hostname', address: name }] } }, { subresource: 'status' });

const providerAddress = (i: number): V1NodeAddress => ({ type: 'InternalIP', address: `10.77.${Math.floor(i / 200)}.${(i % 200) + 1}` });

const written = (name: string) => eventually(`${name}'s provider address written`, async () => {
  const node = await nodes.get(name);
  return node.status?.addresses?.some((a) => a.type === 'InternalIP') ? node : undefined;
});

describe('node addresses keep what the kubelet wrote', () => {
  test('a Hostname posted between the controller\'s read and its address write is kept (forced interleaving)', async () => {
    const prefix = `${PREFIX}forced-`;
    const name = `${prefix}0`;
    const cloud = new FakeCloud();
    cloud.setNode(name, { metadata: fakeMetadata(name, { nodeAddresses: [providerAddress(0)] }) });
    // The kubelet posts its status right when the controller is about to write the addresses.
    let posted = false;
    class KubeletRacingWriter extends ApiCloudNodeWriter {
      override async setAddresses(...args: Parameters<ApiCloudNodeWriter['setAddresses']>) {
        if (!posted) {
          posted = true;
          await postHostname(name);
        }
        return super.setAddresses(...args);
      }
    }
    startController(cloud, prefix, new KubeletRacingWriter(transport));
    await nodes.create(registering(name));
    const node = await written(name);
    expect(posted).toBe(true);
    expect(node.status?.addresses).toEqual([providerAddress(0), { type: 'Hostname', address: name }]);
  }, 60_000);

  test('20 nodes whose status is posted 0-40 ms after create all keep their Hostname', async () => {
    const prefix = `${PREFIX}many-`;
    const names = Array.from({ length: 20 }, (_, i) => `${prefix}${i}`);
    const cloud = new FakeCloud();
    names.forEach((name, i) => cloud.setNode(name, { metadata: fakeMetadata(name, { nodeAddresses: [providerAddress(i)] }) }));
    startController(cloud, prefix);
    await Promise.all(names.map(async (name, i) => {
      await nodes.create(registering(name));
      // Spread over the window in which the controller initialises the node and writes its addresses.
      await sleep((i * 2) % 41);
      await postHostname(name);
    }));
    const after = await Promise.all(names.map(written));
    const lost = after.filter((n) => !n.status?.addresses?.some((a) => a.type === 'Hostname')).map((n) => n.metadata!.name);
    expect(lost).toEqual([]);
    // The order depends on who wrote last (a strategic merge puts the kubelet's entry first); the entries do not.
    const byType = (list: V1NodeAddress[] = []) => [...list].sort((x, y) => x.type.localeCompare(y.type));
    after.forEach((node, i) => expect(byType(node.status?.addresses)).toEqual([{ type: 'Hostname', address: node.metadata!.name! }, providerAddress(i)]));
  }, 120_000);
});
