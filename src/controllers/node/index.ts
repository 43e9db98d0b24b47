export { CLOUD_NODE_CONTROLLER, CloudNodeController, EVENT_PROVIDED_NODE_IP_INVALID, EVENT_SYNCED, type CloudNodeControllerDeps, type CloudNodeControllerOptions } from './controller.ts';
export {
  ProvidedNodeIPError,
  addressesMatchingNodeIPs,
  applyProvidedNodeIP,
  decideNodeAddresses,
  nodeAddressesChangeDetected,
  parseProvidedNodeIP,
  type AddressDecision,
} from './addresses.ts';
export { MissingProviderIDError, fetchInstanceMetadata, planInitialization, type InitializationPatch, type InitializationPlan } from './initialize.ts';
export { cloudLabels, isKubernetesNamespacedLabel, labelsToReconcile, type CloudLabels } from './labels.ts';
export { nodeControllerMetrics, type NodeControllerMetrics } from './metrics.ts';
export { ApiCloudNodeWriter, type NodeLabelWriter, type CloudNodeWriter } from './writer.ts';
export {
  CLOUD_LABELS_ANNOTATION,
  formatCloudLabelKeys,
  ownedCloudLabelKeys,
  planLabelResync,
  trackedCloudLabelKeys,
  type CloudLabelsPatch,
  type LabelResyncPlan,
} from './label-resync.ts';
export { ResyncTrigger } from '../../util/resync-trigger.ts';
