import type { ResourceType } from '../kube/resources.ts';

/**
 * The objects through which edge-ccm shows its state with kubectl (beyond upstream), both
 * cluster-scoped in the group edge-ccm.io, defined by the CRDs in the Helm chart
 * (deploy/helm/edge-ccm/templates/crds.yaml):
 *
 * - AddressPool: one per pool of the cloud config, its status mirroring the pool (addresses,
 *   used and free per IP family, the services holding addresses, conditions Exhausted and
 *   Invalid). The file stays the one place pools are defined, so systemd and in-cluster installs
 *   work alike and one validator judges them; the objects only show them.
 * - EdgeCCMStatus: one per edge-ccm instance (named after its leader-election Lease): whether the
 *   last config edit was accepted, the node deletion breaker and the nodes it holds; the
 *   annotation edge-ccm.io/acknowledge-node-deletions=true on it lets the held nodes go.
 */

export const STATUS_GROUP = 'edge-ccm.io';
export const STATUS_VERSION = 'v1alpha1';
export const STATUS_API_VERSION = `${STATUS_GROUP}/${STATUS_VERSION}`;

export const ADDRESS_POOLS: ResourceType = { apiPath: `/apis/${STATUS_API_VERSION}`, plural: 'addresspools', namespaced: false };
export const EDGE_CCM_STATUSES: ResourceType = { apiPath: `/apis/${STATUS_API_VERSION}`, plural: 'edgeccmstatuses', namespaced: false };

/** On each AddressPool: the instance (EdgeCCMStatus name) that publishes it, so instances leave each other's alone. */
export const INSTANCE_LABEL = 'edge-ccm.io/instance';

/** On the EdgeCCMStatus object; the lifecycle controller's, which honours it (breaker-link.ts). */
export { ACKNOWLEDGE_NODE_DELETIONS_ANNOTATION } from '../controllers/nodelifecycle/breaker-link.ts';
