import { describe, expect, test } from 'bun:test';
import { DerReader, TAG, inside, readBitString, readBoolean, readInteger, readOid, readOnly, readUnsigned, readWholeBits } from './der.ts';

const bytes = (...b: number[]) => Uint8Array.from(b);

describe('strict DER: one encoding or none', () => {
  test('reads a SEQUENCE of an INTEGER and an OID, each element with its raw bytes', () => {
    const seq = readOnly(bytes(0x30, 0x06, 0x02, 0x01, 0x05, 0x06, 0x01, 0x2a), TAG.sequence, 'x');
    const r = inside(seq, 'x');
    const n = r.read(TAG.integer);
    expect([...readUnsigned(n, 'n')]).toEqual([5]);
    expect([...n.raw]).toEqual([0x02, 0x01, 0x05]);
    expect(readOid(r.read(TAG.oid), 'oid')).toBe('1.2');
    r.end();
  });

  test('reads a long-form length when it is needed', () => {
    const content = new Uint8Array(200).fill(0x05);
    expect(readOnly(Uint8Array.from([0x04, 0x81, 200, ...content]), TAG.octetString, 'x').content.length).toBe(200);
  });

  test('INTEGER, BOOLEAN, OID, BIT STRING: their canonical forms', () => {
    expect(readInteger(readOnly(bytes(0x02, 0x01, 0xff), TAG.integer, 'x'), 'x')).toBe(-1n);
    expect(readInteger(readOnly(bytes(0x02, 0x02, 0x00, 0x80), TAG.integer, 'x'), 'x')).toBe(128n);
    expect([...readUnsigned(readOnly(bytes(0x02, 0x02, 0x00, 0x80), TAG.integer, 'x'), 'x')]).toEqual([0x80]);
    expect(readBoolean(readOnly(bytes(0x01, 0x01, 0xff), TAG.boolean, 'x'), 'x')).toBe(true);
    expect(readOid(readOnly(bytes(0x06, 0x03, 0x55, 0x04, 0x03), TAG.oid, 'x'), 'x')).toBe('2.5.4.3');
    expect(readOid(readOnly(bytes(0x06, 0x03, 0x88, 0x37, 0x01), TAG.oid, 'x'), 'x')).toBe('2.999.1');
    expect(readOid(readOnly(bytes(0x06, 0x06, 0x2a, 0x87, 0xff, 0xff, 0xff, 0x7f), TAG.oid, 'x'), 'x')).toBe('1.2.2147483647');
    expect(readBitString(readOnly(bytes(0x03, 0x02, 0x07, 0x80), TAG.bitString, 'x'), 'x')).toEqual({ bytes: bytes(0x80), unused: 7 });
  });

  const element = (...b: number[]) => readOnly(Uint8Array.from(b), b[0]!, 'x');
  const refused: [string, () => unknown, RegExp][] = [
    ['trailing bytes', () => readOnly(bytes(0x05, 0x00, 0x00), TAG.null, 'x'), /1 bytes after the element/],
    ['a field too many', () => {
      const r = inside(element(0x30, 0x04, 0x05, 0x00, 0x05, 0x00), 'x');
      r.read(TAG.null);
      r.end();
    }, /NULL after the last field/],
    ['a field missing', () => new DerReader(bytes(), 'x').read(TAG.integer, 'version'), /version: expected INTEGER, found the end/],
    ['another tag', () => readOnly(bytes(0x04, 0x00), TAG.utf8String, 'x'), /expected UTF8String, found OCTET STRING/],
    ['a long form for a short length', () => readOnly(bytes(0x04, 0x81, 0x01, 0x00), TAG.octetString, 'x'), /not minimal/],
    ['a length with a leading zero', () => readOnly(Uint8Array.from([0x04, 0x82, 0x00, 0x80, ...new Uint8Array(128)]), TAG.octetString, 'x'), /leading zero byte/],
    ['an indefinite length', () => readOnly(bytes(0x30, 0x80, 0x00, 0x00), TAG.sequence, 'x'), /indefinite/],
    ['a multi-byte tag', () => new DerReader(bytes(0x1f, 0x81, 0x00, 0x00), 'x').read(), /multi-byte tag/],
    ['a truncated element', () => readOnly(bytes(0x04, 0x05, 0x00), TAG.octetString, 'x'), /truncated/],
    ['the inside of a primitive', () => inside(element(0x04, 0x00), 'x'), /primitive/],
    ['an OID arc padded with 0x80', () => readOid(element(0x06, 0x03, 0x55, 0x80, 0x03), 'x'), /not minimal/],
    ['an OID arc above 2^31-1', () => readOid(element(0x06, 0x06, 0x2a, 0x88, 0x80, 0x80, 0x80, 0x00), 'x'), /above 2\^31-1/],
    ['an OID ending inside an arc', () => readOid(element(0x06, 0x02, 0x2a, 0x81), 'x'), /ending inside an arc/],
    ['an INTEGER with a needless zero', () => readUnsigned(element(0x02, 0x02, 0x00, 0x05), 'x'), /not minimally encoded/],
    ['an INTEGER with a needless 0xff', () => readInteger(element(0x02, 0x02, 0xff, 0x80), 'x'), /not minimally encoded/],
    ['a negative INTEGER where a magnitude is read', () => readUnsigned(element(0x02, 0x01, 0x80), 'x'), /negative/],
    ['a BOOLEAN other than 0x00 or 0xFF', () => readBoolean(element(0x01, 0x01, 0x01), 'x'), /0x00 or 0xFF/],
    ['BIT STRING padding bits set', () => readBitString(element(0x03, 0x02, 0x01, 0x01), 'x'), /padding bits/],
    ['unused bits where whole bytes are read', () => readWholeBits(element(0x03, 0x02, 0x01, 0x00), 'x'), /unused bits/],
  ];
  for (const [what, read, message] of refused) {
    test(`refuses ${what}`, () => expect(read).toThrow(message));
  }
});
