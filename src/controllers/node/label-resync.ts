import type { V1Node } from '@kubernetes/client-node';
import type { InstanceMetadata } from '../../cloud/types.ts';
import { nodeLabels } from '../../kube/node-helpers.ts';
import { cloudLabels, isKubernetesNamespacedLabel, type CloudLabels } from './labels.ts';
import { formatManagedKeys, managedKeys } from './managed-keys.ts';

/**
 * Label re-sync of initialised nodes (beyond upstream, which labels a node once, at
 * initialisation): the decisions as a pure function of the node and the provider's answer.
 *
 * - Instance type, zone and region (GA and beta) follow the provider whenever it gives a value;
 *   an empty value leaves the node's labels alone.
 * - Additional labels: the keys edge-ccm set are listed in the CLOUD_LABELS_ANNOTATION, so a
 *   key the provider stops giving is removed, while a label someone else set is never changed
 *   or removed (the initialisation rule: a key the node already has is not overwritten).
 *   kubernetes.io and k8s.io keys are never touched, as at initialisation.
 * - A node without the annotation (initialised before re-sync was on) adopts the keys whose
 *   value already equals the provider's: those are what initialisation wrote.
 */

export const CLOUD_LABELS_ANNOTATION = 'node.edge-ccm.io/cloud-labels';

/** A JSON merge patch of the node's metadata: a null label value removes the label. */
export interface CloudLabelsPatch {
  labels: Record<string, string | null>;
  annotations: Record<string, string>;
}

export interface LabelResyncPlan {
  /** The write to make; undefined when the node is already in line. */
  patch?: CloudLabelsPatch;
  /** Additional labels the provider gives that were left out, and why. */
  discarded: CloudLabels['discarded'];
}

/** The additional label keys the annotation lists; undefined when the node has no annotation. */
export function trackedCloudLabelKeys(node: V1Node): Set<string> | undefined {
  return managedKeys(node, CLOUD_LABELS_ANNOTATION);
}

/** The annotation value for a set of keys: sorted, comma separated (managed-keys.ts). */
export const formatCloudLabelKeys = formatManagedKeys;

export function planLabelResync(node: V1Node, metadata: InstanceMetadata): LabelResyncPlan {
  const current = nodeLabels(node);
  const given = metadata.additionalLabels ?? {};
  const tracked = trackedCloudLabelKeys(node);
  const ours = tracked ?? new Set(Object.keys(given).filter((key) => current[key] === given[key]));
  // Our own keys count as absent, so the initialisation rules (cloudLabels) set them again, and
  // every other key keeps the protection it had at initialisation.
  const othersOnly: Record<string, string> = {};
  for (const [key, value] of Object.entries(current)) if (!ours.has(key)) othersOnly[key] = value;
  const { labels: wanted, discarded } = cloudLabels({ metadata: { labels: othersOnly } }, metadata);
  const owned = ownedCloudLabelKeys(wanted, metadata);

  const labels: Record<string, string | null> = {};
  for (const [key, value] of Object.entries(wanted)) if (current[key] !== value) labels[key] = value;
  for (const key of ours) {
    if (!owned.includes(key) && Object.hasOwn(current, key) && !isKubernetesNamespacedLabel(key)) labels[key] = null;
  }
  const annotations: Record<string, string> = {};
  const keys = formatCloudLabelKeys(owned);
  if (node.metadata?.annotations?.[CLOUD_LABELS_ANNOTATION] !== keys) annotations[CLOUD_LABELS_ANNOTATION] = keys;

  const changed = Object.keys(labels).length > 0 || Object.keys(annotations).length > 0;
  return { patch: changed ? { labels, annotations } : undefined, discarded };
}

/** The provider's additional label keys that a label write sets (so edge-ccm owns them from then on). */
export function ownedCloudLabelKeys(written: Record<string, string>, metadata: InstanceMetadata): string[] {
  return Object.keys(metadata.additionalLabels ?? {}).filter((key) => !isKubernetesNamespacedLabel(key) && Object.hasOwn(written, key));
}
