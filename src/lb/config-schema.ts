import * as v from 'valibot';
import { parseLabelSelector } from '../kube/label-selector.ts';
import { NAMESPACE_MAX_LENGTH } from '../config-file/limits.ts';
import { asRecord, nonEmpty, simpleName, validOrUndefined } from '../config-file/schema.ts';
import { parseIP } from '../net/ip.ts';
import { COMPATIBILITY_SOURCES } from './compatibility.ts';
import { parseAddressRange } from './ranges.ts';

/**
 * The shape of the `loadBalancer` section (address pools and the load-balancer classes served),
 * the same in every provider's file: each value that can be judged alone is checked here; what
 * needs the whole section (duplicate names, overlaps, special addresses) is config-resolve.ts's.
 */

/** A CIDR, a range FIRST-LAST or one address. */
export const addressRange = v.pipe(
  v.string(),
  v.check((s) => typeof parseAddressRange(s) !== 'string', (issue) => parseAddressRange(issue.input as string) as string),
);

const labelSelector = v.pipe(
  v.string(),
  v.check((s) => selectorError(s) === undefined, (issue) => `invalid label selector: ${selectorError(issue.input as string)}`),
);

function selectorError(s: string): string | undefined {
  try {
    parseLabelSelector(s);
    return undefined;
  } catch (e) {
    return (e as Error).message;
  }
}

/** The node address types a node-address pool hands out. */
export const POOL_NODE_ADDRESS_TYPES = ['InternalIP', 'ExternalIP'] as const;
export type NodeAddressPoolType = (typeof POOL_NODE_ADDRESS_TYPES)[number];

/** How a pool's addresses reach the network: answered on the link by the speakers (ARP/NDP), routed by BGP, or by something else. */
export const ANNOUNCE_MODES = ['l2', 'bgp', 'none'] as const;
export type AnnounceMode = (typeof ANNOUNCE_MODES)[number];

/** A Linux interface name (IFNAMSIZ 16 with its NUL; no '/', whitespace or ':' as the kernel refuses). */
const interfaceName = v.pipe(
  nonEmpty,
  v.maxLength(15, 'must be at most 15 characters (a Linux interface name)'),
  v.regex(/^[^\s/:]+$/, 'must be an interface name (no whitespace, "/" or ":")'),
);

const PoolSchema = v.strictObject({
  name: simpleName,
  /** Required unless nodeAddresses is given (config-resolve.ts checks: exactly one of the two). */
  addresses: v.optional(v.pipe(v.array(addressRange), v.minLength(1, 'must list at least one CIDR, range or address'))),
  /** A node-address pool: services get the addresses of this type of the eligible nodes (node-addresses.ts). */
  nodeAddresses: v.optional(v.picklist(POOL_NODE_ADDRESS_TYPES, `must be one of ${POOL_NODE_ADDRESS_TYPES.join(', ')}`)),
  exclude: v.optional(v.array(addressRange)),
  namespaces: v.optional(v.array(v.pipe(nonEmpty, v.maxLength(NAMESPACE_MAX_LENGTH, `must be at most ${NAMESPACE_MAX_LENGTH} characters`)))),
  serviceSelector: v.optional(labelSelector),
  priority: v.optional(v.pipe(v.number(), v.integer('must be an integer'))),
  autoAssign: v.optional(v.boolean()),
  allowSpecialAddresses: v.optional(v.boolean()),
  includeNetworkAndBroadcast: v.optional(v.boolean()),
  shareAcrossNamespaces: v.optional(v.boolean()),
  announce: v.optional(v.picklist(ANNOUNCE_MODES, `must be one of ${ANNOUNCE_MODES.join(', ')}`)),
  /** announce: l2 only: the interfaces the speakers answer on (default: the one whose subnet holds the address). */
  interfaces: v.optional(v.pipe(v.array(interfaceName), v.minLength(1, 'must list at least one interface, or be left out'))),
  /** The nodes that may announce the pool's addresses (a label selector); default: every node. */
  nodeSelector: v.optional(labelSelector),
});
export type RawPool = v.InferOutput<typeof PoolSchema>;

const ClassesSchema = v.array(nonEmpty);

const CompatibilitySchema = v.array(v.picklist(COMPATIBILITY_SOURCES, `must be one of ${COMPATIBILITY_SOURCES.join(', ')}`));

const ReleaseHoldSchema = v.pipe(v.number(), v.minValue(0, 'must not be negative'), v.maxValue(31 * 24 * 3600, 'must be at most 31 days (2678400)'));

const ipAddress = v.pipe(v.string(), v.check((s) => parseIP(s.trim()) !== undefined, (issue) => `invalid IP address ${JSON.stringify(issue.input)}`));

/** A service's sticky addresses: loadBalancer.reservations[]. */
const ReservationSchema = v.strictObject({
  service: v.pipe(nonEmpty, v.regex(/^[^\s/]+\/[^\s/]+$/, 'must be NAMESPACE/NAME of a Service')),
  addresses: v.pipe(v.array(ipAddress), v.minLength(1, 'must list one address, or one per IP family'), v.maxLength(2, 'must list at most two addresses (one per IP family)')),
});
export type RawReservation = v.InferOutput<typeof ReservationSchema>;
const ReservationsSchema = v.array(ReservationSchema);

export const LoadBalancerSchema = v.strictObject({
  classes: v.optional(ClassesSchema),
  pools: v.optional(v.array(PoolSchema)),
  /** Other address managers whose service annotations edge-ccm reads too (compatibility.ts). */
  compatibility: v.optional(CompatibilitySchema),
  /** How long an address a service released stays its own before another service may get it. */
  releaseHoldSeconds: v.optional(ReleaseHoldSchema),
  reservations: v.optional(ReservationsSchema),
});
export type RawLoadBalancer = v.InferOutput<typeof LoadBalancerSchema>;

/** What the second pass works on: a valid section, or its valid parts (a pool with a shape error is a null hole, so later indexes keep their paths). */
export type ResolvableLoadBalancer = Omit<RawLoadBalancer, 'pools' | 'reservations'> & { pools?: (RawPool | null)[]; reservations?: (RawReservation | null)[] };

/** The valid parts of a `loadBalancer` section that failed the schema. */
export function salvageLoadBalancer(input: unknown): ResolvableLoadBalancer {
  const lb = asRecord(input);
  return {
    classes: validOrUndefined(ClassesSchema, lb.classes),
    compatibility: validOrUndefined(CompatibilitySchema, lb.compatibility),
    releaseHoldSeconds: validOrUndefined(ReleaseHoldSchema, lb.releaseHoldSeconds),
    reservations: Array.isArray(lb.reservations) ? lb.reservations.map((r) => validOrUndefined(ReservationSchema, r) ?? null) : undefined,
    pools: Array.isArray(lb.pools) ? lb.pools.map((p) => validOrUndefined(PoolSchema, p) ?? null) : undefined,
  };
}
