import * as v from 'valibot';
import { parseIP } from '../../net/ip.ts';
import { parseCommunity } from '../../net/bgp/routes.ts';
import { asRecord, nonEmpty, simpleName, validOrUndefined } from '../../config-file/schema.ts';

/**
 * The shape of the `bgp` section (the BGP speaker edge-ccm runs while it leads: its peers, and
 * the attributes of what it announces), the same in every provider's file. Each value that can
 * be judged alone is checked here; what needs the whole file (duplicate peers, a source address
 * of the peer's family, pools that exist and announce over BGP, the password files) is
 * config-resolve.ts's. Every field is documented in docs/networking/bgp.md.
 */

const integer = (min: number, max: number, what: string) =>
  v.pipe(v.number(), v.integer('must be an integer'), v.minValue(min, `must be ${what} (${min}..${max})`), v.maxValue(max, `must be ${what} (${min}..${max})`));

export const asn = integer(1, 0xffffffff, 'an AS number');
const port = integer(1, 65535, 'a port');

const ipAddress = v.pipe(
  v.string(),
  v.check((s) => parseIP(s) !== undefined, (issue) => `${JSON.stringify(issue.input)} is not an IP address`),
);

const routerID = v.pipe(
  v.string(),
  v.check((s) => {
    const ip = parseIP(s);
    return ip?.family === 4 && ip.value !== 0n;
  }, (issue) => `${JSON.stringify(issue.input)} is not a non-zero dotted IPv4 address (the BGP identifier)`),
);

/** RFC 4271 4.2: 0 (no keepalives) or at least 3 seconds. */
const holdTime = v.pipe(
  integer(0, 65535, 'a hold time'),
  v.check((n) => n === 0 || n >= 3, 'must be 0 (no keepalives) or 3..65535 seconds (RFC 4271 4.2)'),
);

const positiveSeconds = v.pipe(v.number(), v.minValue(0.001, 'must be more than 0'));

const community = v.pipe(
  v.string(),
  v.check((s) => parseCommunity(s) !== undefined, (issue) => `${JSON.stringify(issue.input)} is not a community (ASN:VALUE, both 0..65535, or no-export, no-advertise, no-export-subconfed)`),
);

/** What every announced prefix of one kind carries. */
export const attributes = {
  communities: v.optional(v.array(community)),
  /** LOCAL_PREF, sent to iBGP peers only. */
  localPref: v.optional(integer(0, 0xffffffff, 'a LOCAL_PREF')),
};

export const PeerSchema = v.strictObject({
  address: ipAddress,
  asn,
  port: v.optional(port),
  holdTimeSeconds: v.optional(holdTime),
  /** TCP-MD5 key (RFC 2385), read from this file; never inline. */
  passwordFile: v.optional(nonEmpty),
  sourceAddress: v.optional(ipAddress),
  /** TTL of what we send (eBGP multihop); default 1 for eBGP, the kernel's for iBGP. */
  multihop: v.optional(integer(1, 255, 'a TTL')),
  passive: v.optional(v.boolean()),
  connectTimeoutSeconds: v.optional(positiveSeconds),
  connectRetry: v.optional(v.strictObject({ minSeconds: v.optional(positiveSeconds), maxSeconds: v.optional(positiveSeconds) })),
  families: v.optional(v.pipe(v.array(v.picklist([4, 6], 'must be 4 or 6')), v.minLength(1, 'must list 4 and/or 6'))),
  addPath: v.optional(v.boolean()),
});
export type RawPeer = v.InferOutput<typeof PeerSchema>;
export type RawBfd = v.InferOutput<typeof BfdSchema>;

const PoolAttributesSchema = v.strictObject({ name: simpleName, ...attributes });
export type RawPoolAttributes = v.InferOutput<typeof PoolAttributesSchema>;

const ListenSchema = v.strictObject({
  port: v.optional(port),
  addresses: v.optional(v.pipe(v.array(ipAddress), v.minLength(1, 'must list at least one address, or be left out'))),
});

const GracefulRestartSchema = v.strictObject({
  enabled: v.optional(v.boolean()),
  /** RFC 4724: 12 bits. */
  restartTimeSeconds: v.optional(integer(1, 4095, 'a restart time')),
});

const PodCIDRsSchema = v.strictObject({ announce: v.optional(v.boolean()), ...attributes });

/** BFD of the per-node sessions (RFC 5880/5881): how fast a dead node leaves the routers' tables. */
export const BfdSchema = v.strictObject({
  enabled: v.optional(v.boolean()),
  /** Desired Min TX Interval once Up. */
  transmitIntervalMilliseconds: v.optional(integer(50, 60_000, 'an interval in milliseconds')),
  /** Required Min RX Interval. */
  receiveIntervalMilliseconds: v.optional(integer(50, 60_000, 'an interval in milliseconds')),
  detectMultiplier: v.optional(integer(1, 255, 'a detect multiplier')),
});

/** Who announces the load-balancer addresses: the leader for every node, or each node for itself. */
const LoadBalancersSchema = v.strictObject({
  announceFrom: v.optional(v.picklist(['leader', 'nodes'], 'must be leader or nodes')),
  bfd: v.optional(BfdSchema),
});

export const BgpSchema = v.strictObject({
  localASN: asn,
  routerID,
  listen: v.optional(ListenSchema),
  gracefulRestart: v.optional(GracefulRestartSchema),
  peers: v.pipe(v.array(PeerSchema), v.minLength(1, 'must list at least one peer')),
  podCIDRs: v.optional(PodCIDRsSchema),
  loadBalancers: v.optional(LoadBalancersSchema),
  pools: v.optional(v.array(PoolAttributesSchema)),
});
export type RawBgp = v.InferOutput<typeof BgpSchema>;

/** What the second pass works on: a valid section, or its valid parts (a peer or pool entry with a shape error is a null hole, so later indexes keep their paths). */
export type ResolvableBgp = Omit<Partial<RawBgp>, 'peers' | 'pools'> & { peers?: (RawPeer | null)[]; pools?: (RawPoolAttributes | null)[] };

/** The valid parts of a `bgp` section that failed the schema; undefined when the file has none. */
export function salvageBgp(input: unknown): ResolvableBgp | undefined {
  if (input === undefined) return undefined;
  const b = asRecord(input);
  return {
    localASN: validOrUndefined(asn, b.localASN),
    routerID: validOrUndefined(routerID, b.routerID),
    listen: validOrUndefined(ListenSchema, b.listen),
    gracefulRestart: validOrUndefined(GracefulRestartSchema, b.gracefulRestart),
    peers: Array.isArray(b.peers) ? b.peers.map((p) => validOrUndefined(PeerSchema, p) ?? null) : undefined,
    podCIDRs: validOrUndefined(PodCIDRsSchema, b.podCIDRs),
    loadBalancers: validOrUndefined(LoadBalancersSchema, b.loadBalancers),
    pools: Array.isArray(b.pools) ? b.pools.map((p) => validOrUndefined(PoolAttributesSchema, p) ?? null) : undefined,
  };
}
