import type { V1Node } from '@kubernetes/client-node';
import type { InstanceMetadata } from '../../cloud/types.ts';
import {
  LABEL_FAILURE_DOMAIN_BETA_REGION,
  LABEL_FAILURE_DOMAIN_BETA_ZONE,
  LABEL_INSTANCE_TYPE_BETA,
  LABEL_INSTANCE_TYPE_STABLE,
  LABEL_TOPOLOGY_REGION,
  LABEL_TOPOLOGY_ZONE,
  nodeLabels,
} from '../../kube/node-helpers.ts';
import { isKubernetesNamespacedLabel } from '../../kube/labels.ts';

// The reserved-namespace rule lives with the label syntax, where config validation uses it too.
export { isKubernetesNamespacedLabel };

/**
 * Label decisions of the cloud node controller: the cloud labels set at initialisation, and the
 * beta -> GA reconciliation done on initialised nodes (upstream labelReconcileInfo: the beta label
 * is the source of truth, the GA label is added or corrected).
 */
const BETA_TO_GA: readonly (readonly [beta: string, ga: string])[] = [
  [LABEL_FAILURE_DOMAIN_BETA_ZONE, LABEL_TOPOLOGY_ZONE],
  [LABEL_FAILURE_DOMAIN_BETA_REGION, LABEL_TOPOLOGY_REGION],
  [LABEL_INSTANCE_TYPE_BETA, LABEL_INSTANCE_TYPE_STABLE],
];

/** GA labels to set so they match their beta labels; empty when nothing needs writing. */
export function labelsToReconcile(node: V1Node): Record<string, string> {
  const labels = nodeLabels(node);
  const update: Record<string, string> = {};
  for (const [beta, ga] of BETA_TO_GA) {
    const value = labels[beta];
    if (value !== undefined && labels[ga] !== value) update[ga] = value;
  }
  return update;
}

export interface CloudLabels {
  /** Labels to set on the node. */
  labels: Record<string, string>;
  /** Additional labels the provider asked for that were left out, and why (for a log line). */
  discarded: { key: string; reason: 'kubernetes-namespace' | 'already-present' }[];
}

/**
 * The labels initialisation sets: instance type, zone and region (GA and beta each, when the
 * provider gave a value), then the provider's additional labels minus the reserved namespaces and
 * minus keys the node already has (never overwritten).
 */
export function cloudLabels(node: V1Node, metadata: InstanceMetadata): CloudLabels {
  const labels: Record<string, string> = {};
  if (metadata.instanceType) {
    labels[LABEL_INSTANCE_TYPE_BETA] = metadata.instanceType;
    labels[LABEL_INSTANCE_TYPE_STABLE] = metadata.instanceType;
  }
  if (metadata.zone) {
    labels[LABEL_FAILURE_DOMAIN_BETA_ZONE] = metadata.zone;
    labels[LABEL_TOPOLOGY_ZONE] = metadata.zone;
  }
  if (metadata.region) {
    labels[LABEL_FAILURE_DOMAIN_BETA_REGION] = metadata.region;
    labels[LABEL_TOPOLOGY_REGION] = metadata.region;
  }
  const existing = nodeLabels(node);
  const discarded: CloudLabels['discarded'] = [];
  for (const [key, value] of Object.entries(metadata.additionalLabels ?? {})) {
    if (isKubernetesNamespacedLabel(key)) discarded.push({ key, reason: 'kubernetes-namespace' });
    else if (Object.hasOwn(existing, key)) {
      if (existing[key] !== value) discarded.push({ key, reason: 'already-present' });
    } else labels[key] = value;
  }
  return { labels, discarded };
}
