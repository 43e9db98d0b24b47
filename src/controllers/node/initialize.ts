import type { V1Node, V1Taint } from '@kubernetes/client-node';
import type { InstanceMetadata, Instances } from '../../cloud/types.ts';
import { TAINT_EXTERNAL_CLOUD_PROVIDER, nodeLabels, nodeName, taintsWithout } from '../../kube/node-helpers.ts';
import { applyProvidedNodeIP } from './addresses.ts';
import { CLOUD_LABELS_ANNOTATION, formatCloudLabelKeys, ownedCloudLabelKeys } from './label-resync.ts';
import { cloudLabels, type CloudLabels } from './labels.ts';
import { planNodeRules, type RuleDiscard } from './rules-sync.ts';

/**
 * The decisions of initialising a tainted node (upstream syncNode, getInstanceMetadata,
 * getNodeModifiersFromCloudProvider), as pure functions of the node and the provider's answer.
 */

export class MissingProviderIDError extends Error {
  constructor(node: string) {
    super(`cloud provider does not set node provider ID for node ${node}`);
    this.name = 'MissingProviderIDError';
  }
}

/**
 * Asks the provider for the node's metadata. null means "the provider has nothing for this node":
 * not an error, the node is left alone. A providerID is required: from the provider, else from
 * spec.providerID (set by the kubelet's --provider-id); neither is an error, so it is retried.
 */
export async function fetchInstanceMetadata(instances: Instances, node: V1Node, signal?: AbortSignal): Promise<InstanceMetadata | null> {
  const metadata = await instances.instanceMetadata(node, signal);
  if (metadata === null || metadata.providerID !== '') return metadata;
  const specProviderID = node.spec?.providerID ?? '';
  if (specProviderID === '') throw new MissingProviderIDError(nodeName(node));
  return { ...metadata, providerID: specProviderID };
}

/** The node write of initialisation: a JSON merge patch (ApiCloudNodeWriter.initialize says why). */
export interface InitializationPatch {
  metadata: { resourceVersion?: string; labels?: Record<string, string | null>; annotations?: Record<string, string | null> };
  spec: { providerID?: string; taints: V1Taint[] };
}

export interface InitializationPlan {
  patch: InitializationPatch;
  /** Additional labels from the provider that were left out (reserved namespace, key already set). */
  discardedLabels: CloudLabels['discarded'];
  /** What the node rules give that was left out (a key someone else set). */
  discardedByRules: RuleDiscard[];
}

/**
 * The initialisation write for this node: providerID only when the node has none, the cloud
 * labels (and, with trackCloudLabels, the annotation listing the additional ones set), and the
 * taints minus every uninitialized taint. Throws ProvidedNodeIPError when the
 * kubelet's node IP is not among the provider's addresses, so the taint stays until it is.
 * Pure, and computed again from the fresh node after a conflict (upstream's node modifiers).
 */
export function planInitialization(node: V1Node, metadata: InstanceMetadata, opts: { trackCloudLabels?: boolean } = {}): InitializationPlan {
  // Validate only: the addresses themselves are written on the status after the taint is gone.
  applyProvidedNodeIP(node, metadata.nodeAddresses ?? []);

  const patch: InitializationPatch = {
    // The precondition makes the API refuse the patch (409) if the node changed since we read it:
    // a merge patch replaces the taint list whole, and must not drop a taint added meanwhile.
    metadata: { resourceVersion: node.metadata?.resourceVersion },
    spec: { taints: taintsWithout(node, TAINT_EXTERNAL_CLOUD_PROVIDER) },
  };
  if (!node.spec?.providerID && metadata.providerID) patch.spec.providerID = metadata.providerID;
  const { labels, discarded } = cloudLabels(node, metadata);
  if (Object.keys(labels).length > 0) patch.metadata.labels = labels;
  // With label re-sync on, record which additional labels are ours, so a later re-sync may
  // change or remove them (and never the ones someone else set).
  if (opts.trackCloudLabels) patch.metadata.annotations = { [CLOUD_LABELS_ANNOTATION]: formatCloudLabelKeys(ownedCloudLabelKeys(labels, metadata)) };
  const discardedByRules = metadata.ruleEffects ? applyNodeRules(node, patch, metadata.ruleEffects) : [];
  return { patch, discardedLabels: discarded, discardedByRules };
}

/**
 * Adds the node rules' labels, annotations and taints to the initialisation write, planned on the
 * node as it will be after it (the cloud labels set, the uninitialized taint gone): so the cloud
 * labels keep precedence, and a rule's taint is there in the same write that lets pods schedule.
 */
function applyNodeRules(node: V1Node, patch: InitializationPatch, effects: NonNullable<InstanceMetadata['ruleEffects']>): RuleDiscard[] {
  const after: V1Node = {
    metadata: { labels: { ...nodeLabels(node), ...patch.metadata.labels } as Record<string, string>, annotations: node.metadata?.annotations },
    spec: { taints: patch.spec.taints },
  };
  const { patch: rules, discarded } = planNodeRules(after, effects);
  if (!rules) return discarded;
  if (Object.keys(rules.labels).length > 0) patch.metadata.labels = { ...patch.metadata.labels, ...rules.labels };
  if (Object.keys(rules.annotations).length > 0) patch.metadata.annotations = { ...patch.metadata.annotations, ...rules.annotations };
  if (rules.taints) patch.spec.taints = rules.taints;
  return discarded;
}

