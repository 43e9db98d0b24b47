/**
 * The controllers' names and upstream's aliases for them, as upstream's names/controller_names.go:
 * one list that --controllers, --help, the controller table (src/app/controllers.ts), the
 * controllers' logs and metrics all read. Imports nothing, so any room may read it.
 */

export const CLOUD_NODE_CONTROLLER = 'cloud-node-controller';
export const CLOUD_NODE_LIFECYCLE_CONTROLLER = 'cloud-node-lifecycle-controller';
export const SERVICE_LB_CONTROLLER = 'service-lb-controller';
export const NODE_ROUTE_CONTROLLER = 'node-route-controller';
export const NODE_IPAM_CONTROLLER = 'node-ipam-controller';
/** Beyond upstream, Talos's CCM's name: approves kubelet serving certificates (src/controllers/csr). */
export const NODE_CSR_APPROVAL_CONTROLLER = 'node-csr-approval';

/** The controllers --controllers selects from, in the controller table's order. */
export const CONTROLLER_NAMES = [CLOUD_NODE_CONTROLLER, CLOUD_NODE_LIFECYCLE_CONTROLLER, SERVICE_LB_CONTROLLER, NODE_ROUTE_CONTROLLER, NODE_IPAM_CONTROLLER, NODE_CSR_APPROVAL_CONTROLLER] as const;
export type ControllerName = (typeof CONTROLLER_NAMES)[number];

/** Upstream's ControllersDisabledByDefault (and node-csr-approval, which approves certificates): `*` leaves them off; only naming one turns it on. */
export const CONTROLLERS_DISABLED_BY_DEFAULT: ReadonlySet<ControllerName> = new Set([NODE_IPAM_CONTROLLER, NODE_CSR_APPROVAL_CONTROLLER]);

/** Upstream's short aliases (names.CCMControllerAliases). */
export const CONTROLLER_ALIASES: Readonly<Record<string, ControllerName>> = {
  'cloud-node': CLOUD_NODE_CONTROLLER,
  'cloud-node-lifecycle': CLOUD_NODE_LIFECYCLE_CONTROLLER,
  service: SERVICE_LB_CONTROLLER,
  route: NODE_ROUTE_CONTROLLER,
  nodeipam: NODE_IPAM_CONTROLLER,
};

/** Beyond upstream and always on while leading (src/status), so not in --controllers. */
export const STATUS_PUBLISHER = 'status-publisher';
