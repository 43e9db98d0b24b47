import type { V1NodeAddress } from '@kubernetes/client-node';
import { formatIP, parseIP, type IP, type IPFamily } from '../net/ip.ts';
import { rangesContain, parseAddressRange, type AddressRange } from '../lb/ranges.ts';
import type { ReportIssue } from '../config-file/issues.ts';

/**
 * Which of a machine's addresses its node gets, for the providers that read them from an API
 * (proxmox, lxd): the `addresses` policy as resolved from the file, the selection, and the
 * node's address list.
 */

export interface AddressPolicy {
  /** Addresses a node may get; empty: any. */
  include: AddressRange[];
  exclude: AddressRange[];
  /** Families kept, in the order they are listed on the node. */
  families: IPFamily[];
  /** Also report the machine's name as the node's Hostname address. */
  hostname: boolean;
}

/** The `addresses` keys every such provider has, as written in the file (the schema checked each entry). */
export interface RawAddressPolicy {
  include?: string[];
  exclude?: string[];
  families?: ('IPv4' | 'IPv6')[];
  hostname?: boolean;
}

/** The policy from the file's `addresses` (default: both families, IPv4 first, and the Hostname). */
export function resolveAddressPolicy(a: RawAddressPolicy, report: ReportIssue): AddressPolicy {
  const ranges = (texts: string[] | undefined) => (texts ?? []).map((t) => parseAddressRange(t) as AddressRange);
  const families = (a.families ?? ['IPv4', 'IPv6']).map((f): IPFamily => (f === 'IPv6' ? 6 : 4));
  if (new Set(families).size !== families.length) report(['addresses', 'families'], 'lists a family twice');
  return { include: ranges(a.include), exclude: ranges(a.exclude), families: [...new Set(families)], hostname: a.hostname ?? true };
}

const NEVER: AddressRange[] = ['127.0.0.0/8', '169.254.0.0/16', '::1/128', 'fe80::/10'].map((c) => parseAddressRange(c) as AddressRange);

/**
 * The candidates kept: parsed, canonical, without loopback and link-local ones, inside `include`
 * (when given) and outside `exclude`, of the wanted families, ordered by family preference (then
 * as found), each once.
 */
export function selectAddresses(candidates: Iterable<string>, policy: Pick<AddressPolicy, 'include' | 'exclude' | 'families'>): IP[] {
  const seen = new Set<string>();
  const kept: IP[] = [];
  for (const text of candidates) {
    const ip = parseIP(text);
    if (!ip || rangesContain(NEVER, ip)) continue;
    if (!policy.families.includes(ip.family)) continue;
    if (policy.include.length && !rangesContain(policy.include, ip)) continue;
    if (rangesContain(policy.exclude, ip)) continue;
    const key = formatIP(ip);
    if (seen.has(key)) continue;
    seen.add(key);
    kept.push(ip);
  }
  // Array.prototype.sort is stable: within a family, the order found.
  return kept.sort((a, b) => policy.families.indexOf(a.family) - policy.families.indexOf(b.family));
}

/** All InternalIP; the machine's name added as Hostname when the policy says so. */
export function nodeAddresses(ips: readonly IP[], name: string, policy: Pick<AddressPolicy, 'hostname'>): V1NodeAddress[] {
  const out: V1NodeAddress[] = ips.map((ip) => ({ type: 'InternalIP', address: formatIP(ip) }));
  if (policy.hostname && name) out.push({ type: 'Hostname', address: name });
  return out;
}
