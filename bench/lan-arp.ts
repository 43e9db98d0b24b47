import type { NetnsLab } from '../test/harness/netns.ts';
import { stringOption as opt } from './args.ts';

/**
 * A segment's everyday ARP for the per-node benches (issue 38): on a plain switch every host's
 * ARP for every other host reaches every node, and a process listening to ARP is woken by each
 * unless it filters them out. `--lan-arp-per-second=N`: the lab's client asks for an address
 * nobody holds (NOBODY), N times a second, broadcast, with Debian's arping (Thomas Habets'),
 * which repeats every -W seconds until it is killed (with the lab at the latest).
 */
export const NOBODY = '198.51.100.150';

/** The option's value: requests a second, 0 (the default) for none. */
export function lanArpPerSecond(): number {
  const text = opt('lan-arp-per-second', '0');
  const perSecond = Number(text);
  if (!(perSecond >= 0 && perSecond <= 100)) throw new Error(`--lan-arp-per-second=${text}: a number of requests a second, 0 to 100`);
  return perSecond;
}

/** Starts the requests from `role`'s eth0 (none at 0); says so on the console. */
export function startLanArp(lab: NetnsLab, perSecond: number, role = 'client'): void {
  if (perSecond <= 0) return;
  lab.spawnLogged(role, 'lan-arp', ['arping', '-q', '-i', 'eth0', '-W', String(1 / perSecond), NOBODY]);
  console.log(`${role} asks for ${NOBODY} (nobody's) ${perSecond} times a second, broadcast on the LAN`);
}
