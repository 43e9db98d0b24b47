import type { V1Node, V1NodeAddress, V1NodeCondition, V1Taint } from '@kubernetes/client-node';
import type { EventSubject } from './event-recorder.ts';

/**
 * Small read-only helpers on plain-JSON Nodes, shared by every controller that looks at nodes:
 * well-known keys, taints, conditions, labels, addresses. Nothing here writes to the API.
 */

/** Set by kubelets started with --cloud-provider=external until the cloud node controller initialises the node. */
export const TAINT_EXTERNAL_CLOUD_PROVIDER = 'node.cloudprovider.kubernetes.io/uninitialized';
/** Set by the lifecycle controller on nodes whose machine is shut down. */
export const TAINT_NODE_SHUTDOWN = 'node.cloudprovider.kubernetes.io/shutdown';
/** The kubelet's --node-ip, published for the cloud node controller (one IP or a dual-stack pair). */
export const ANNOTATION_PROVIDED_NODE_IP = 'alpha.kubernetes.io/provided-node-ip';

export const LABEL_INSTANCE_TYPE_STABLE = 'node.kubernetes.io/instance-type';
export const LABEL_INSTANCE_TYPE_BETA = 'beta.kubernetes.io/instance-type';
export const LABEL_TOPOLOGY_ZONE = 'topology.kubernetes.io/zone';
export const LABEL_FAILURE_DOMAIN_BETA_ZONE = 'failure-domain.beta.kubernetes.io/zone';
export const LABEL_TOPOLOGY_REGION = 'topology.kubernetes.io/region';
export const LABEL_FAILURE_DOMAIN_BETA_REGION = 'failure-domain.beta.kubernetes.io/region';

export type ConditionStatus = 'True' | 'False' | 'Unknown';

export function nodeName(node: V1Node): string {
  return node.metadata?.name ?? '';
}

/** The node as an event subject: list items carry no kind/apiVersion, events need them. */
export function nodeEventSubject(node: V1Node): EventSubject {
  const m = node.metadata;
  return { apiVersion: 'v1', kind: 'Node', metadata: { name: m?.name, uid: m?.uid, resourceVersion: m?.resourceVersion } };
}

/** spec.podCIDRs, or the older single spec.podCIDR (the route controller reads them, node IPAM writes them). */
export function podCIDRs(node: V1Node): string[] {
  const many = node.spec?.podCIDRs ?? [];
  if (many.length > 0) return many;
  return node.spec?.podCIDR ? [node.spec.podCIDR] : [];
}

// --- taints ---

export function findTaint(node: V1Node, key: string): V1Taint | undefined {
  const taints = node.spec?.taints; // a loop for the reason getCondition has one
  if (taints) for (const t of taints) if (t.key === key) return t;
  return undefined;
}

export function hasTaint(node: V1Node, key: string): boolean {
  return findTaint(node, key) !== undefined;
}

/** The node's taints without any taint of that key (every effect). */
export function taintsWithout(node: V1Node, key: string): V1Taint[] {
  return (node.spec?.taints ?? []).filter((t) => t.key !== key);
}

/** The node's taints plus `taint`, unless one with the same key and effect is already there. */
export function taintsWith(node: V1Node, taint: V1Taint): V1Taint[] {
  const taints = node.spec?.taints ?? [];
  if (taints.some((t) => t.key === taint.key && t.effect === taint.effect)) return taints;
  return [...taints, taint];
}

export function isUninitialized(node: V1Node): boolean {
  return hasTaint(node, TAINT_EXTERNAL_CLOUD_PROVIDER);
}

// --- conditions ---

export function getCondition(node: V1Node, type: string): V1NodeCondition | undefined {
  // A loop, not find() with an arrow: the arrow's capture of `type` costs a scope object per
  // call, and this runs for every node every lifecycle period.
  const conditions = node.status?.conditions;
  if (conditions) for (const c of conditions) if (c.type === type) return c;
  return undefined;
}

/** Status of the node's condition of that type; undefined when the node has none. */
export function conditionStatus(node: V1Node, type: string): ConditionStatus | undefined {
  return getCondition(node, type)?.status as ConditionStatus | undefined;
}

export function isNodeReady(node: V1Node): boolean {
  return conditionStatus(node, 'Ready') === 'True';
}

// --- labels and addresses ---

export function nodeLabels(node: V1Node): Record<string, string> {
  return node.metadata?.labels ?? {};
}

export function nodeAddresses(node: V1Node): V1NodeAddress[] {
  return node.status?.addresses ?? [];
}

/** Milliseconds since the node was created, or undefined when the node has no creation time. */
export function nodeAgeMs(node: V1Node, now: number = Date.now()): number | undefined {
  const created = node.metadata?.creationTimestamp;
  if (created === undefined) return undefined;
  const ms = new Date(created as unknown as string).getTime();
  return Number.isNaN(ms) ? undefined : now - ms;
}
