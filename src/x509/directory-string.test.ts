import { describe, expect, test } from 'bun:test';
import { readDirectoryString } from './directory-string.ts';

const value = (tag: number, ...bytes: number[]) => ({ tag, content: Uint8Array.from(bytes), raw: new Uint8Array() });
const ascii = (tag: number, s: string) => value(tag, ...Buffer.from(s, 'latin1'));

describe('readDirectoryString (as Go reads name values)', () => {
  test('reads each of Go\'s string types', () => {
    expect(readDirectoryString(ascii(0x13, 'system:nodes'), 'O')).toBe('system:nodes');
    expect(readDirectoryString(ascii(0x13, 'a*b&c'), 'O')).toBe('a*b&c');
    expect(readDirectoryString(ascii(0x16, 'a_b'), 'O')).toBe('a_b');
    expect(readDirectoryString(ascii(0x12, '12 3'), 'O')).toBe('12 3');
    expect(readDirectoryString(ascii(0x14, 'system:nodes'), 'O')).toBe('system:nodes');
    expect(readDirectoryString(value(0x0c, ...Buffer.from('né')), 'O')).toBe('né');
    expect(readDirectoryString(value(0x1e, 0, 0x61, 0x00, 0xe9), 'O')).toBe('aé');
  });

  test('keeps a byte-order mark, as Go does', () => {
    expect(readDirectoryString(value(0x0c, 0xef, 0xbb, 0xbf, 0x61), 'CN')).toBe('\ufeffa');
  });

  const refused: [string, ReturnType<typeof value>, RegExp][] = [
    ['an OCTET STRING', ascii(0x04, 'x'), /OCTET STRING is not a string type/],
    ['a VisibleString (Go skips it)', ascii(0x1a, 'x'), /tag 0x1a/],
    ['a PrintableString with "_"', ascii(0x13, 'a_b'), /PrintableString cannot hold/],
    ['an IA5String above 0x7f', value(0x16, 0xe9), /IA5String cannot hold/],
    ['a NumericString with a letter', ascii(0x12, '12a'), /NumericString cannot hold/],
    // Go 1.26 reads Latin-1 ("nÃ©" for these bytes), older Go the raw bytes ("né"): two readings.
    ['a T61String above 0x7f', value(0x14, ...Buffer.from('né')), /T61String/],
    ['invalid UTF-8', value(0x0c, 0xc3), /not valid UTF-8/],
    ['a BMPString of odd length', value(0x1e, 0, 0x61, 0), /odd number/],
    ['a BMPString surrogate', value(0x1e, 0xd8, 0x00), /surrogate/],
    ['a BMPString noncharacter', value(0x1e, 0xff, 0xfe), /noncharacter/],
    ['a BMPString NUL terminator (Go strips it)', value(0x1e, 0, 0x61, 0, 0), /NUL/],
  ];
  for (const [what, v, message] of refused) {
    test(`refuses ${what}`, () => expect(() => readDirectoryString(v, 'CN')).toThrow(message));
  }
});
