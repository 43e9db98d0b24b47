import type { V1NodeAddress } from '@kubernetes/client-node';
import { formatIP, parseIP, type IP } from '../../src/net/ip.ts';
import { rangesContain, parseAddressRange, type AddressRange } from '../../src/lb/ranges.ts';
import type { AddressPolicy } from './config-model.ts';

/**
 * Which of a VM's addresses its node gets: parsed, canonical, without loopback and link-local
 * ones, inside `include` (when given) and outside `exclude`, of the wanted families, ordered by
 * family preference (then as found), each once. All are InternalIP; the VM name is added as
 * Hostname when the policy says so.
 */

const NEVER: AddressRange[] = ['127.0.0.0/8', '169.254.0.0/16', '::1/128', 'fe80::/10'].map((c) => parseAddressRange(c) as AddressRange);

export function selectAddresses(candidates: readonly string[], policy: AddressPolicy): IP[] {
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

export function vmNodeAddresses(ips: readonly IP[], vmName: string, policy: AddressPolicy): V1NodeAddress[] {
  const out: V1NodeAddress[] = ips.map((ip) => ({ type: 'InternalIP', address: formatIP(ip) }));
  if (policy.hostname && vmName) out.push({ type: 'Hostname', address: vmName });
  return out;
}
