import ipaddr from 'ipaddr.js';

/**
 * IP addresses and prefixes as (family, bigint) pairs, so ranges, containment and the
 * load-balancer allocator are plain integer arithmetic for IPv4 and IPv6 alike. Parsing and
 * formatting are ipaddr.js's (strict; IPv4-mapped IPv6 is kept as IPv6).
 */
export type IPFamily = 4 | 6;

export interface IP {
  family: IPFamily;
  value: bigint;
}

export interface Prefix {
  family: IPFamily;
  /** First address of the prefix (the network address). */
  first: bigint;
  /** Last address of the prefix. */
  last: bigint;
  bits: number;
}

const WIDTH: Record<IPFamily, number> = { 4: 32, 6: 128 };

export function parseIP(s: string): IP | undefined {
  const text = s.trim();
  if (!ipaddr.isValid(text)) return undefined;
  // ipaddr.isValid also accepts "1" or "0x1" style IPv4 shorthands: require the canonical dotted form.
  if (!text.includes(':') && !ipaddr.IPv4.isValidFourPartDecimal(text)) return undefined;
  const addr = ipaddr.parse(text);
  return { family: addr.kind() === 'ipv4' ? 4 : 6, value: bytesToBigInt(addr.toByteArray()) };
}

export function formatIP(ip: IP): string {
  const bytes = bigIntToBytes(ip.value, WIDTH[ip.family] / 8);
  return ipaddr.fromByteArray(bytes).toString();
}

/** Parses "10.0.0.0/16" or "fd00::/64"; a host part beyond the mask is refused unless `sloppy`. */
export function parsePrefix(s: string, sloppy = false): Prefix | undefined {
  const slash = s.indexOf('/');
  if (slash < 0) return undefined;
  const ip = parseIP(s.slice(0, slash));
  const bitsText = s.slice(slash + 1);
  if (!ip || !/^\d{1,3}$/.test(bitsText)) return undefined;
  const bits = Number(bitsText);
  const width = WIDTH[ip.family];
  if (bits > width) return undefined;
  const hostBits = BigInt(width - bits);
  const first = (ip.value >> hostBits) << hostBits;
  if (!sloppy && first !== ip.value) return undefined;
  return { family: ip.family, first, last: first + (1n << hostBits) - 1n, bits };
}

export function prefixContains(prefix: Prefix, ip: IP): boolean {
  return prefix.family === ip.family && ip.value >= prefix.first && ip.value <= prefix.last;
}

export function formatPrefix(prefix: Prefix): string {
  return `${formatIP({ family: prefix.family, value: prefix.first })}/${prefix.bits}`;
}

export function ipFamilyOf(s: string): IPFamily | undefined {
  return parseIP(s)?.family;
}

/** The address as it travels in packets: 4 or 16 bytes, network order. */
export function ipToBytes(ip: IP): Uint8Array {
  return Uint8Array.from(bigIntToBytes(ip.value, WIDTH[ip.family] / 8));
}

/** An address read from a packet (4 bytes: IPv4, 16: IPv6); undefined for any other length. */
export function ipFromBytes(bytes: Uint8Array): IP | undefined {
  if (bytes.length !== 4 && bytes.length !== 16) return undefined;
  return { family: bytes.length === 4 ? 4 : 6, value: bytesToBigInt([...bytes]) };
}

function bytesToBigInt(bytes: number[]): bigint {
  let v = 0n;
  for (const b of bytes) v = (v << 8n) | BigInt(b);
  return v;
}

function bigIntToBytes(v: bigint, length: number): number[] {
  const out = new Array<number>(length);
  for (let i = length - 1; i >= 0; i--) {
    out[i] = Number(v & 0xffn);
    v >>= 8n;
  }
  return out;
}
