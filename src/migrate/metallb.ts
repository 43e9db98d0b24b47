import { parse } from 'yaml';
import { formatIP } from '../net/ip.ts';
import { networkAndBroadcast, parseAddressRange } from '../lb/ranges.ts';
import { objectName, poolName, selectorText, type ImportResult, type ImportedPool, type ManifestObject } from './imported.ts';

/**
 * MetalLB's pools as edge-ccm pools: IPAddressPool objects (metallb.io/v1beta1), or the
 * ConfigMap `config` of MetalLB before 0.13 (its `address-pools`). What MetalLB does that a pool
 * here does not (announcements, peers, namespace label selectors) is listed, not converted.
 *
 * Faithful to the addresses MetalLB hands out, so every address a service holds stays in a pool:
 * MetalLB gives out a CIDR's network and broadcast addresses (edge-ccm does not, unless
 * includeNetworkAndBroadcast), and avoidBuggyIPs leaves out every .0 and .255 address.
 */

/** More .0/.255 addresses than this in one pool are not written out one by one. */
const MAX_BUGGY_EXCLUSIONS = 256;

const ANNOUNCEMENTS: Record<string, string> = {
  L2Advertisement: 'announce its pools with announce: l2 (edge-ccm speaker)',
  BGPAdvertisement: 'announce its pools with announce: bgp and the bgp section',
  BGPPeer: 'a peer of the bgp section',
  BFDProfile: 'no BFD in edge-ccm',
  Community: 'communities of the bgp section',
};

interface RawPool {
  name: string;
  where: string;
  addresses: string[];
  autoAssign?: boolean;
  avoidBuggyIPs?: boolean;
  priority?: number;
  namespaces?: string[];
  serviceSelector?: string;
}

export function importMetalLB(objects: readonly ManifestObject[]): ImportResult {
  const unmapped: string[] = [];
  const raw: RawPool[] = [];
  for (const o of objects) {
    const where = objectName(o);
    if (o.kind === 'IPAddressPool') raw.push(fromIPAddressPool(o, where, unmapped));
    else if (o.kind === 'ConfigMap' && typeof o.data?.config === 'string') raw.push(...fromLegacyConfig(o.data.config, where, unmapped));
    else if (o.kind && ANNOUNCEMENTS[o.kind]) unmapped.push(`${where}: ${ANNOUNCEMENTS[o.kind]}`);
  }
  // MetalLB: a lower priority number is tried first, pools without one last; here the highest first, unset 0.
  const highest = Math.max(0, ...raw.map((p) => p.priority ?? 0));
  const pools = raw.map((p): ImportedPool => {
    const exclude = p.avoidBuggyIPs ? buggyAddresses(p, unmapped) : [];
    const cidrEdges = p.addresses.some((a) => networkAndBroadcast(a).length > 0);
    return {
      name: poolName(p.name),
      addresses: p.addresses,
      exclude: exclude.length ? exclude : undefined,
      namespaces: p.namespaces,
      serviceSelector: p.serviceSelector,
      priority: p.priority !== undefined ? highest + 1 - p.priority : undefined,
      autoAssign: p.autoAssign === false ? false : undefined,
      includeNetworkAndBroadcast: cidrEdges ? true : undefined,
    };
  });
  return { source: 'metallb', pools, unmapped };
}

function fromIPAddressPool(o: ManifestObject, where: string, unmapped: string[]): RawPool {
  const spec = (o.spec ?? {}) as {
    addresses?: string[];
    autoAssign?: boolean;
    avoidBuggyIPs?: boolean;
    serviceAllocation?: { priority?: number; namespaces?: string[]; namespaceSelectors?: unknown[]; serviceSelectors?: unknown[] };
  };
  const alloc = spec.serviceAllocation ?? {};
  if (alloc.namespaceSelectors?.length) unmapped.push(`${where}: spec.serviceAllocation.namespaceSelectors (edge-ccm's pools list namespaces by name: add them to namespaces)`);
  const selectors = alloc.serviceSelectors ?? [];
  if (selectors.length > 1) unmapped.push(`${where}: spec.serviceAllocation.serviceSelectors beyond the first (a pool here has one serviceSelector)`);
  const pool: RawPool = {
    name: o.metadata?.name ?? 'imported',
    where,
    addresses: (spec.addresses ?? []).map((a) => a.replace(/\s+/g, '')),
    autoAssign: spec.autoAssign,
    avoidBuggyIPs: spec.avoidBuggyIPs,
    priority: alloc.priority,
    namespaces: alloc.namespaces?.length ? alloc.namespaces : undefined,
  };
  const selector = selectorText(selectors[0], `${where}: spec.serviceAllocation.serviceSelectors[0]`, unmapped);
  if (selector) pool.serviceSelector = selector;
  return pool;
}

function fromLegacyConfig(text: string, where: string, unmapped: string[]): RawPool[] {
  const config = (parse(text) ?? {}) as { 'address-pools'?: Record<string, unknown>[]; peers?: unknown[]; 'bgp-communities'?: unknown };
  if (config.peers?.length) unmapped.push(`${where}: peers (peers of the bgp section)`);
  if (config['bgp-communities']) unmapped.push(`${where}: bgp-communities (communities of the bgp section)`);
  return (config['address-pools'] ?? []).map((p) => {
    const name = String(p.name ?? 'imported');
    if (p.protocol) unmapped.push(`${where}: address-pools ${name}: protocol ${String(p.protocol)} (${p.protocol === 'bgp' ? 'announce: bgp and the bgp section' : 'announce: l2'})`);
    if (Array.isArray(p['bgp-advertisements']) && p['bgp-advertisements'].length) unmapped.push(`${where}: address-pools ${name}: bgp-advertisements (the bgp section)`);
    return {
      name,
      where,
      addresses: ((p.addresses as string[] | undefined) ?? []).map((a) => String(a).replace(/\s+/g, '')),
      autoAssign: p['auto-assign'] as boolean | undefined,
      avoidBuggyIPs: p['avoid-buggy-ips'] as boolean | undefined,
    };
  });
}

/** The .0 and .255 addresses of the pool's IPv4 entries, which avoidBuggyIPs never hands out. */
function buggyAddresses(p: RawPool, unmapped: string[]): string[] {
  const out: string[] = [];
  for (const text of p.addresses) {
    const r = parseAddressRange(text);
    if (typeof r === 'string' || r.family !== 4) continue;
    for (let block = r.first - (r.first % 256n); block <= r.last; block += 256n) {
      for (const value of [block, block + 255n]) if (value >= r.first && value <= r.last) out.push(formatIP({ family: 4, value }));
      if (out.length > MAX_BUGGY_EXCLUSIONS) {
        unmapped.push(`${p.where}: avoidBuggyIPs on more than ${MAX_BUGGY_EXCLUSIONS / 2} /24s (list the .0 and .255 addresses in exclude)`);
        return [];
      }
    }
  }
  return out;
}
