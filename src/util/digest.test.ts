import { describe, expect, test } from 'bun:test';
import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { randomHex, sha256Hex } from './digest.ts';

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
