import { describe, expect, test } from 'bun:test';
import { DerReader, TAG, readBitString, readBoolean, readInteger, readOid, readOnly } from './der-reader.ts';

const bytes = (...b: number[]) => Uint8Array.from(b);

describe('DerReader: one encoding or none', () => {
  test('reads a minimal element and its raw bytes', () => {
    const e = readOnly(bytes(0x04, 0x02, 0xaa, 0xbb), TAG.octetString, 'x');
    expect([...e.content]).toEqual([0xaa, 0xbb]);
    expect(e.raw.length).toBe(4);
  });

  test('refuses BER: long form for a short length, a leading zero length byte, indefinite length', () => {
    expect(() => readOnly(bytes(0x04, 0x81, 0x01, 0xaa), TAG.octetString, 'x')).toThrow('long form');
    expect(() => readOnly(bytes(0x04, 0x82, 0x00, 0x81, ...new Array(0x81).fill(0)), TAG.octetString, 'x')).toThrow('leading zero');
    expect(() => readOnly(bytes(0x30, 0x80, 0x00, 0x00), TAG.sequence, 'x')).toThrow('indefinite');
  });

  test('refuses trailing bytes, truncation, another tag, multi-byte tags', () => {
    expect(() => readOnly(bytes(0x05, 0x00, 0x00), TAG.null, 'x')).toThrow('after the last element');
    expect(() => readOnly(bytes(0x04, 0x03, 0xaa), TAG.octetString, 'x')).toThrow('past the end');
    expect(() => readOnly(bytes(0x04, 0x00), TAG.utf8String, 'x')).toThrow('expected utf8String');
    expect(() => new DerReader(bytes(0x1f, 0x22, 0x00), 'x').read()).toThrow('multi-byte tag');
  });

  test('INTEGER, BOOLEAN, OID, BIT STRING: minimal and canonical only', () => {
    expect(readInteger(readOnly(bytes(0x02, 0x01, 0xff), TAG.integer, 'x'), 'x')).toBe(-1n);
    expect(readInteger(readOnly(bytes(0x02, 0x02, 0x00, 0x80), TAG.integer, 'x'), 'x')).toBe(128n);
    expect(() => readInteger(readOnly(bytes(0x02, 0x02, 0x00, 0x7f), TAG.integer, 'x'), 'x')).toThrow('minimally');
    expect(() => readBoolean(readOnly(bytes(0x01, 0x01, 0x01), TAG.boolean, 'x'), 'x')).toThrow('0x00 or 0xFF');
    expect(readOid(readOnly(bytes(0x06, 0x03, 0x55, 0x04, 0x03), TAG.oid, 'x'), 'x')).toBe('2.5.4.3');
    expect(readOid(readOnly(bytes(0x06, 0x03, 0x88, 0x37, 0x01), TAG.oid, 'x'), 'x')).toBe('2.999.1');
    expect(() => readOid(readOnly(bytes(0x06, 0x04, 0x55, 0x04, 0x80, 0x03), TAG.oid, 'x'), 'x')).toThrow('minimally');
    expect(() => readBitString(readOnly(bytes(0x03, 0x02, 0x01, 0x01), TAG.bitString, 'x'), 'x')).toThrow('padding bits');
  });
});
