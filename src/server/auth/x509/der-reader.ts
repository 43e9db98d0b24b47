/**
 * A strict DER reader (ITU-T X.690) for the client-certificate checks: one-byte tags only,
 * definite minimal lengths, minimal INTEGERs and OIDs, BOOLEAN as 0x00/0xFF. Anything else throws
 * a DerError naming what was expected where, so a certificate has one reading or none.
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

  /** The next element, of `tag` when one is given. */
  read(tag?: number): Element {
    const start = this.offset;
    const b = this.bytes;
    if (start >= b.length) throw new DerError(`${this.what}: expected ${tagName(tag)}, found the end`);
    const t = b[start]!;
    if ((t & 0x1f) === 0x1f) throw new DerError(`${this.what}: multi-byte tag`);
    if (tag !== undefined && t !== tag) throw new DerError(`${this.what}: expected ${tagName(tag)}, found tag 0x${t.toString(16)}`);
    let p = start + 1;
    if (p >= b.length) throw new DerError(`${this.what}: truncated length`);
    let length = b[p++]!;
    if (length & 0x80) {
      const n = length & 0x7f;
      if (n === 0) throw new DerError(`${this.what}: indefinite length`);
      if (n > 4) throw new DerError(`${this.what}: length too large`);
      if (p + n > b.length) throw new DerError(`${this.what}: truncated length`);
      if (b[p] === 0) throw new DerError(`${this.what}: length with a leading zero byte`);
      length = 0;
      for (let i = 0; i < n; i++) length = length * 256 + b[p++]!;
      if (length < 0x80) throw new DerError(`${this.what}: long form for a short length`);
    }
    if (p + length > b.length) throw new DerError(`${this.what}: content runs past the end`);
    this.offset = p + length;
    return { tag: t, content: b.subarray(p, p + length), raw: b.subarray(start, p + length) };
  }

  /** The next element if its tag is `tag`, else undefined. */
  optional(tag: number): Element | undefined {
    return this.peekTag() === tag ? this.read(tag) : undefined;
  }

  /** A reader over the content of the next element (a SEQUENCE unless told). */
  enter(tag: number = TAG.sequence, what = this.what): DerReader {
    return new DerReader(this.read(tag).content, what);
  }

  end(): void {
    if (!this.empty) throw new DerError(`${this.what}: unexpected data after the last element`);
  }
}

/** One whole element and nothing after it. */
export function readOnly(bytes: Uint8Array, tag: number, what: string): Element {
  const r = new DerReader(bytes, what);
  const e = r.read(tag);
  r.end();
  return e;
}

export function readBoolean(e: Element, what: string): boolean {
  if (e.content.length !== 1 || (e.content[0] !== 0 && e.content[0] !== 0xff)) throw new DerError(`${what}: BOOLEAN is not 0x00 or 0xFF`);
  return e.content[0] === 0xff;
}

/** An INTEGER as a bigint, minimal encoding required. */
export function readInteger(e: Element, what: string): bigint {
  const c = e.content;
  if (c.length === 0) throw new DerError(`${what}: empty INTEGER`);
  if (c.length > 1 && ((c[0] === 0 && !(c[1]! & 0x80)) || (c[0] === 0xff && c[1]! & 0x80))) throw new DerError(`${what}: INTEGER not minimally encoded`);
  let n = 0n;
  for (const byte of c) n = (n << 8n) | BigInt(byte);
  if (c[0]! & 0x80) n -= 1n << BigInt(8 * c.length);
  return n;
}

/** An OBJECT IDENTIFIER in dotted form; arcs must be minimal and fit 31 bits (as Go's asn1 reader). */
export function readOid(e: Element, what: string): string {
  const c = e.content;
  if (c.length === 0) throw new DerError(`${what}: empty OBJECT IDENTIFIER`);
  const arcs: number[] = [];
  let value = 0;
  let started = false;
  for (let i = 0; i < c.length; i++) {
    const byte = c[i]!;
    if (!started && byte === 0x80) throw new DerError(`${what}: OBJECT IDENTIFIER arc not minimally encoded`);
    started = true;
    value = value * 128 + (byte & 0x7f);
    if (value > 0x7fffffff) throw new DerError(`${what}: OBJECT IDENTIFIER arc too large`);
    if (!(byte & 0x80)) {
      arcs.push(value);
      value = 0;
      started = false;
    } else if (i === c.length - 1) throw new DerError(`${what}: OBJECT IDENTIFIER truncated`);
  }
  const first = arcs[0]!;
  const head = first < 80 ? [Math.floor(first / 40), first % 40] : [2, first - 80];
  return [...head, ...arcs.slice(1)].join('.');
}

/** A BIT STRING's bytes and unused-bit count; the unused bits must be zero (DER). */
export function readBitString(e: Element, what: string): { bytes: Uint8Array; unused: number } {
  const c = e.content;
  if (c.length === 0) throw new DerError(`${what}: empty BIT STRING`);
  const unused = c[0]!;
  if (unused > 7 || (c.length === 1 && unused !== 0)) throw new DerError(`${what}: bad BIT STRING padding`);
  if (unused && (c[c.length - 1]! & ((1 << unused) - 1))) throw new DerError(`${what}: BIT STRING padding bits not zero`);
  return { bytes: c.subarray(1), unused };
}

export function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

function tagName(tag: number | undefined): string {
  if (tag === undefined) return 'an element';
  const name = Object.entries(TAG).find(([, t]) => t === tag)?.[0];
  return name ?? `tag 0x${tag.toString(16)}`;
}
