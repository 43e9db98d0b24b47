import type { V1NodeAddress } from '@kubernetes/client-node';
import { formatIP, parseIP, type IP } from '../../src/net/ip.ts';
import { rangesContain, parseAddressRange, type AddressRange } from '../../src/lb/ranges.ts';
import type { LxdAddressPolicy } from './config-model.ts';
import type { Instance } from './instance-list.ts';

/**
 * A node's addresses from its instance's state.network: global scope only, from the chosen
 * interfaces (by default the instance's nic devices, so lo and the bridges that containers
 * inside create, docker0, cni0, lxdbr0, are left out), never loopback or link-local, inside
 * `include` and outside `exclude`, of the wanted families in their order, each once. All are
 * InternalIP; the instance name is added as Hostname when the policy says so.
 */

const NEVER: AddressRange[] = ['127.0.0.0/8', '169.254.0.0/16', '::1/128', 'fe80::/10'].map((c) => parseAddressRange(c) as AddressRange);

export function instanceAddresses(instance: Instance, policy: LxdAddressPolicy): IP[] {
  const interfaces = policy.interfaces.length ? policy.interfaces : instance.nics;
  const seen = new Set<string>();
  const kept: IP[] = [];
  for (const iface of interfaces) {
    for (const a of instance.network.get(iface) ?? []) {
      if (a.scope !== 'global') continue;
      const ip = parseIP(a.address);
      if (!ip || rangesContain(NEVER, ip) || !policy.families.includes(ip.family)) continue;
      if (policy.include.length && !rangesContain(policy.include, ip)) continue;
      if (rangesContain(policy.exclude, ip)) continue;
      const key = formatIP(ip);
      if (seen.has(key)) continue;
      seen.add(key);
      kept.push(ip);
    }
  }
  return kept.sort((a, b) => policy.families.indexOf(a.family) - policy.families.indexOf(b.family));
}

export function nodeAddresses(ips: readonly IP[], name: string, policy: LxdAddressPolicy): V1NodeAddress[] {
  const out: V1NodeAddress[] = ips.map((ip) => ({ type: 'InternalIP', address: formatIP(ip) }));
  if (policy.hostname) out.push({ type: 'Hostname', address: name });
  return out;
}
