/**
 * A strict DER reader (X.690 section 10): one encoding per value or an error. Definite lengths in
 * their shortest form, one-byte tags, every element ending exactly where its parent ends, object
 * identifiers without padding and with arcs Go's encoding/asn1 reads (at most 2^31-1). What is
 * read here has one reading, so whoever reads the same bytes after us (the API server, the
 * signer) cannot find another element, another length or another OID in them.
 */

export class DerError extends Error {}

export interface Tlv {
  tag: number;
  /** The content octets. */
  value: Uint8Array;
  /** The whole element, header included. */
  raw: Uint8Array;
}

/** The one element that is all of `bytes` (nothing before it, nothing after it). */
export function readOnly(bytes: Uint8Array, what: string): Tlv {
  const tlv = readOne(bytes, 0, what);
  if (tlv.raw.length !== bytes.length) throw new DerError(`${what}: ${bytes.length - tlv.raw.length} bytes after the element`);
  return tlv;
}

/** The elements a constructed element holds, in order. */
export function children(parent: Tlv, what: string): Tlv[] {
  if ((parent.tag & 0x20) === 0) throw new DerError(`${what}: a primitive element where a constructed one is expected`);
  const out: Tlv[] = [];
  for (let offset = 0; offset < parent.value.length;) {
    const tlv = readOne(parent.value, offset, what);
    out.push(tlv);
    offset += tlv.raw.length;
  }
  return out;
}

/** The element with `tag`, or an error naming what was found instead. */
export function expectTag(tlv: Tlv | undefined, tag: number, what: string): Tlv {
  if (!tlv) throw new DerError(`${what} is missing`);
  if (tlv.tag !== tag) throw new DerError(`${what}: expected tag 0x${hex(tag)}, found 0x${hex(tlv.tag)}`);
  return tlv;
}

/** Exactly `count` children (a SEQUENCE with a field more or less than its type has is refused: a reader that ignores the rest reads another value). */
export function fields(parent: Tlv, counts: readonly number[], what: string): Tlv[] {
  const out = children(parent, what);
  if (!counts.includes(out.length)) throw new DerError(`${what}: ${out.length} fields, expected ${counts.join(' or ')}`);
  return out;
}

/** An OBJECT IDENTIFIER in dotted form. */
export function readOid(tlv: Tlv | undefined, what: string): string {
  const bytes = expectTag(tlv, 0x06, what).value;
  if (bytes.length === 0) throw new DerError(`${what}: an empty OBJECT IDENTIFIER`);
  const arcs: number[] = [];
  for (let i = 0; i < bytes.length;) {
    if (bytes[i] === 0x80) throw new DerError(`${what}: an OBJECT IDENTIFIER arc with a leading 0x80 (not minimal)`);
    let value = 0;
    let byte: number;
    do {
      if (i >= bytes.length) throw new DerError(`${what}: an OBJECT IDENTIFIER ending inside an arc`);
      byte = bytes[i++]!;
      value = value * 128 + (byte & 0x7f);
      if (value > 0x7fffffff) throw new DerError(`${what}: an OBJECT IDENTIFIER arc above 2^31-1`);
    } while (byte & 0x80);
    if (arcs.length === 0) arcs.push(value < 80 ? Math.floor(value / 40) : 2, value < 80 ? value % 40 : value - 80);
    else arcs.push(value);
  }
  return arcs.join('.');
}

/** A non-negative INTEGER's magnitude (big-endian, no sign byte), minimal as DER requires. */
export function readUnsigned(tlv: Tlv | undefined, what: string): Uint8Array {
  const bytes = expectTag(tlv, 0x02, what).value;
  if (bytes.length === 0) throw new DerError(`${what}: an empty INTEGER`);
  if (bytes[0]! & 0x80) throw new DerError(`${what}: a negative INTEGER`);
  if (bytes.length > 1 && bytes[0] === 0 && (bytes[1]! & 0x80) === 0) throw new DerError(`${what}: an INTEGER with a needless leading zero`);
  return bytes[0] === 0 && bytes.length > 1 ? bytes.subarray(1) : bytes;
}

/** A BIT STRING's bytes; only whole bytes (no unused bits) are meaningful for keys and signatures. */
export function readWholeBits(tlv: Tlv | undefined, what: string): Uint8Array {
  const bytes = expectTag(tlv, 0x03, what).value;
  if (bytes.length === 0 || bytes[0] !== 0) throw new DerError(`${what}: a BIT STRING with unused bits`);
  return bytes.subarray(1);
}

function readOne(bytes: Uint8Array, offset: number, what: string): Tlv {
  if (offset + 2 > bytes.length) throw new DerError(`${what}: truncated at byte ${offset}`);
  const tag = bytes[offset]!;
  if ((tag & 0x1f) === 0x1f) throw new DerError(`${what}: a multi-byte tag at byte ${offset}`);
  const first = bytes[offset + 1]!;
  let length = first;
  let header = 2;
  if (first & 0x80) {
    const count = first & 0x7f;
    if (count === 0) throw new DerError(`${what}: an indefinite length at byte ${offset} (BER, not DER)`);
    if (count > 4) throw new DerError(`${what}: a length of ${count} bytes at byte ${offset}`);
    if (offset + 2 + count > bytes.length) throw new DerError(`${what}: truncated at byte ${offset}`);
    if (bytes[offset + 2] === 0) throw new DerError(`${what}: a length with a leading zero byte at byte ${offset} (not minimal)`);
    length = 0;
    for (let i = 0; i < count; i++) length = length * 256 + bytes[offset + 2 + i]!;
    if (length < 0x80) throw new DerError(`${what}: a long-form length below 128 at byte ${offset} (not minimal)`);
    header += count;
  }
  const end = offset + header + length;
  if (end > bytes.length) throw new DerError(`${what}: truncated at byte ${offset}`);
  return { tag, value: bytes.subarray(offset + header, end), raw: bytes.subarray(offset, end) };
}

function hex(n: number): string {
  return n.toString(16).padStart(2, '0');
}
