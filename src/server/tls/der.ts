/**
 * The few ASN.1 DER encodings an X.509 certificate needs (ITU-T X.690). Written here rather than
 * taken from a library: a self-signed serving certificate uses a dozen element types, and the
 * smallest certificate libraries bring a general ASN.1 schema engine along with them. The tag
 * numbers are the reader's (src/x509/der.ts).
 */
import { TAG } from '../../x509/der.ts';

function lengthBytes(length: number): number[] {
  if (length < 0x80) return [length];
  const bytes: number[] = [];
  for (let n = length; n > 0; n = Math.floor(n / 256)) bytes.unshift(n & 0xff);
  return [0x80 | bytes.length, ...bytes];
}

/** One tag-length-value element. */
export function tlv(tag: number, content: Uint8Array): Uint8Array {
  const head = [tag, ...lengthBytes(content.length)];
  const out = new Uint8Array(head.length + content.length);
  out.set(head, 0);
  out.set(content, head.length);
  return out;
}

function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let offset = 0;
  for (const p of parts) {
    out.set(p, offset);
    offset += p.length;
  }
  return out;
}

export const sequence = (...items: Uint8Array[]): Uint8Array => tlv(TAG.sequence, concat(items));
export const set = (...items: Uint8Array[]): Uint8Array => tlv(TAG.set, concat(items));
export const octetString = (bytes: Uint8Array): Uint8Array => tlv(TAG.octetString, bytes);
export const utf8String = (s: string): Uint8Array => tlv(TAG.utf8String, new TextEncoder().encode(s));
export const boolean = (b: boolean): Uint8Array => tlv(TAG.boolean, Uint8Array.of(b ? 0xff : 0x00));

/** A BIT STRING of whole bytes (no unused bits), as signatures and keys are. */
export const bitString = (bytes: Uint8Array): Uint8Array => tlv(TAG.bitString, concat([Uint8Array.of(0), bytes]));

/**
 * A named-bit BIT STRING (KeyUsage) from bit numbers, bit 0 being the first byte's top bit. DER
 * drops trailing zero bits, so the unused-bits count says where the last set bit is.
 */
export function namedBits(bits: number[]): Uint8Array {
  const highest = Math.max(...bits);
  const bytes = new Uint8Array(Math.floor(highest / 8) + 1);
  for (const b of bits) bytes[Math.floor(b / 8)]! |= 0x80 >> (b % 8);
  const unused = 7 - (highest % 8);
  return tlv(TAG.bitString, concat([Uint8Array.of(unused), bytes]));
}

/** A non-negative INTEGER from its big-endian magnitude. */
export function unsignedInteger(magnitude: Uint8Array): Uint8Array {
  let start = 0;
  while (start < magnitude.length - 1 && magnitude[start] === 0) start++;
  const trimmed = magnitude.subarray(start);
  // A set top bit would read as negative: DER wants a leading zero byte then.
  const needsPad = trimmed.length === 0 || (trimmed[0]! & 0x80) !== 0;
  return tlv(TAG.integer, needsPad ? concat([Uint8Array.of(0), trimmed]) : trimmed);
}

export const smallInteger = (n: number): Uint8Array => unsignedInteger(Uint8Array.of(n));

export function oid(dotted: string): Uint8Array {
  const arcs = dotted.split('.').map(Number);
  const [first = 0, second = 0, ...rest] = arcs;
  const bytes: number[] = [first * 40 + second];
  for (const arc of rest) {
    const base128: number[] = [arc & 0x7f];
    for (let n = Math.floor(arc / 128); n > 0; n = Math.floor(n / 128)) base128.unshift((n & 0x7f) | 0x80);
    bytes.push(...base128);
  }
  return tlv(TAG.oid, Uint8Array.from(bytes));
}

/** X.509 Time: UTCTime through 2049, GeneralizedTime from 2050 (RFC 5280 4.1.2.5). */
export function time(date: Date): Uint8Array {
  const iso = date.toISOString(); // 2024-01-02T03:04:05.678Z
  const digits = iso.slice(0, 19).replace(/[-T:]/g, '') + 'Z'; // 20240102030405Z
  const year = date.getUTCFullYear();
  if (year >= 1950 && year < 2050) return tlv(TAG.utcTime, new TextEncoder().encode(digits.slice(2)));
  return tlv(TAG.generalizedTime, new TextEncoder().encode(digits));
}

/** A context-specific tag: [n] EXPLICIT wraps an element, [n] IMPLICIT replaces a primitive's tag. */
export const explicit = (n: number, inner: Uint8Array): Uint8Array => tlv(0xa0 | n, inner);
export const implicitPrimitive = (n: number, content: Uint8Array): Uint8Array => tlv(0x80 | n, content);
