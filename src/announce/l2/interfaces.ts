import { readFileSync } from 'node:fs';
import { networkInterfaces } from 'node:os';
import { parsePrefix, prefixContains, type IP } from '../../net/ip.ts';

/**
 * The interface whose subnet holds `ip`: where a pool without an `interfaces` list is answered.
 * Host routes (/32, /128: a service address on lo or kube-ipvs0) and loopback are no subnet of a
 * link; when several interfaces match, the longest prefix wins (as routing would choose).
 */
export function subnetInterface(ip: IP, interfaces = networkInterfaces()): string | undefined {
  let best: { name: string; bits: number } | undefined;
  for (const [name, addresses] of Object.entries(interfaces)) {
    for (const a of addresses ?? []) {
      if (a.internal || !a.cidr) continue;
      const prefix = parsePrefix(a.cidr, true);
      if (!prefix || prefix.family !== ip.family || prefix.bits === (ip.family === 4 ? 32 : 128)) continue;
      if (prefixContains(prefix, ip) && (!best || prefix.bits > best.bits)) best = { name, bits: prefix.bits };
    }
  }
  return best?.name;
}

/**
 * subnetInterface over one reading of this host's interfaces: a reconcile places every elected
 * address, and each reading is a getifaddrs (with 1,000 services, read per address, adding them
 * took the speaker minutes of CPU: BENCHMARKS.md, footprint on every node).
 */
export function subnetInterfaceNow(): (ip: IP) => string | undefined {
  const interfaces = networkInterfaces();
  return (ip) => subnetInterface(ip, interfaces);
}

/**
 * Whether `name` has a link (operstate up, or unknown as some virtual interfaces report): false
 * without carrier (a cable, a switch port: operstate down or lowerlayerdown). Unreadable: true
 * (nothing known against it).
 */
export function linkUp(name: string): boolean {
  try {
    const state = readFileSync(`/sys/class/net/${name}/operstate`, 'utf8').trim();
    return state === 'up' || state === 'unknown';
  } catch {
    return true;
  }
}
