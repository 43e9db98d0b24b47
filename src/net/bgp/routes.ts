import { formatIP, formatPrefix, type IP, parseIP, parsePrefix, type Prefix } from '../ip.ts';

/**
 * The table the caller hands the speaker: what to announce, as plain data, parsed once here
 * into typed routes (bad entries are refused naming the entry and the field).
 */
export interface Announcement {
  /** "198.51.100.7/32", "2001:db8:1::/64". */
  prefix: string;
  /**
   * Third-party next hops of the prefix's family (the nodes). Several: one path each where the
   * peer negotiated ADD-PATH receive, else one of them, chosen stably (see pickNextHop).
   */
  nextHops: string[];
  /** RFC 1997 communities: "65000:100", or no-export, no-advertise, no-export-subconfed. */
  communities?: string[];
  /** LOCAL_PREF for iBGP peers (default 100); not sent to eBGP peers (RFC 4271 5.1.5). */
  localPref?: number;
}

export interface BgpRoute {
  prefix: Prefix;
  key: string;
  /** Sorted, no duplicates. */
  nextHops: IP[];
  /** Sorted, no duplicates. */
  communities: number[];
  localPref?: number;
}

const WELL_KNOWN_COMMUNITIES: Record<string, number> = {
  'no-export': 0xffffff01,
  'no-advertise': 0xffffff02,
  'no-export-subconfed': 0xffffff03,
};

export function parseCommunity(text: string): number | undefined {
  const known = WELL_KNOWN_COMMUNITIES[text.toLowerCase()];
  if (known !== undefined) return known;
  const m = /^(\d{1,5}):(\d{1,5})$/.exec(text);
  if (!m) return undefined;
  const high = Number(m[1]);
  const low = Number(m[2]);
  if (high > 0xffff || low > 0xffff) return undefined;
  return ((high << 16) | low) >>> 0;
}

export function formatCommunity(c: number): string {
  return `${c >>> 16}:${c & 0xffff}`;
}

/** An announcement as text, equal for equal announcements (the reuse key of parseAnnouncements). */
function announcementText(a: Announcement): string {
  return `${a.prefix}|${Array.isArray(a.nextHops) ? a.nextHops.join(',') : ''}|${Array.isArray(a.communities) ? a.communities.join(',') : ''}|${a.localPref ?? ''}`;
}

/**
 * Parses the caller's table; throws one Error listing every bad entry by index and field.
 * `reuse` (the previous call's, filled by this one when it succeeds) maps an announcement's text
 * to its parsed route: a table that mostly repeats the last one (every change of the cluster
 * recomputes the whole table) parses only what changed. Parsing is most of the cost: 15,000
 * entries took 400-600 ms each time without it.
 */
export function parseAnnouncements(list: readonly Announcement[], reuse?: Map<string, BgpRoute>): BgpRoute[] {
  const problems: string[] = [];
  const routes: BgpRoute[] = [];
  const seen = new Map<string, number>();
  const texts: string[] = [];
  list.forEach((a, i) => {
    const at = `announcements[${i}]`;
    const text = reuse ? announcementText(a) : '';
    texts.push(text);
    const known = reuse?.get(text);
    if (known) {
      const earlier = seen.get(known.key);
      if (earlier !== undefined) problems.push(`${at}.prefix: ${known.key} is already announced by announcements[${earlier}]`);
      else {
        seen.set(known.key, i);
        routes.push(known);
      }
      return;
    }
    const prefix = typeof a.prefix === 'string' ? parsePrefix(a.prefix) : undefined;
    if (!prefix) {
      problems.push(`${at}.prefix: ${JSON.stringify(a.prefix)} is not a prefix in canonical form (address/bits, no host bits set)`);
      return;
    }
    const key = formatPrefix(prefix);
    const earlier = seen.get(key);
    if (earlier !== undefined) {
      problems.push(`${at}.prefix: ${key} is already announced by announcements[${earlier}]`);
      return;
    }
    seen.set(key, i);
    const hops = new Map<bigint, IP>();
    if (!Array.isArray(a.nextHops) || a.nextHops.length === 0) problems.push(`${at}.nextHops: at least one next hop is required`);
    (a.nextHops ?? []).forEach((h, j) => {
      const ip = typeof h === 'string' ? parseIP(h) : undefined;
      if (!ip) problems.push(`${at}.nextHops[${j}]: ${JSON.stringify(h)} is not an IP address`);
      else if (ip.family !== prefix.family) problems.push(`${at}.nextHops[${j}]: ${h} is IPv${ip.family}, the prefix ${key} is IPv${prefix.family}`);
      else hops.set(ip.value, ip);
    });
    const communities = new Set<number>();
    (a.communities ?? []).forEach((t, j) => {
      const c = typeof t === 'string' ? parseCommunity(t) : undefined;
      if (c === undefined) problems.push(`${at}.communities[${j}]: ${JSON.stringify(t)} is not a community (ASN:value with both 0..65535, or no-export, no-advertise, no-export-subconfed)`);
      else communities.add(c);
    });
    if (a.localPref !== undefined && !(Number.isInteger(a.localPref) && a.localPref >= 0 && a.localPref <= 0xffffffff)) {
      problems.push(`${at}.localPref: ${JSON.stringify(a.localPref)} is not an integer in 0..4294967295`);
    }
    routes.push({
      prefix,
      key,
      nextHops: [...hops.values()].sort((x, y) => (x.value < y.value ? -1 : x.value > y.value ? 1 : 0)),
      communities: [...communities].sort((x, y) => x - y),
      ...(a.localPref !== undefined ? { localPref: a.localPref } : {}),
    });
  });
  if (problems.length > 0) throw new Error(`invalid BGP announcements:\n  ${problems.join('\n  ')}`);
  if (reuse) {
    // Every entry is valid here, so routes[i] is list[i]'s.
    reuse.clear();
    routes.forEach((r, i) => reuse.set(texts[i]!, r));
  }
  return routes;
}

function fnv1a(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193) >>> 0;
  return h;
}

/**
 * The one next hop of a prefix for a peer without ADD-PATH: rendezvous hashing, so the choice
 * depends only on the prefix and the set of next hops (the same on every speaker and after a
 * restart), and a next hop that leaves moves only the prefixes it carried.
 */
export function pickNextHop(route: BgpRoute): IP {
  let best = route.nextHops[0]!;
  let bestScore = -1;
  for (const hop of route.nextHops) {
    const score = fnv1a(`${route.key}|${formatIP(hop)}`);
    if (score > bestScore) {
      best = hop;
      bestScore = score;
    }
  }
  return best;
}

/**
 * Path identifiers (RFC 7911) for a prefix's next hops: derived from the address (IPv4: the
 * address itself; IPv6: its low 32 bits), so each path keeps its identifier across updates and
 * restarts and a peer replaces exactly the path it had; a collision takes the next free number.
 */
export function pathIds(hops: readonly IP[]): number[] {
  const used = new Set<number>();
  return hops.map((h) => {
    let id = Number(h.value & 0xffffffffn);
    while (used.has(id)) id = (id + 1) >>> 0;
    used.add(id);
    return id;
  });
}
