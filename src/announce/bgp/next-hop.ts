import type { V1NodeAddress } from '@kubernetes/client-node';
import { formatIP, parseIP, type IPFamily } from '../../net/ip.ts';

/**
 * The address a node is reached at, as a BGP next hop for what it serves (its pod CIDR, the
 * load-balancer addresses it answers for): its first InternalIP of the family, else its first
 * ExternalIP of the family; undefined when it has neither. A third-party next hop works only
 * where the router and the node share a subnet (RFC 4271 5.1.3): see docs/networking/bgp.md.
 */
export function nodeNextHop(addresses: readonly V1NodeAddress[] | undefined, family: IPFamily): string | undefined {
  for (const type of ['InternalIP', 'ExternalIP']) {
    for (const a of addresses ?? []) {
      if (a.type !== type) continue;
      const ip = parseIP(a.address);
      if (ip?.family === family) return formatIP(ip);
    }
  }
  return undefined;
}
