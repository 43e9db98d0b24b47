import type { V1NodeAddress } from '@kubernetes/client-node';
import type { SharedSections } from '../../src/config-sections.ts';
import type { StaticMatchCriterion } from './config-schema.ts';

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
  /** The pod CIDRs node IPAM's CloudAllocator gives this machine's Node, canonical; undefined: none pinned. */
  podCIDRs?: string[];
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
  matchBy: readonly StaticMatchCriterion[];
  machines: Machine[];
}

/** The inventory, and the sections every provider has (loadBalancer). */
export interface StaticConfig extends SharedSections {
  inventory: InventoryConfig;
}

export const STATIC_PROVIDER_ID_PREFIX = 'static://';
