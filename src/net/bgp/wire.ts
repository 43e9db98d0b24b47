import { BgpError } from './errors.ts';

/**
 * Bounds-checked big-endian reading of a received message: every read past the end throws the
 * BgpError the caller chose for this part of the message (a short OPEN and a short attribute
 * have different NOTIFICATIONs), never a RangeError.
 */
export class Reader {
  private offset: number;
  private readonly view: DataView;

  constructor(
    private readonly bytes: Uint8Array,
    private readonly onShort: (what: string) => BgpError,
    start = 0,
    private readonly end = bytes.length,
  ) {
    this.offset = start;
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  get remaining(): number {
    return this.end - this.offset;
  }

  get position(): number {
    return this.offset;
  }

  private need(n: number, what: string): void {
    if (n > this.remaining) throw this.onShort(`${what}: needs ${n} bytes, ${this.remaining} left`);
  }

  u8(what: string): number {
    this.need(1, what);
    return this.view.getUint8(this.offset++);
  }

  u16(what: string): number {
    this.need(2, what);
    const v = this.view.getUint16(this.offset);
    this.offset += 2;
    return v;
  }

  u32(what: string): number {
    this.need(4, what);
    const v = this.view.getUint32(this.offset);
    this.offset += 4;
    return v;
  }

  bytes_(n: number, what: string): Uint8Array {
    this.need(n, what);
    const out = this.bytes.subarray(this.offset, this.offset + n);
    this.offset += n;
    return out;
  }

  /** A reader over the next n bytes, which this reader skips. */
  sub(n: number, what: string, onShort = this.onShort): Reader {
    this.need(n, what);
    const r = new Reader(this.bytes, onShort, this.offset, this.offset + n);
    this.offset += n;
    return r;
  }
}

/** Growing big-endian writer for building messages. */
export class Writer {
  private buf = new Uint8Array(256);
  private view = new DataView(this.buf.buffer);
  length = 0;

  private ensure(n: number): void {
    if (this.length + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.length + n) size *= 2;
    const next = new Uint8Array(size);
    next.set(this.buf.subarray(0, this.length));
    this.buf = next;
    this.view = new DataView(next.buffer);
  }

  u8(v: number): this {
    this.ensure(1);
    this.view.setUint8(this.length++, v);
    return this;
  }

  u16(v: number): this {
    this.ensure(2);
    this.view.setUint16(this.length, v);
    this.length += 2;
    return this;
  }

  u32(v: number): this {
    this.ensure(4);
    this.view.setUint32(this.length, v >>> 0);
    this.length += 4;
    return this;
  }

  bytes(b: Uint8Array): this {
    this.ensure(b.length);
    this.buf.set(b, this.length);
    this.length += b.length;
    return this;
  }

  /** Writes a placeholder u16 and returns a function that fills it with the bytes written since. */
  lengthU16(): () => void {
    const at = this.length;
    this.u16(0);
    return () => this.view.setUint16(at, this.length - at - 2);
  }

  /** Overwrites a u16 already written at `at`. */
  setU16(at: number, v: number): void {
    this.view.setUint16(at, v);
  }

  finish(): Uint8Array {
    return this.buf.slice(0, this.length);
  }
}
