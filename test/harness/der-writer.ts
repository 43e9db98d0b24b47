/**
 * A small DER writer and a lenient DER tree for crafting certificate requests in tests: the writer
 * makes exact bytes (also wrong ones on purpose: a long-form length, a padded OID arc), the tree
 * lets a fuzzer cut, copy, retag and re-encode elements of a valid request.
 */

export function concat(...parts: Uint8Array[]): Uint8Array {
  return new Uint8Array(Buffer.concat(parts));
}

/** The length octets: minimal unless `longForm` asks for a needless long form (non-DER). */
export function lengthBytes(length: number, longForm = false): Uint8Array {
  if (length < 0x80 && !longForm) return Uint8Array.of(length);
  const bytes: number[] = [];
  for (let n = length; n > 0; n = Math.floor(n / 256)) bytes.unshift(n & 0xff);
  if (bytes.length === 0) bytes.push(0);
  return Uint8Array.of(0x80 | bytes.length, ...bytes);
}

export function tlv(tag: number, ...contents: Uint8Array[]): Uint8Array {
  const value = concat(...contents);
  return concat(Uint8Array.of(tag), lengthBytes(value.length), value);
}

export const seq = (...items: Uint8Array[]) => tlv(0x30, ...items);
export const set = (...items: Uint8Array[]) => tlv(0x31, ...items);
export const octets = (bytes: Uint8Array) => tlv(0x04, bytes);
export const bits = (bytes: Uint8Array) => tlv(0x03, Uint8Array.of(0), bytes);
export const nul = () => Uint8Array.of(0x05, 0x00);
export const bool = (value: boolean) => Uint8Array.of(0x01, 0x01, value ? 0xff : 0x00);
export const text = (tag: number, s: string) => tlv(tag, new TextEncoder().encode(s));
export const utf8 = (s: string) => text(0x0c, s);
export const printable = (s: string) => text(0x13, s);
export const ia5 = (s: string) => text(0x16, s);
export const bmp = (s: string) => tlv(0x1e, Uint8Array.from([...s].flatMap((c) => [c.charCodeAt(0) >> 8, c.charCodeAt(0) & 0xff])));

/** An INTEGER of a non-negative value, minimal. */
export function int(value: number | bigint): Uint8Array {
  let hex = BigInt(value).toString(16);
  if (hex.length % 2) hex = `0${hex}`;
  const bytes = Buffer.from(hex, 'hex');
  return tlv(0x02, bytes[0]! & 0x80 ? concat(Uint8Array.of(0), bytes) : bytes);
}

/** An OBJECT IDENTIFIER; `padArc` pads that arc with a leading 0x80 (non-minimal). */
export function oid(dotted: string, padArc?: number): Uint8Array {
  const arcs = dotted.split('.').map(Number);
  const values = [arcs[0]! * 40 + arcs[1]!, ...arcs.slice(2)];
  const bytes: number[] = [];
  values.forEach((value, i) => {
    const groups: number[] = [];
    for (let v = value; ; v = Math.floor(v / 128)) {
      groups.unshift(v & 0x7f);
      if (v < 128) break;
    }
    if (i === padArc) groups.unshift(0);
    bytes.push(...groups.map((g, j) => (j < groups.length - 1 ? g | 0x80 : g)));
  });
  return tlv(0x06, Uint8Array.from(bytes));
}

export function pem(der: Uint8Array, type = 'CERTIFICATE REQUEST'): string {
  const b64 = Buffer.from(der).toString('base64').replace(/.{64}/g, '$&\n').replace(/\n$/, '');
  return `-----BEGIN ${type}-----\n${b64}\n-----END ${type}-----\n`;
}

/** A DER element as a tree: constructed elements (and OCTET STRINGs that hold DER) have children. */
export interface DerNode {
  tag: number;
  value?: Uint8Array;
  children?: DerNode[];
  /** Encode this node's length in a needless long form. */
  longLength?: boolean;
}

/** Parses leniently: whatever is not a whole element sequence stays a leaf. */
export function parseTree(bytes: Uint8Array): DerNode[] | undefined {
  const out: DerNode[] = [];
  for (let i = 0; i < bytes.length;) {
    if (i + 2 > bytes.length) return undefined;
    const tag = bytes[i]!;
    let length = bytes[i + 1]!;
    let header = 2;
    if (length & 0x80) {
      const count = length & 0x7f;
      if (count === 0 || count > 3 || i + 2 + count > bytes.length) return undefined;
      length = 0;
      for (let j = 0; j < count; j++) length = length * 256 + bytes[i + 2 + j]!;
      header += count;
    }
    if (i + header + length > bytes.length || (tag & 0x1f) === 0x1f) return undefined;
    const value = bytes.subarray(i + header, i + header + length);
    const inner = (tag & 0x20) || (tag === 0x04 && value.length > 0) ? parseTree(value) : undefined;
    out.push(inner && (tag & 0x20 || inner.length > 0) ? { tag, children: inner } : { tag, value });
    i += header + length;
  }
  return out;
}

export function serialize(node: DerNode): Uint8Array {
  const value = node.children ? concat(...node.children.map(serialize)) : node.value ?? new Uint8Array();
  return concat(Uint8Array.of(node.tag), lengthBytes(value.length, node.longLength), value);
}
