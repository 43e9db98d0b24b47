import { describe, expect, test } from 'bun:test';
import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { randomBelow, randomHex, sha256Hex } from './digest.ts';

describe('sha256Hex', () => {
  test("is node:crypto's SHA-256 hex digest of the UTF-8 text, for any text", () => {
    fc.assert(fc.property(fc.string({ unit: 'binary' }), (text) => {
      expect(sha256Hex(text)).toBe(createHash('sha256').update(text).digest('hex'));
    }));
    expect(sha256Hex('')).toBe('e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
  });
});

describe('randomHex', () => {
  test('gives 2 lowercase hex characters a byte, different each call', () => {
    expect(randomHex(4)).toMatch(/^[0-9a-f]{8}$/);
    expect(randomHex(0)).toBe('');
    const seen = new Set(Array.from({ length: 64 }, () => randomHex(8)));
    expect(seen.size).toBe(64);
  });
});

describe('randomBelow', () => {
  test('stays in [0, max) and reaches both ends of a small range', () => {
    const seen = new Set<number>();
    for (let i = 0; i < 2000; i++) {
      const v = randomBelow(5);
      expect(Number.isInteger(v) && v >= 0 && v < 5).toBe(true);
      seen.add(v);
    }
    expect([...seen].sort()).toEqual([0, 1, 2, 3, 4]);
    expect(randomBelow(1)).toBe(0);
    expect(randomBelow(2 ** 32)).toBeLessThan(2 ** 32);
  });

  test('refuses what is not an integer in 1..2^32', () => {
    for (const bad of [0, -1, 1.5, 2 ** 32 + 1, Number.NaN]) expect(() => randomBelow(bad)).toThrow(/randomBelow/);
  });
});
