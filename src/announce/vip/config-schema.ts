import * as v from 'valibot';
import { asRecord, simpleName, validOrUndefined, withoutUserinfo } from '../../config-file/schema.ts';
import { parseIP } from '../../net/ip.ts';
import { asn, attributes, BfdSchema, PeerSchema } from '../bgp/config-schema.ts';
import { HealthCheckSchema } from './health-check-config.ts';

/**
 * The shape of the `controlPlaneEndpoint` section (the API server's own address, held by
 * `edge-ccm vip` on the control-plane hosts), the same in every provider's file. Values that can
 * be judged alone are checked here; what needs the whole section (one address per family,
 * distinct hosts, timings against each other) is config-resolve.ts's. Every key is documented in
 * docs/networking/control-plane-vip.md.
 */

const integer = (min: number, max: number, what: string) =>
  v.pipe(v.number(), v.integer('must be an integer'), v.minValue(min, `must be ${what} (${min}..${max})`), v.maxValue(max, `must be ${what} (${min}..${max})`));

const ipAddress = v.pipe(
  v.string(),
  v.check((s) => parseIP(s) !== undefined, (issue) => `${JSON.stringify(issue.input)} is not an IP address`),
);

const interfaceName = v.pipe(v.string(), v.regex(/^[^\s/]{1,15}$/, 'must be an interface name (1-15 characters, no space or "/")'));

const healthURL = v.pipe(
  v.string(),
  v.check((s) => URL.canParse(s) && ['http:', 'https:'].includes(new URL(s).protocol), (issue) => `${JSON.stringify(issue.input)} is not an http(s) URL`),
  withoutUserinfo(),
);

const HostSchema = v.strictObject({
  name: simpleName,
  address: ipAddress,
  /** With announce: bgp, this host's own addresses the routers reach it by (at most one per family); default: `address`. */
  nextHops: v.optional(v.pipe(v.array(ipAddress), v.minLength(1, 'must list at least one address, or be left out'))),
});
export type RawVipHost = v.InferOutput<typeof HostSchema>;

const milliseconds = integer(1, 60_000, 'milliseconds');
const TimingsSchema = v.strictObject({
  healthIntervalMilliseconds: v.optional(milliseconds),
  healthTimeoutMilliseconds: v.optional(milliseconds),
  unhealthyAfter: v.optional(integer(1, 100, 'a count')),
  healthyAfter: v.optional(integer(1, 100, 'a count')),
  heartbeatIntervalMilliseconds: v.optional(milliseconds),
  livenessTimeoutMilliseconds: v.optional(milliseconds),
});

/** announce: bgp: the sessions every control-plane host opens to the routers (the peers' schema of the `bgp` section). */
const VipBgpSchema = v.strictObject({
  localASN: asn,
  peers: v.pipe(v.array(PeerSchema), v.minLength(1, 'must list at least one peer')),
  bfd: v.optional(BfdSchema),
  ...attributes,
});
export type RawVipBgp = v.InferOutput<typeof VipBgpSchema>;

export const ControlPlaneEndpointSchema = v.strictObject({
  addresses: v.pipe(v.array(ipAddress), v.minLength(1, 'must list the address (one per family)')),
  announce: v.picklist(['l2', 'bgp'], 'must be l2 or bgp'),
  interfaces: v.optional(v.pipe(v.array(interfaceName), v.minLength(1, 'must list at least one interface, or be left out'))),
  bgp: v.optional(VipBgpSchema),
  healthURL: v.optional(healthURL),
  healthCheck: v.optional(HealthCheckSchema),
  hosts: v.pipe(v.array(HostSchema), v.minLength(1, 'must list every control-plane host')),
  preferredHost: v.optional(simpleName),
  heartbeatPort: v.optional(integer(1, 65535, 'a port')),
  timings: v.optional(TimingsSchema),
});
export type RawControlPlaneEndpoint = v.InferOutput<typeof ControlPlaneEndpointSchema>;

/** What the second pass works on: a valid section, or its valid parts (a host entry with a shape error is a null hole, so later indexes keep their paths). */
export type ResolvableControlPlaneEndpoint = Omit<Partial<RawControlPlaneEndpoint>, 'hosts' | 'bgp'> & { hosts?: (RawVipHost | null)[]; bgp?: ResolvableVipBgp };
/** A `bgp` subsection's valid parts (a peer with a shape error is a null hole). */
export type ResolvableVipBgp = Omit<Partial<RawVipBgp>, 'peers'> & { peers?: (v.InferOutput<typeof PeerSchema> | null)[] };

/** The valid parts of a `controlPlaneEndpoint` section that failed the schema; undefined when the file has none. */
export function salvageControlPlaneEndpoint(input: unknown): ResolvableControlPlaneEndpoint | undefined {
  if (input === undefined) return undefined;
  const r = asRecord(input);
  return {
    addresses: validOrUndefined(ControlPlaneEndpointSchema.entries.addresses, r.addresses),
    announce: validOrUndefined(ControlPlaneEndpointSchema.entries.announce, r.announce),
    interfaces: validOrUndefined(ControlPlaneEndpointSchema.entries.interfaces, r.interfaces),
    bgp: salvageVipBgp(r.bgp),
    healthURL: validOrUndefined(ControlPlaneEndpointSchema.entries.healthURL, r.healthURL),
    healthCheck: validOrUndefined(HealthCheckSchema, r.healthCheck),
    hosts: Array.isArray(r.hosts) ? r.hosts.map((h) => validOrUndefined(HostSchema, h) ?? null) : undefined,
    preferredHost: validOrUndefined(ControlPlaneEndpointSchema.entries.preferredHost, r.preferredHost),
    heartbeatPort: validOrUndefined(ControlPlaneEndpointSchema.entries.heartbeatPort, r.heartbeatPort),
    timings: validOrUndefined(TimingsSchema, r.timings),
  };
}

function salvageVipBgp(input: unknown): ResolvableVipBgp | undefined {
  if (input === undefined) return undefined;
  const b = asRecord(input);
  return {
    localASN: validOrUndefined(asn, b.localASN),
    peers: Array.isArray(b.peers) ? b.peers.map((p) => validOrUndefined(PeerSchema, p) ?? null) : undefined,
    bfd: validOrUndefined(BfdSchema, b.bfd),
    communities: validOrUndefined(VipBgpSchema.entries.communities, b.communities),
    localPref: validOrUndefined(VipBgpSchema.entries.localPref, b.localPref),
  };
}
