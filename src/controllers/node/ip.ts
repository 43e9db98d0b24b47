/**
 * IP parsing with Go's semantics where the node controller depends on them: k8s.io/utils/net's
 * ParseIPSloppy (IPv4 octets may have leading zeros, read as decimal) and net.IP.Equal (an IPv4
 * address equals its IPv4-mapped IPv6 form). Addresses are held as 16 bytes, IPv4 as ::ffff:a.b.c.d.
 */
export type IP = Uint8Array;

const V4_MAPPED_PREFIX = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff];

export function parseIP(text: string): IP | null {
  if (text.includes(':')) return parseIPv6(text);
  const v4 = parseIPv4(text);
  return v4 ? Uint8Array.from([...V4_MAPPED_PREFIX, ...v4]) : null;
}

/** True for IPv4 addresses, including IPv4-mapped IPv6 ones (Go's To4() != nil). */
export function isIPv4(ip: IP): boolean {
  return V4_MAPPED_PREFIX.every((b, i) => ip[i] === b);
}

export function isUnspecified(ip: IP): boolean {
  const tail = isIPv4(ip) ? ip.subarray(12) : ip;
  return tail.every((b) => b === 0);
}

export function ipEqual(a: IP, b: IP): boolean {
  return a.length === b.length && a.every((byte, i) => byte === b[i]);
}

function parseIPv4(text: string): number[] | null {
  const parts = text.split('.');
  if (parts.length !== 4) return null;
  const bytes: number[] = [];
  for (const part of parts) {
    if (!/^[0-9]{1,3}$/.test(part)) return null;
    const n = Number.parseInt(part, 10);
    if (n > 255) return null;
    bytes.push(n);
  }
  return bytes;
}

function parseIPv6(text: string): IP | null {
  const halves = text.split('::');
  if (halves.length > 2) return null;
  const head = halves[0] ? groups(halves[0]) : [];
  const tail = halves.length === 2 && halves[1] ? groups(halves[1]) : [];
  if (!head || !tail) return null;
  // Only the address's last group may be a dotted IPv4 address.
  const dottedOnlyLast = (gs: number[][]) => gs.slice(0, -1).every((g) => g.length === 2);
  if (!dottedOnlyLast(tail) || !dottedOnlyLast(halves.length === 2 ? [...head, []] : head)) return null;
  const headBytes = head.flat();
  const tailBytes = tail.flat();
  const missing = 16 - headBytes.length - tailBytes.length;
  // "::" must stand for at least one group of zeros; without it all 16 bytes must be given.
  if (halves.length === 2 ? missing < 2 : missing !== 0) return null;
  return Uint8Array.from([...headBytes, ...new Array<number>(missing).fill(0), ...tailBytes]);
}

/** Colon-separated groups as byte arrays: 2 bytes per hex group, 4 for a dotted IPv4 group. */
function groups(text: string): number[][] | null {
  const out: number[][] = [];
  for (const group of text.split(':')) {
    if (/^[0-9a-fA-F]{1,4}$/.test(group)) {
      const n = Number.parseInt(group, 16);
      out.push([n >> 8, n & 0xff]);
      continue;
    }
    const v4 = parseIPv4(group);
    if (!v4) return null;
    out.push(v4);
  }
  return out;
}
