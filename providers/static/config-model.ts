import type { V1NodeAddress } from '@kubernetes/client-node';
import type { LabelPredicate } from '../../src/kube/label-selector.ts';
import type { AddressRange } from './address-ranges.ts';
import type { MatchCriterion } from './config-schema.ts';

/**
 * The static provider's configuration after validation: defaults applied, group settings merged
 * into each machine, addresses and selectors parsed, secrets read. Inner code sees only this.
 */

export interface RedfishTarget {
  /** Base URL of the BMC, e.g. https://10.0.1.11 (no trailing slash). */
  endpoint: string;
  /** Member of /redfish/v1/Systems; undefined: the collection's only member. */
  systemId?: string;
  auth: 'basic' | 'session';
  username: string;
  password: string;
  /** PEM text of the CA that signs the BMC's certificate. */
  ca?: string;
  insecureSkipVerify: boolean;
  timeoutMs: number;
  cacheMs: number;
}

export interface Machine {
  id: string;
  providerID: string;
  /** The node name this machine matches (nodeName, else id). */
  nodeName: string;
  hostname?: string;
  site?: string;
  rack?: string;
  addresses: V1NodeAddress[];
  instanceType: string;
  zone: string;
  region: string;
  labels: Record<string, string>;
  power: 'on' | 'off';
  decommissioned: boolean;
  redfish?: RedfishTarget;
}

export interface InventoryConfig {
  authoritative: boolean;
  matchBy: readonly MatchCriterion[];
  machines: Machine[];
}

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
}

export interface LoadBalancerConfig {
  classes: readonly string[];
  /** In the order services try them: priority (highest first), then file order. */
  pools: PoolConfig[];
}

export interface StaticConfig {
  inventory: InventoryConfig;
  loadBalancer: LoadBalancerConfig;
}

export const PROVIDER_ID_PREFIX = 'static://';
