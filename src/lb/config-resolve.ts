import { parseLabelSelector } from '../kube/label-selector.ts';
import { formatIP } from '../net/ip.ts';
import { SPECIAL_ADDRESS_BLOCKS } from '../net/special-addresses.ts';
import type { ConfigPath, ReportIssue } from '../config-file/issues.ts';
import type { LoadBalancerConfig, PoolConfig } from './config-model.ts';
import type { RawPool, ResolvableLoadBalancer } from './config-schema.ts';
import { firstOverlap, networkAndBroadcast, parseAddressRange, subtractRanges, type AddressRange } from './ranges.ts';
import { resolveReservations } from './reservations-resolve.ts';

/**
 * Second pass over the `loadBalancer` section: pools parsed, exclusions and (unless asked for)
 * network/broadcast addresses removed, duplicate names, overlaps and unreachable addresses
 * reported with their paths, pools put in the order services try them.
 */
export function resolveLoadBalancer(raw: ResolvableLoadBalancer | undefined, report: ReportIssue): LoadBalancerConfig {
  const lb = raw ?? {};
  const pools: PoolConfig[] = [];
  const names = new Map<string, number>();
  (lb.pools ?? []).forEach((p, i) => {
    if (!p) return; // a shape error, already reported
    const path: ConfigPath = ['loadBalancer', 'pools', i];
    const first = names.get(p.name);
    if (first !== undefined) report([...path, 'name'], `duplicate pool name ${JSON.stringify(p.name)} (also loadBalancer.pools[${first}])`);
    else names.set(p.name, i);
    const pool = resolvePool(p, path, report);
    if (!pool) return;
    for (const other of pools) {
      const overlap = firstOverlap(pool.ranges, other.ranges);
      if (overlap) report([...path, 'addresses'], `pool ${JSON.stringify(p.name)} overlaps pool ${JSON.stringify(other.name)} at ${formatIP(overlap)}`);
    }
    pools.push(pool);
  });
  // Array.prototype.sort is stable: equal priorities keep file order.
  pools.sort((a, b) => b.priority - a.priority);
  const out: LoadBalancerConfig = { classes: lb.classes ?? [], pools };
  // Only what the file sets: a section without them stays { classes, pools }.
  if (lb.compatibility?.length) out.compatibility = [...new Set(lb.compatibility)];
  if (lb.releaseHoldSeconds) out.releaseHoldMs = Math.round(lb.releaseHoldSeconds * 1000);
  const reservations = resolveReservations(lb.reservations, pools, report);
  if (reservations.length) out.reservations = reservations;
  return out;
}

function resolvePool(p: RawPool, path: ConfigPath, report: ReportIssue): PoolConfig | undefined {
  if (p.nodeAddresses || !p.addresses) return resolveNodeAddressPool(p, path, report);
  // The schema checked every entry and the selector parse.
  const parseAll = (texts: string[]) => texts.map((text) => parseAddressRange(text) as AddressRange);
  const addresses = p.addresses;
  const poolRanges = parseAll(addresses);
  // An exclusion with no address in the pool excludes nothing: always a typo (a wrong octet, another pool's range).
  (p.exclude ?? []).forEach((text, j) => {
    if (firstOverlap(parseAll([text]), poolRanges)) return;
    report([...path, 'exclude', j], `${JSON.stringify(text)} is outside pool ${JSON.stringify(p.name)}'s addresses (${addresses.join(', ')}): it would exclude nothing`);
  });
  const written = subtractRanges(poolRanges, parseAll(p.exclude ?? []));
  if (!p.allowSpecialAddresses) {
    const special = SPECIAL_ADDRESS_BLOCKS.flatMap((block) => {
      const at = firstOverlap(written, [block.prefix]);
      return at ? [`${block.kind} address ${formatIP(at)} (in ${block.cidr})`] : [];
    });
    if (special.length) {
      report([...path, 'addresses'], `pool ${JSON.stringify(p.name)} holds addresses no service can be reached at: ${special.join(', ')}; exclude them, or set allowSpecialAddresses: true`);
    }
  }
  // A CIDR's network and broadcast addresses are never handed out unless the pool asks for them.
  const ranges = p.includeNetworkAndBroadcast ? written : subtractRanges(written, addresses.flatMap(networkAndBroadcast));
  const serviceSelector = p.serviceSelector === undefined ? undefined : parseLabelSelector(p.serviceSelector);
  const announce = p.announce ?? 'none';
  if (p.interfaces && announce !== 'l2') report([...path, 'interfaces'], `interfaces are where the L2 speakers answer: only for announce: l2 (this pool's announce is ${announce})`);
  if (ranges.length === 0) {
    report([...path, 'addresses'], `pool ${JSON.stringify(p.name)} has no addresses left after exclusions`);
    return undefined;
  }
  return {
    name: p.name,
    ranges,
    namespaces: p.namespaces,
    serviceSelector,
    priority: p.priority ?? 0,
    autoAssign: p.autoAssign ?? true,
    shareAcrossNamespaces: p.shareAcrossNamespaces ?? false,
    announce,
    interfaces: p.interfaces,
    nodeSelector: p.nodeSelector === undefined ? undefined : parseLabelSelector(p.nodeSelector),
  };
}

/**
 * A pool whose addresses are the nodes' own (`nodeAddresses: InternalIP | ExternalIP`): no ranges,
 * and none of the settings that only mean something for ranges of spare addresses.
 */
function resolveNodeAddressPool(p: RawPool, path: ConfigPath, report: ReportIssue): PoolConfig | undefined {
  if (!p.nodeAddresses) {
    report([...path, 'addresses'], 'missing required key "addresses" (or nodeAddresses: InternalIP or ExternalIP, for a pool of the nodes\' own addresses)');
    return undefined;
  }
  const onlyForRanges = (['addresses', 'exclude', 'includeNetworkAndBroadcast', 'allowSpecialAddresses', 'shareAcrossNamespaces', 'interfaces'] as const).filter((k) => p[k] !== undefined);
  for (const key of onlyForRanges) report([...path, key], `a node-address pool (nodeAddresses: ${p.nodeAddresses}) hands out the nodes' own addresses: ${key} does not apply`);
  if ((p.announce ?? 'none') !== 'none') report([...path, 'announce'], `a node-address pool's addresses are the nodes' own, which they answer for themselves: announce must be none`);
  if (onlyForRanges.length) return undefined;
  return {
    name: p.name,
    ranges: [],
    namespaces: p.namespaces,
    serviceSelector: p.serviceSelector === undefined ? undefined : parseLabelSelector(p.serviceSelector),
    priority: p.priority ?? 0,
    autoAssign: p.autoAssign ?? true,
    shareAcrossNamespaces: false,
    announce: 'none',
    nodeSelector: p.nodeSelector === undefined ? undefined : parseLabelSelector(p.nodeSelector),
    nodeAddresses: p.nodeAddresses,
  };
}
