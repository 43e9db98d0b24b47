import type { V1Node } from '@kubernetes/client-node';
import type { ResourceClient } from '../../src/kube/resources.ts';
import { eventually } from './eventually.ts';
import { UNINITIALIZED } from './nodes.ts';

/**
 * The Nodes one test file registers as kubelets would (the uninitialized taint), labelled with
 * `label`=this process's pid so that the edge-ccm under test manages only them
 * (`--managed-node-selector`, selectorFlag) and afterAll removes only them.
 */
export function ownNodes(nodes: () => ResourceClient<V1Node>, label: string, prefix: string, waitMs: number) {
  const value = String(process.pid);
  const name = (suffix: string) => `${prefix}${suffix}`;
  return {
    name,
    selectorFlag: `--managed-node-selector=${label}=${value}`,
    async create(suffix: string): Promise<string> {
      const n = name(suffix);
      await nodes().create({ metadata: { name: n, labels: { [label]: value } }, spec: { taints: [UNINITIALIZED] } });
      return n;
    },
    /** The node once initialised: providerID set, taint gone, and the addresses (written on the status right after) landed. */
    initialised: (n: string) => eventually(`node ${n} initialised`, async () => {
      const node = await nodes().get(n);
      return node.spec?.providerID && !node.spec.taints?.some((t) => t.key === UNINITIALIZED.key) && node.status?.addresses?.length ? node : undefined;
    }, waitMs),
    async removeAll(): Promise<void> {
      const ours = (await nodes().list({ query: { labelSelector: `${label}=${value}` } })).items;
      await Promise.allSettled(ours.map((n) => nodes().delete(n.metadata!.name!)));
    },
  };
}
