import type { IP, IPFamily, Prefix } from '../ip.ts';
import { BgpError } from './errors.ts';
import type { Reader, Writer } from './wire.ts';

/**
 * Network layer reachability information: a prefix as (length in bits, the shortest run of
 * address bytes that holds them) (RFC 4271 4.3), preceded by a 4-byte path identifier when
 * ADD-PATH is in use for the family in that direction (RFC 7911 3).
 */
export interface Nlri {
  prefix: Prefix;
  /** Present exactly when the family carries path identifiers on this session. */
  pathId?: number;
}

export const ADDRESS_BYTES: Record<IPFamily, number> = { 4: 4, 6: 16 };

export function nlriLength(n: Nlri): number {
  return (n.pathId === undefined ? 0 : 4) + 1 + Math.ceil(n.prefix.bits / 8);
}

export function writeNlri(w: Writer, n: Nlri): void {
  if (n.pathId !== undefined) w.u32(n.pathId);
  const bits = n.prefix.bits;
  w.u8(bits);
  const total = ADDRESS_BYTES[n.prefix.family];
  const used = Math.ceil(bits / 8);
  // The address's leading `used` bytes, most significant first.
  for (let i = 0; i < used; i++) w.u8(Number((n.prefix.first >> BigInt(8 * (total - 1 - i))) & 0xffn));
}

/**
 * Reads NLRI until the reader is empty. `error` builds the NOTIFICATION for this field (the
 * classic NLRI and withdrawn fields answer "invalid network field", the MP attributes
 * "optional attribute error").
 */
export function readNlriList(r: Reader, family: IPFamily, withPathId: boolean, error: (what: string) => BgpError): Nlri[] {
  const out: Nlri[] = [];
  const width = ADDRESS_BYTES[family] * 8;
  while (r.remaining > 0) {
    const pathId = withPathId ? r.u32('path identifier') : undefined;
    const bits = r.u8('prefix length');
    if (bits > width) throw error(`prefix length ${bits} exceeds ${width} bits of an IPv${family} address`);
    const used = Math.ceil(bits / 8);
    if (used > r.remaining) throw error(`prefix /${bits} needs ${used} address bytes, ${r.remaining} left`);
    const raw = r.bytes_(used, 'prefix');
    let value = 0n;
    for (let i = 0; i < ADDRESS_BYTES[family]; i++) value = (value << 8n) | BigInt(i < used ? raw[i]! : 0);
    // Bits past the prefix length are irrelevant (RFC 4271 4.3): cleared so equal prefixes compare equal.
    const hostBits = BigInt(width - bits);
    const first = (value >> hostBits) << hostBits;
    const prefix: Prefix = { family, first, last: first + (1n << hostBits) - 1n, bits };
    out.push(pathId === undefined ? { prefix } : { prefix, pathId });
  }
  return out;
}

export function writeAddress(w: Writer, ip: IP): void {
  const n = ADDRESS_BYTES[ip.family];
  for (let i = n - 1; i >= 0; i--) w.u8(Number((ip.value >> BigInt(8 * i)) & 0xffn));
}

export function readAddress(bytes: Uint8Array, family: IPFamily): IP {
  let value = 0n;
  for (const b of bytes) value = (value << 8n) | BigInt(b);
  return { family, value };
}

/** A short error builder for callers: `nlriError(code, subcode)` binds the NOTIFICATION. */
export function errorOf(code: number, subcode: number, data?: Uint8Array): (what: string) => BgpError {
  return (what) => new BgpError(code, subcode, what, data);
}
