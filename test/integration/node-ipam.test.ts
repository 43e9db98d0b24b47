import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { join } from 'node:path';
import type { CoreV1Event, V1ConfigMap, V1Node } from '@kubernetes/client-node';
import { CONFIGMAPS, EVENTS, NODES, ResourceClient } from '../../src/kube/resources.ts';
import type { KubeTransport } from '../../src/kube/transport.ts';
import { CcmProcess, tempDir } from '../harness/ccm-process.ts';
import { sharedControlPlane, type ControlPlane } from '../harness/control-plane.ts';
import { eventually } from '../harness/eventually.ts';
import { replaceFile } from '../harness/files.ts';
import { transportFor } from '../harness/kubeconfig.ts';

/**
 * Node IPAM in the compiled binary (dist/edge-ccm) with the static provider against the real
 * control plane. RangeAllocator: distinct CIDRs, a deleted node's CIDR back in the set.
 * CloudAllocator: the inventory's pin, a node deleted and registered again gets the same CIDRs,
 * so does one after a restart (a new leader rebuilds from the Nodes and its ConfigMap), and a
 * full cluster CIDR is a Warning event on the node, the process running on. Each instance only
 * manages the nodes labelled for it (other files share this control plane).
 */

const ID = `ipam-${process.pid}`;
const UNINITIALIZED = 'node.cloudprovider.kubernetes.io/uninitialized';
/** A /24 cut at /26: four node CIDRs, so exhaustion is one node away. */
const CLUSTER_CIDR = '10.123.0.0/24';

let cp: ControlPlane;
let admin: KubeTransport;
let nodes: ResourceClient<V1Node>;
let dir: string;

beforeAll(async () => {
  cp = await sharedControlPlane();
  admin = transportFor(cp.adminKubeconfig);
  nodes = new ResourceClient<V1Node>(admin, NODES);
  dir = tempDir('edge-ccm-node-ipam-');
}, 240_000);

afterAll(async () => {
  await CcmProcess.stopAll();
  if (!nodes) return;
  const ours = (await nodes.list()).items.filter((n) => n.metadata?.name?.startsWith(`${ID}-`));
  await Promise.allSettled(ours.map((n) => nodes.delete(n.metadata!.name!)));
  await new ResourceClient<V1ConfigMap>(admin, CONFIGMAPS).delete(`${ID}-cloud-node-ipam`, { namespace: 'kube-system' }).catch(() => undefined);
});

/** The inventory: machines named after their nodes; `pins` gives some their pod CIDRs. */
function inventory(names: string[], pins: Record<string, string> = {}): string {
  const machines = names.map((name, i) => [
    `    - id: ${name}`,
    '      addresses:',
    `        - { type: InternalIP, address: 10.78.0.${i + 1} }`,
    ...(pins[name] ? [`      podCIDRs: [${pins[name]}]`] : []),
  ].join('\n'));
  return `inventory:\n  machines:\n${machines.join('\n')}\n`;
}

function start(mode: 'RangeAllocator' | 'CloudAllocator', inventoryPath: string): CcmProcess {
  return CcmProcess.binary([
    '--cloud-provider=static', `--cloud-config=${inventoryPath}`, `--kubeconfig=${cp.adminKubeconfig}`,
    '--secure-port=0', `--leader-elect-resource-name=${ID}-${mode === 'CloudAllocator' ? 'cloud' : 'range'}`,
    '--leader-elect-lease-duration=3s', '--leader-elect-renew-deadline=2s', '--leader-elect-retry-period=500ms',
    `--managed-node-selector=edge-ccm-test=${ID}-${mode}`,
    '--controllers=*,nodeipam', '--allocate-node-cidrs', `--cluster-cidr=${CLUSTER_CIDR}`, '--node-cidr-mask-size=26',
    `--cidr-allocator-type=${mode}`,
  ]);
}

/** A node as a kubelet with --cloud-provider=external registers it. */
async function register(name: string, mode: string): Promise<void> {
  await nodes.create({
    metadata: { name, labels: { 'kubernetes.io/hostname': name, 'edge-ccm-test': `${ID}-${mode}` } },
    spec: { taints: [{ key: UNINITIALIZED, value: 'true', effect: 'NoSchedule' }] },
    status: { addresses: [{ type: 'Hostname', address: name }] },
  });
}

async function podCIDRs(name: string, ccm: CcmProcess): Promise<string[]> {
  return eventually(`node ${name} given pod CIDRs`, async () => {
    const n = await nodes.get(name);
    return n.spec?.podCIDRs?.length ? n.spec.podCIDRs : undefined;
  }, { timeoutMs: 20_000, explain: () => ccm.logs().slice(-3000) });
}

