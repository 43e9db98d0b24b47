import type { V1Node, V1NodeAddress, V1Taint } from '@kubernetes/client-node';
import { ANNOTATION_PROVIDED_NODE_IP, TAINT_EXTERNAL_CLOUD_PROVIDER } from '../../src/kube/node-helpers.ts';

/** Nodes for the node controller's unit tests, shaped like upstream's test table entries. */

export const UNINITIALIZED: V1Taint = { key: TAINT_EXTERNAL_CLOUD_PROVIDER, value: 'true', effect: 'NoSchedule' };
export const OTHER_TAINT: V1Taint = { key: 'ImproveCoverageTaint', value: 'true', effect: 'NoSchedule' };

export const HOSTNAME = (address: string): V1NodeAddress => ({ type: 'Hostname', address });
export const INTERNAL = (address: string): V1NodeAddress => ({ type: 'InternalIP', address });
export const EXTERNAL = (address: string): V1NodeAddress => ({ type: 'ExternalIP', address });

export interface NodeShape {
  name?: string;
  tainted?: boolean;
  taints?: V1Taint[];
  providerID?: string;
  providedNodeIP?: string;
  labels?: Record<string, string>;
  addresses?: V1NodeAddress[];
  resourceVersion?: string;
}

export function makeNode(shape: NodeShape = {}): V1Node {
  const taints = shape.taints ?? (shape.tainted === false ? [] : [UNINITIALIZED]);
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: {
      name: shape.name ?? 'node0',
      resourceVersion: shape.resourceVersion ?? '1',
      creationTimestamp: '2012-01-01T00:00:00Z' as unknown as Date,
      labels: shape.labels,
      annotations: shape.providedNodeIP === undefined ? undefined : { [ANNOTATION_PROVIDED_NODE_IP]: shape.providedNodeIP },
    },
    spec: { providerID: shape.providerID, taints },
    status: { addresses: shape.addresses },
  };
}

/** The node as it is once initialisation removed its uninitialized taint (nothing else changed). */
export function untainted(node: V1Node): V1Node {
  return { ...node, spec: { ...node.spec, taints: (node.spec?.taints ?? []).filter((t) => t.key !== TAINT_EXTERNAL_CLOUD_PROVIDER) } };
}
