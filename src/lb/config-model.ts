import type { LabelPredicate } from '../kube/label-selector.ts';
import type { AnnounceMode, NodeAddressPoolType } from './config-schema.ts';
import type { AddressRange } from './ranges.ts';
import type { Reservation } from './claims.ts';
import type { Compatibility } from './compatibility.ts';

/** The `loadBalancer` section after validation: pools parsed and ordered. Every field is documented in docs/providers/static.md. */

export interface PoolConfig {
  name: string;
  /** The pool's addresses with exclusions removed; normalized (sorted, disjoint). */
  ranges: AddressRange[];
  /** undefined: every namespace. */
  namespaces?: readonly string[];
  serviceSelector?: LabelPredicate;
  priority: number;
  autoAssign: boolean;
  /** Whether one edge-ccm.io/allow-shared-ip key shares this pool's addresses across namespaces (else keys are per namespace). */
  shareAcrossNamespaces: boolean;
  /** Who makes the addresses reachable: the L2 speakers, BGP, or something outside edge-ccm (default). */
  announce: AnnounceMode;
  /** announce: l2: the interfaces answered on; undefined: the interface whose subnet holds the address. */
  interfaces?: readonly string[];
  /** The nodes that may announce the addresses; for a node-address pool, whose addresses it hands out. undefined: every node. */
  nodeSelector?: LabelPredicate;
  /** A node-address pool (ranges empty): services get the eligible nodes' addresses of this type. */
  nodeAddresses?: NodeAddressPoolType;
}

export interface LoadBalancerConfig {
  classes: readonly string[];
  /** In the order services try them: priority (highest first), then file order. */
  pools: PoolConfig[];
  /** Other address managers whose annotations count too; undefined: none. */
  compatibility?: readonly Compatibility[];
  /** undefined or 0: a released address is free at once. */
  releaseHoldMs?: number;
  /** undefined: none. */
  reservations?: Reservation[];
}
