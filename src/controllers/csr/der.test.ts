import { describe, expect, test } from 'bun:test';
import { children, fields, readOid, readOnly, readUnsigned } from './der.ts';

const bytes = (...b: number[]) => Uint8Array.from(b);

describe('strict DER', () => {
  test('reads a SEQUENCE of an INTEGER and an OID', () => {
    const seq = readOnly(bytes(0x30, 0x06, 0x02, 0x01, 0x05, 0x06, 0x01, 0x2a), 'x');
    const [n, oid] = fields(seq, [2], 'x');
    expect([...readUnsigned(n, 'n')]).toEqual([5]);
    expect(readOid(oid, 'oid')).toBe('1.2');
  });

  test('reads a long-form length when it is needed', () => {
    const content = new Uint8Array(200).fill(0x05);
    expect(readOnly(Uint8Array.from([0x04, 0x81, 200, ...content]), 'x').value.length).toBe(200);
  });

  const refused: [string, () => unknown, RegExp][] = [
    ['trailing bytes', () => readOnly(bytes(0x05, 0x00, 0x00), 'x'), /1 bytes after the element/],
    ['a long form for a short length', () => readOnly(bytes(0x04, 0x81, 0x01, 0x00), 'x'), /not minimal/],
    ['a length with a leading zero', () => readOnly(Uint8Array.from([0x04, 0x82, 0x00, 0x80, ...new Uint8Array(128)]), 'x'), /leading zero byte/],
    ['an indefinite length', () => readOnly(bytes(0x30, 0x80, 0x00, 0x00), 'x'), /indefinite/],
    ['a multi-byte tag', () => readOnly(bytes(0x1f, 0x81, 0x00, 0x00), 'x'), /multi-byte tag/],
    ['a truncated element', () => readOnly(bytes(0x04, 0x05, 0x00), 'x'), /truncated/],
    ['children of a primitive', () => children(readOnly(bytes(0x04, 0x00), 'x'), 'x'), /primitive/],
    ['an OID arc padded with 0x80', () => readOid(readOnly(bytes(0x06, 0x03, 0x55, 0x80, 0x03), 'x'), 'x'), /not minimal/],
    ['an OID arc above 2^31-1', () => readOid(readOnly(bytes(0x06, 0x06, 0x2a, 0x88, 0x80, 0x80, 0x80, 0x00), 'x'), 'x'), /above 2\^31-1/],
    ['an INTEGER with a needless zero', () => readUnsigned(readOnly(bytes(0x02, 0x02, 0x00, 0x05), 'x'), 'x'), /needless leading zero/],
    ['a negative INTEGER', () => readUnsigned(readOnly(bytes(0x02, 0x01, 0x80), 'x'), 'x'), /negative/],
    ['a field too many', () => fields(readOnly(bytes(0x30, 0x04, 0x05, 0x00, 0x05, 0x00), 'x'), [1], 'x'), /2 fields, expected 1/],
  ];
  for (const [what, read, message] of refused) {
    test(`refuses ${what}`, () => expect(read).toThrow(message));
  }
});
