/**
 * The strict DER reader (ITU-T X.690 section 10) both certificate readers build on: the client
 * certificates (src/server/auth/x509) and the kubelet-serving CSR approver (src/controllers/csr).
 * One encoding per value or a DerError naming what was expected where: one-byte tags, definite
 * lengths in their shortest form, every element ending exactly where its parent ends, minimal
 * INTEGERs, BOOLEAN as 0x00/0xFF, BIT STRINGs with zero padding, OBJECT IDENTIFIERs without
 * padding and with arcs Go's readers take (at most 2^31-1). Whatever is read here has one reading,
 * so whoever reads the same bytes after us (the API server, the signer, Go's TLS) cannot find
 * another element, another length or another OID in them. Refused although Go reads it: tags of
 * more than one byte (no certificate or request field uses them).
 */

export class DerError extends Error {}

export interface Element {
  tag: number;
  /** The content octets. */
  content: Uint8Array;
  /** The whole element: tag, length and content (what Go keeps as Raw*). */
  raw: Uint8Array;
}

export const TAG = {
  boolean: 0x01,
  integer: 0x02,
  bitString: 0x03,
  octetString: 0x04,
  null: 0x05,
  oid: 0x06,
  utf8String: 0x0c,
  numericString: 0x12,
  printableString: 0x13,
  t61String: 0x14,
  ia5String: 0x16,
  utcTime: 0x17,
  generalizedTime: 0x18,
  bmpString: 0x1e,
  sequence: 0x30,
  set: 0x31,
} as const;

const CONSTRUCTED = 0x20;

/** Reads elements one after another from `bytes`; `what` names the place in errors. */
export class DerReader {
  private offset = 0;
  constructor(private readonly bytes: Uint8Array, private readonly what: string) {}

  get empty(): boolean {
    return this.offset >= this.bytes.length;
  }

  peekTag(): number | undefined {
    return this.empty ? undefined : this.bytes[this.offset];
  }

  /** The next element, of `tag` when one is given; `what` names it in errors (the reader's place unless told). */
  read(tag?: number, what = this.what): Element {
    const start = this.offset;
    const b = this.bytes;
    if (start >= b.length) throw new DerError(`${what}: expected ${tagName(tag)}, found the end`);
    const t = b[start]!;
    if ((t & 0x1f) === 0x1f) throw new DerError(`${what}: a multi-byte tag at byte ${start}`);
    if (tag !== undefined && t !== tag) throw new DerError(`${what}: expected ${tagName(tag)}, found ${tagName(t)}`);
    let p = start + 1;
    if (p >= b.length) throw new DerError(`${what}: truncated at byte ${start}`);
    let length = b[p++]!;
    if (length & 0x80) {
      const n = length & 0x7f;
      if (n === 0) throw new DerError(`${what}: an indefinite length at byte ${start} (BER, not DER)`);
      if (n > 4) throw new DerError(`${what}: a length of ${n} bytes at byte ${start}`);
      if (p + n > b.length) throw new DerError(`${what}: truncated at byte ${start}`);
      if (b[p] === 0) throw new DerError(`${what}: a length with a leading zero byte at byte ${start} (not minimal)`);
      length = 0;
      for (let i = 0; i < n; i++) length = length * 256 + b[p++]!;
      if (length < 0x80) throw new DerError(`${what}: a long-form length below 128 at byte ${start} (not minimal)`);
    }
    if (p + length > b.length) throw new DerError(`${what}: truncated at byte ${start} (content runs past the end)`);
    this.offset = p + length;
    return { tag: t, content: b.subarray(p, p + length), raw: b.subarray(start, p + length) };
  }

  /** The next element if its tag is `tag`, else undefined. */
  optional(tag: number, what = this.what): Element | undefined {
    return this.peekTag() === tag ? this.read(tag, what) : undefined;
  }

  /** A reader over the content of the next element (a SEQUENCE unless told). */
  enter(tag: number = TAG.sequence, what = this.what): DerReader {
    return inside(this.read(tag, what), what);
  }

  /** Nothing more: a field after the last one a type has is refused (a reader that ignores the rest reads another value). */
  end(): void {
    if (!this.empty) throw new DerError(`${this.what}: ${tagName(this.bytes[this.offset])} after the last field, at byte ${this.offset}`);
  }
}

/** A reader over the content of a constructed element. */
export function inside(e: Element, what: string): DerReader {
  if (!(e.tag & CONSTRUCTED)) throw new DerError(`${what}: a primitive element where a constructed one is expected`);
  return new DerReader(e.content, what);
}

/** One whole element of `tag` and nothing after it. */
export function readOnly(bytes: Uint8Array, tag: number, what: string): Element {
  const r = new DerReader(bytes, what);
  const e = r.read(tag);
  if (!r.empty) throw new DerError(`${what}: ${bytes.length - e.raw.length} bytes after the element`);
  return e;
}