async function deleted(name: string): Promise<void> {
  await nodes.delete(name);
  await eventually(`node ${name} gone`, () => nodes.get(name).then(() => undefined, () => true));
}

describe('node IPAM (dist/edge-ccm, static provider)', () => {
  test('RangeAllocator: distinct CIDRs; a deleted node\'s CIDR goes to the next node', async () => {
    const names = [1, 2, 3, 4, 5].map((i) => `${ID}-r${i}`);
    const path = join(dir, 'range.yaml');
    replaceFile(path, inventory(names));
    const ccm = start('RangeAllocator', path);
    await ccm.waitForLog('successfully acquired lease', 30_000);
    for (const name of names.slice(0, 4)) await register(name, 'RangeAllocator');
    const got = await Promise.all(names.slice(0, 4).map((n) => podCIDRs(n, ccm)));
    // Four nodes, four /26 of the /24: every one given once.
    expect(got.map((c) => c[0]).sort()).toEqual(['10.123.0.0/26', '10.123.0.128/26', '10.123.0.192/26', '10.123.0.64/26']);
    // The set is full: the fifth node gets the CIDR a deletion frees.
    await deleted(names[0]!);
    await register(names[4]!, 'RangeAllocator');
    expect(await podCIDRs(names[4]!, ccm)).toEqual(got[0]!);
    expect(await ccm.stop()).toBe(0);
    for (const name of names) await nodes.delete(name).catch(() => undefined);
  }, 60_000);

  test('CloudAllocator: the pin; the same CIDRs after re-registration and a new leader; exhaustion is a Warning event', async () => {
    const names = [1, 2, 3, 4, 5].map((i) => `${ID}-c${i}`);
    const [pinned, second, third, fourth, fifth] = names as [string, string, string, string, string];
    const path = join(dir, 'cloud.yaml');
    replaceFile(path, inventory(names, { [pinned]: '10.123.0.192/26' }));
    let ccm = start('CloudAllocator', path);
    await ccm.waitForLog('successfully acquired lease', 30_000);
    for (const name of [pinned, second, third]) await register(name, 'CloudAllocator');
    expect(await podCIDRs(pinned, ccm)).toEqual(['10.123.0.192/26']);
    const secondCIDRs = await podCIDRs(second, ccm);
    const thirdCIDRs = await podCIDRs(third, ccm);
    expect(secondCIDRs).not.toEqual(thirdCIDRs);

    // Deleted and registered again: the machine's CIDR, although a free one comes first in the set.
    await deleted(second);
    await register(second, 'CloudAllocator');
    expect(await podCIDRs(second, ccm)).toEqual(secondCIDRs);

    // A new leader: rebuilt from the Nodes and the ConfigMap, where the machines' CIDRs are.
    expect(await ccm.stop()).toBe(0);
    await deleted(third);
    ccm = start('CloudAllocator', path);
    await ccm.waitForLog('node IPAM state rebuilt', 30_000);
    // A newcomer first: without the record it would be given the third machine's free CIDR.
    await register(fourth, 'CloudAllocator');
    expect(await podCIDRs(fourth, ccm)).not.toEqual(thirdCIDRs);
    await register(third, 'CloudAllocator');
    expect(await podCIDRs(third, ccm)).toEqual(thirdCIDRs);
    const record = await new ResourceClient<V1ConfigMap>(admin, CONFIGMAPS).get(`${ID}-cloud-node-ipam`, { namespace: 'kube-system' });
    expect(record.data?.[`static_3A_2F_2F${third}`]).toBe(thirdCIDRs.join(','));

    // Every CIDR is a machine's now: the fifth finds none, a Warning event, and the process goes on.
    await register(fifth, 'CloudAllocator');
    const events = new ResourceClient<CoreV1Event>(admin, EVENTS);
    const warning = await eventually('a CIDRNotAvailable event on the fifth node', async () => {
      const list = await events.list({ namespace: 'default', query: { fieldSelector: `involvedObject.kind=Node,involvedObject.name=${fifth}` } });
      return list.items.find((e) => e.reason === 'CIDRNotAvailable');
    }, { timeoutMs: 20_000, explain: () => ccm.logs().slice(-3000) });
    expect(warning.type).toBe('Warning');
    expect(warning.message).toContain(`No free /26 left in --cluster-cidr ${CLUSTER_CIDR}`);
    expect((await nodes.get(fifth)).spec?.podCIDRs).toBeUndefined();
    expect(ccm.proc.exitCode).toBeNull();
    expect(await ccm.stop()).toBe(0);
  }, 60_000);
});
