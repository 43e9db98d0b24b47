import type { V1Node, V1Taint } from '@kubernetes/client-node';
import { isNotFound } from '../../src/kube/errors.ts';
import type { ResourceClient } from '../../src/kube/resources.ts';

/** The taint a kubelet with --cloud-provider=external registers its node with. */
export const UNINITIALIZED: V1Taint = { key: 'node.cloudprovider.kubernetes.io/uninitialized', value: 'true', effect: 'NoSchedule' };

/**
 * A node as a kubelet with --cloud-provider=external registers it: the uninitialized taint, its
 * hostname label and Hostname address (status in the same request).
 */
export function kubeletNode(name: string, opts: { hostname?: string; labels?: Record<string, string> } = {}): V1Node {
  const hostname = opts.hostname ?? name;
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: { name, labels: { 'kubernetes.io/hostname': hostname, ...opts.labels } },
    spec: { taints: [{ ...UNINITIALIZED }] },
    status: { addresses: [{ type: 'Hostname', address: hostname }] },
  };
}

/** Sets the node's Ready condition as a kubelet would (no kubelet runs in these tests). */
export async function setReady(nodes: ResourceClient<V1Node>, name: string, status: 'True' | 'False'): Promise<void> {
  const now = new Date().toISOString();
  // Merge patch of status: the whole conditions list is the test's to set.
  await nodes.patch(name, 'merge', {
    status: { conditions: [{ type: 'Ready', status, reason: status === 'True' ? 'KubeletReady' : 'KubeletNotReady', message: 'set by test', lastHeartbeatTime: now, lastTransitionTime: now }] },
  }, { subresource: 'status' });
}

export async function nodeExists(nodes: ResourceClient<V1Node>, name: string): Promise<boolean> {
  try {
    await nodes.get(name);
    return true;
  } catch (e) {
    if (isNotFound(e)) return false;
    throw e;
  }
}