export function readBoolean(e: Element, what: string): boolean {
  if (e.content.length !== 1 || (e.content[0] !== 0 && e.content[0] !== 0xff)) throw new DerError(`${what}: BOOLEAN is not 0x00 or 0xFF`);
  return e.content[0] === 0xff;
}

/** An INTEGER as a bigint, minimal encoding required (as Go's checkInteger). */
export function readInteger(e: Element, what: string): bigint {
  const c = minimalInteger(e, what);
  let n = 0n;
  for (const byte of c) n = (n << 8n) | BigInt(byte);
  if (c[0]! & 0x80) n -= 1n << BigInt(8 * c.length);
  return n;
}

/** A non-negative INTEGER's magnitude (big-endian, no sign byte), minimal as DER requires. */
export function readUnsigned(e: Element, what: string): Uint8Array {
  const c = minimalInteger(e, what);
  if (c[0]! & 0x80) throw new DerError(`${what}: a negative INTEGER`);
  return c[0] === 0 && c.length > 1 ? c.subarray(1) : c;
}

function minimalInteger(e: Element, what: string): Uint8Array {
  const c = e.content;
  if (c.length === 0) throw new DerError(`${what}: an empty INTEGER`);
  if (c.length > 1 && ((c[0] === 0 && !(c[1]! & 0x80)) || (c[0] === 0xff && c[1]! & 0x80))) throw new DerError(`${what}: an INTEGER not minimally encoded`);
  return c;
}

/** An OBJECT IDENTIFIER in dotted form; arcs must be minimal and fit 31 bits (as Go's readers). */
export function readOid(e: Element, what: string): string {
  const c = e.content;
  if (c.length === 0) throw new DerError(`${what}: an empty OBJECT IDENTIFIER`);
  const arcs: number[] = [];
  let value = 0;
  let started = false;
  for (let i = 0; i < c.length; i++) {
    const byte = c[i]!;
    if (!started && byte === 0x80) throw new DerError(`${what}: an OBJECT IDENTIFIER arc with a leading 0x80 (not minimal)`);
    started = true;
    value = value * 128 + (byte & 0x7f);
    if (value > 0x7fffffff) throw new DerError(`${what}: an OBJECT IDENTIFIER arc above 2^31-1`);
    if (!(byte & 0x80)) {
      arcs.push(value);
      value = 0;
      started = false;
    } else if (i === c.length - 1) throw new DerError(`${what}: an OBJECT IDENTIFIER ending inside an arc`);
  }
  const first = arcs[0]!;
  const head = first < 80 ? [Math.floor(first / 40), first % 40] : [2, first - 80];
  return [...head, ...arcs.slice(1)].join('.');
}

/** A BIT STRING's bytes and unused-bit count; the unused bits must be zero (DER). */
export function readBitString(e: Element, what: string): { bytes: Uint8Array; unused: number } {
  const c = e.content;
  if (c.length === 0) throw new DerError(`${what}: an empty BIT STRING`);
  const unused = c[0]!;
  if (unused > 7 || (c.length === 1 && unused !== 0)) throw new DerError(`${what}: bad BIT STRING padding`);
  if (unused && (c[c.length - 1]! & ((1 << unused) - 1))) throw new DerError(`${what}: BIT STRING padding bits not zero`);
  return { bytes: c.subarray(1), unused };
}

/** A BIT STRING of whole bytes, as keys and signatures are. */
export function readWholeBits(e: Element, what: string): Uint8Array {
  const bits = readBitString(e, what);
  if (bits.unused !== 0) throw new DerError(`${what}: a BIT STRING with unused bits (not whole bytes)`);
  return bits.bytes;
}

export function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

const TAG_NAMES: Record<number, string> = {
  [TAG.boolean]: 'BOOLEAN', [TAG.integer]: 'INTEGER', [TAG.bitString]: 'BIT STRING', [TAG.octetString]: 'OCTET STRING',
  [TAG.null]: 'NULL', [TAG.oid]: 'OBJECT IDENTIFIER', [TAG.utf8String]: 'UTF8String', [TAG.numericString]: 'NumericString',
  [TAG.printableString]: 'PrintableString', [TAG.t61String]: 'T61String', [TAG.ia5String]: 'IA5String', [TAG.utcTime]: 'UTCTime',
  [TAG.generalizedTime]: 'GeneralizedTime', [TAG.bmpString]: 'BMPString', [TAG.sequence]: 'SEQUENCE', [TAG.set]: 'SET',
};

/** A tag as it reads in an error: its ASN.1 name, else its number. */
export function tagName(tag: number | undefined): string {
  if (tag === undefined) return 'an element';
  return TAG_NAMES[tag] ?? `tag 0x${tag.toString(16).padStart(2, '0')}`;
}
