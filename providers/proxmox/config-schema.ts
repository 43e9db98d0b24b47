import * as v from 'valibot';
import { asRecord, labelValue, nonEmpty, validOrUndefined, withoutUserinfo } from '../../src/config-file/schema.ts';
import { addressRange } from '../../src/lb/config-schema.ts';
import { SHARED_SECTIONS, salvageSharedSections, type ResolvableSharedSections } from '../../src/config-sections.ts';
import { PROXMOX_MATCH_CRITERIA } from './config-model.ts';

/**
 * The shape of the proxmox provider's --cloud-config file, checked with valibot: every object
 * strict (an unknown key is an error), each value that can be judged alone checked here. What
 * needs more than one value (auth choices, secrets, duplicate regions) is config-resolve.ts's.
 * The sections every provider has (loadBalancer) are src/config-sections.ts's.
 */

const positive = v.pipe(v.number(), v.minValue(0.001, 'must be more than 0'));

/** Proxmox user ids are USER@REALM; API token ids USER@REALM!TOKENID. */
export const USER_ID = /^[^\s:/@!]+@[A-Za-z][A-Za-z0-9._-]*$/;
export const TOKEN_ID = /^[^\s:/@!]+@[A-Za-z][A-Za-z0-9._-]*![A-Za-z][A-Za-z0-9._-]*$/;
/** SHA-256: 32 bytes in hex, with or without colons. */
export const FINGERPRINT = /^([0-9A-Fa-f]{2}:){31}[0-9A-Fa-f]{2}$|^[0-9A-Fa-f]{64}$/;

const ClusterSchema = v.strictObject({
  // A label value and part of providerIDs proxmox://REGION/VMID.
  region: v.pipe(nonEmpty, labelValue),
  url: v.pipe(v.string(), v.url('must be a URL such as https://pve1.example.com:8006'), withoutUserinfo()),
  caFile: v.optional(nonEmpty),
  fingerprint: v.optional(v.pipe(v.string(), v.regex(FINGERPRINT, 'must be a SHA-256 fingerprint: 32 hex bytes, e.g. AB:CD:...'))),
  insecureSkipVerify: v.optional(v.boolean()),
  allowInsecureHTTP: v.optional(v.boolean()),
  tokenId: v.optional(v.pipe(v.string(), v.regex(TOKEN_ID, 'must be USER@REALM!TOKENID, e.g. ccm@pve!edge-ccm'))),
  tokenSecret: v.optional(nonEmpty),
  tokenSecretFile: v.optional(nonEmpty),
  tokenSecretEnv: v.optional(nonEmpty),
  username: v.optional(v.pipe(v.string(), v.regex(USER_ID, 'must be USER@REALM, e.g. ccm@pve'))),
  password: v.optional(v.string()),
  passwordFile: v.optional(nonEmpty),
  passwordEnv: v.optional(nonEmpty),
  ticketRenewSeconds: v.optional(positive),
  zoneFrom: v.optional(v.picklist(['host', 'haGroup'])),
  timeoutSeconds: v.optional(positive),
  cacheSeconds: v.optional(v.pipe(v.number(), v.minValue(0, 'must not be negative'))),
  configCacheSeconds: v.optional(v.pipe(v.number(), v.minValue(0, 'must not be negative'))),
  qps: v.optional(positive),
  burst: v.optional(v.pipe(v.number(), v.integer('must be an integer'), v.minValue(1, 'must be at least 1'))),
  maxBackoffSeconds: v.optional(v.pipe(v.number(), v.minValue(1, 'must be at least 1'))),
});
export type RawCluster = v.InferOutput<typeof ClusterSchema>;

const MatchBySchema = v.pipe(v.array(v.picklist(PROXMOX_MATCH_CRITERIA)), v.minLength(1, 'must list at least one criterion'));

const InstanceTypeSchema = v.strictObject({
  format: v.optional(nonEmpty),
  tagPrefix: v.optional(v.string()),
});

const AddressesSchema = v.strictObject({
  include: v.optional(v.array(addressRange)),
  exclude: v.optional(v.array(addressRange)),
  families: v.optional(v.pipe(v.array(v.picklist(['IPv4', 'IPv6'])), v.minLength(1, 'must list IPv4, IPv6 or both'))),
  guestAgent: v.optional(v.boolean()),
  hostname: v.optional(v.boolean()),
});

export const ProxmoxConfigSchema = v.strictObject({
  clusters: v.pipe(v.array(ClusterSchema), v.minLength(1, 'must list at least one Proxmox VE cluster')),
  matchBy: v.optional(MatchBySchema),
  instanceType: v.optional(InstanceTypeSchema),
  addresses: v.optional(AddressesSchema),
  topologyLabelResync: v.optional(v.boolean()),
  resyncPeriodSeconds: v.optional(positive),
  ...SHARED_SECTIONS,
});
export type RawProxmoxConfig = v.InferOutput<typeof ProxmoxConfigSchema>;

/** What the second pass works on: a valid config, or the valid parts of one (a broken cluster is a null hole). */
export interface ResolvableProxmoxConfig extends ResolvableSharedSections {
  clusters: (RawCluster | null)[];
  matchBy?: RawProxmoxConfig['matchBy'];
  instanceType?: RawProxmoxConfig['instanceType'];
  addresses?: RawProxmoxConfig['addresses'];
  topologyLabelResync?: boolean;
  resyncPeriodSeconds?: number;
}

export function salvageProxmoxConfig(input: unknown): ResolvableProxmoxConfig {
  const root = asRecord(input);
  return {
    clusters: Array.isArray(root.clusters) ? root.clusters.map((c) => validOrUndefined(ClusterSchema, c) ?? null) : [],
    matchBy: validOrUndefined(MatchBySchema, root.matchBy),
    instanceType: validOrUndefined(InstanceTypeSchema, root.instanceType),
    addresses: validOrUndefined(AddressesSchema, root.addresses),
    topologyLabelResync: validOrUndefined(v.boolean(), root.topologyLabelResync),
    resyncPeriodSeconds: validOrUndefined(positive, root.resyncPeriodSeconds),
    ...salvageSharedSections(root),
  };
}
