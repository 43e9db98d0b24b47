import { formatIP, parseIP, parsePrefix, type IP, type IPFamily } from '../net/ip.ts';

/**
 * Inclusive address ranges (first..last of one family): what pools and their exclusions are made
 * of. Written as a CIDR (`203.0.113.0/28`), a range (`203.0.113.10-203.0.113.20`) or one address.
 */
export interface AddressRange {
  family: IPFamily;
  first: bigint;
  last: bigint;
}

/** Parses one pool or exclusion entry; a string explaining the problem when it is not valid. */
export function parseAddressRange(text: string): AddressRange | string {
  const s = text.trim();
  if (s.includes('/')) {
    const prefix = parsePrefix(s);
    if (prefix) return { family: prefix.family, first: prefix.first, last: prefix.last };
    const sloppy = parsePrefix(s, true);
    if (sloppy) return `invalid CIDR ${JSON.stringify(text)}: host bits are set (did you mean ${formatIP({ family: sloppy.family, value: sloppy.first })}/${sloppy.bits}?)`;
    return `invalid CIDR ${JSON.stringify(text)}`;
  }
  const dash = s.indexOf('-');
  if (dash >= 0) {
    const a = parseIP(s.slice(0, dash));
    const b = parseIP(s.slice(dash + 1));
    if (!a || !b) return `invalid address range ${JSON.stringify(text)}: expected FIRST-LAST, e.g. 203.0.113.10-203.0.113.20`;
    if (a.family !== b.family) return `invalid address range ${JSON.stringify(text)}: both ends must be of one IP family`;
    if (a.value > b.value) return `invalid address range ${JSON.stringify(text)}: the first address is after the last`;
    return { family: a.family, first: a.value, last: b.value };
  }
  const ip = parseIP(s);
  if (!ip) return `invalid address ${JSON.stringify(text)}: expected a CIDR, a range FIRST-LAST or one address`;
  return { family: ip.family, first: ip.value, last: ip.value };
}

/**
 * The network and broadcast addresses of a CIDR entry, which no host can be reached at: an IPv4
 * prefix up to /30 loses its first and last address, an IPv6 prefix up to /126 its first (the
 * Subnet-Router anycast address, RFC 4291 2.6.1; IPv6 has no broadcast). /31 and /32 (RFC 3021),
 * ranges and single addresses say exactly what they mean: none.
 */
export function networkAndBroadcast(text: string): AddressRange[] {
  const prefix = text.includes('/') ? parsePrefix(text.trim()) : undefined;
  if (!prefix || prefix.bits >= (prefix.family === 4 ? 31 : 127)) return [];
  const edges = [{ family: prefix.family, first: prefix.first, last: prefix.first }];
  if (prefix.family === 4) edges.push({ family: prefix.family, first: prefix.last, last: prefix.last });
  return edges;
}

export function rangeSize(r: AddressRange): bigint {
  return r.last - r.first + 1n;
}

/** Sorted (IPv4 first, then by address) and with overlapping or adjacent ranges merged. */
export function normalizeRanges(ranges: readonly AddressRange[]): AddressRange[] {
  const sorted = [...ranges].sort((a, b) => a.family - b.family || (a.first < b.first ? -1 : a.first > b.first ? 1 : 0));
  const out: AddressRange[] = [];
  for (const r of sorted) {
    const last = out.at(-1);
    if (last && last.family === r.family && r.first <= last.last + 1n) {
      if (r.last > last.last) last.last = r.last;
    } else out.push({ ...r });
  }
  return out;
}

/** `ranges` without the addresses of `holes`; both normalized first, the result normalized. */
export function subtractRanges(ranges: readonly AddressRange[], holes: readonly AddressRange[]): AddressRange[] {
  const cut = normalizeRanges(holes);
  const out: AddressRange[] = [];
  for (const r of normalizeRanges(ranges)) {
    let first = r.first;
    for (const h of cut) {
      if (h.family !== r.family || h.last < first || h.first > r.last) continue;
      if (h.first > first) out.push({ family: r.family, first, last: h.first - 1n });
      first = h.last + 1n;
      if (first > r.last) break;
    }
    if (first <= r.last) out.push({ family: r.family, first, last: r.last });
  }
  return out;
}

export function rangesContain(ranges: readonly AddressRange[], ip: IP): boolean {
  return ranges.some((r) => r.family === ip.family && ip.value >= r.first && ip.value <= r.last);
}

/** The first address two range lists have in common, if any. */
export function firstOverlap(a: readonly AddressRange[], b: readonly AddressRange[]): IP | undefined {
  let best: IP | undefined;
  for (const x of a) {
    for (const y of b) {
      if (x.family !== y.family || x.last < y.first || y.last < x.first) continue;
      const value = x.first > y.first ? x.first : y.first;
      if (!best || x.family < best.family || (x.family === best.family && value < best.value)) best = { family: x.family, value };
    }
  }
  return best;
}
