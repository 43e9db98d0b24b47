import type { AddressPolicy as SharedAddressPolicy } from '../../src/node-addresses/select.ts';
import type { IPFamily } from '../../src/net/ip.ts';
import type { AddressRange } from '../../src/lb/ranges.ts';
import type { SharedSections } from '../../src/config-sections.ts';

/**
 * The proxmox provider's configuration after validation: defaults applied, secrets read, CIDRs
 * parsed. Everything past config-load.ts sees only this. Fields are documented in
 * docs/providers/proxmox.md.
 */

export const PROXMOX_PROVIDER_ID_PREFIX = 'proxmox://';

/** Also the default order: the cheap criteria first (a UUID search reads every VM's config). */
export const PROXMOX_MATCH_CRITERIA = ['providerID', 'name', 'systemUUID'] as const;
export type ProxmoxMatchCriterion = (typeof PROXMOX_MATCH_CRITERIA)[number];

export type ZoneSource = 'host' | 'haGroup';

export type ClusterAuth =
  | { kind: 'token'; /** USER@REALM!TOKENID */ tokenId: string; secret: string }
  | { kind: 'password'; /** USER@REALM */ username: string; password: string; /** Age at which a ticket is replaced (Proxmox tickets last 2 hours). */ renewMs: number };

export interface ClusterTls {
  /** PEM of the CA(s) that sign the API's certificate. */
  ca?: string;
  /** SHA-256 fingerprint of the API's certificate, upper-case hex with colons. */
  fingerprint?: string;
  insecureSkipVerify: boolean;
}

export interface ProxmoxCluster {
  /** The region of its VMs' nodes, and the REGION of their providerIDs: unique per cluster. */
  region: string;
  /** Base URL, e.g. https://pve1.example.com:8006 (no trailing slash; /api2/json is added). */
  url: string;
  tls: ClusterTls;
  auth: ClusterAuth;
  zoneFrom: ZoneSource;
  timeoutMs: number;
  /** How long one /cluster/resources snapshot answers for every node. */
  cacheMs: number;
  /** How long a VM's config (SMBIOS UUID, cloud-init addresses) is reused. */
  configCacheMs: number;
  qps: number;
  burst: number;
  /** Upper bound of the back-off after API errors (it starts at 1 s and doubles). */
  maxBackoffMs: number;
}

export interface InstanceTypeNaming {
  /** Template with {cores}, {memory}, {memoryGiB}, {memoryMiB}. */
  format: string;
  /** A VM tag starting with this names the instance type (the rest of the tag); empty: never. */
  tagPrefix: string;
}

/** The policy every API provider has (src/node-addresses), and whether the guest agent is asked. */
export interface AddressPolicy extends SharedAddressPolicy {
  /** Ask the QEMU guest agent when the VM config has no static (cloud-init) address. */
  guestAgent: boolean;
}

/** The clusters and how VMs become nodes, and the sections every provider has (loadBalancer). */
export interface ProxmoxConfig extends SharedSections {
  clusters: ProxmoxCluster[];
  matchBy: readonly ProxmoxMatchCriterion[];
  instanceType: InstanceTypeNaming;
  addresses: AddressPolicy;
  /** Keep zone labels true after a live migration (relabelNodes, onChange on host changes). */
  topologyLabelResync: boolean;
  /** With topologyLabelResync: how often the VM list is read when nothing else asks. */
  resyncPeriodMs: number;
}
