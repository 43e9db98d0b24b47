import { describe, expect, test } from 'bun:test';
import { parseAnnouncements } from './routes.ts';

describe('the speaker reuses what it parsed', () => {
  test('an unchanged announcement is the same route; a changed one is parsed again; a duplicate is still refused', () => {
    const reuse = new Map();
    const first = parseAnnouncements([{ prefix: '203.0.113.1/32', nextHops: ['198.51.100.11'] }, { prefix: '203.0.113.2/32', nextHops: ['198.51.100.12'] }], reuse);
    const second = parseAnnouncements([{ prefix: '203.0.113.1/32', nextHops: ['198.51.100.11'] }, { prefix: '203.0.113.2/32', nextHops: ['198.51.100.13'] }], reuse);
    expect(second[0]).toBe(first[0]!);
    expect(second[1]).not.toBe(first[1]!);
    expect(second[1]!.nextHops.map((h) => h.value)).toEqual([0xc633640dn]);
    expect(() => parseAnnouncements([{ prefix: '203.0.113.1/32', nextHops: ['198.51.100.11'] }, { prefix: '203.0.113.1/32', nextHops: ['198.51.100.11'] }], reuse)).toThrow(
      'announcements[1].prefix: 203.0.113.1/32 is already announced by announcements[0]',
    );
    // A refused table leaves the reuse map as the last good one.
    expect([...reuse.values()]).toEqual(second);
  });
});
