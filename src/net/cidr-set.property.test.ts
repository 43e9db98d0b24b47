import { describe, expect, test } from 'bun:test';
import fc from 'fast-check';
import { CIDRSet } from './cidr-set.ts';
import { formatPrefix, parsePrefix, type Prefix } from './ip.ts';

/**
 * The CIDR set against a model (a Map from subnet text to owner) under random allocations,
 * occupations and releases: a subnet handed out is free in the model, inside the cluster CIDR
 * and of the node mask size; nothing is ever held by two owners; exhaustion comes exactly when
 * the model is full.
 */

const CLUSTERS: [string, number][] = [['10.244.0.0/28', 30], ['2001:db8:1::/124', 126], ['10.0.0.0/16', 18]];

type Op = { kind: 'allocate'; owner: number } | { kind: 'occupy'; owner: number; index: number } | { kind: 'release'; owner: number; index: number };

const op = fc.oneof(
  fc.record({ kind: fc.constant('allocate' as const), owner: fc.nat(5) }),
  fc.record({ kind: fc.constant('occupy' as const), owner: fc.nat(5), index: fc.nat(4) }),
  fc.record({ kind: fc.constant('release' as const), owner: fc.nat(5), index: fc.nat(4) }),
);

function subnetAt(cluster: Prefix, mask: number, index: number): Prefix {
  const width = cluster.family === 4 ? 32 : 128;
  const step = 1n << BigInt(width - mask);
  const first = cluster.first + BigInt(index) * step;
  return { family: cluster.family, first, last: first + step - 1n, bits: mask };
}

describe('CIDRSet', () => {
  test.each(CLUSTERS)('%s cut at /%d: never twice, exhausted exactly when full', (clusterText, mask) => {
    const cluster = parsePrefix(clusterText)!;
    fc.assert(fc.property(fc.array(op, { minLength: 10, maxLength: 60, size: 'max' }), (ops) => {
      const set = new CIDRSet(cluster, mask);
      const model = new Map<string, string>();
      for (const o of ops) {
        const owner = `owner-${o.owner}`;
        if (o.kind === 'allocate') {
          const got = set.allocateNext(owner);
          if (model.size === set.size) {
            expect(got).toBeUndefined();
            continue;
          }
          expect(got).toBeDefined();
          const text = formatPrefix(got!);
          expect(model.has(text)).toBe(false);
          expect(got!.bits).toBe(mask);
          expect(set.contains(got!)).toBe(true);
          model.set(text, owner);
        } else {
          const subnet = subnetAt(cluster, mask, o.index % set.size);
          const text = formatPrefix(subnet);
          if (o.kind === 'occupy') {
            const result = set.occupy(subnet, owner);
            const holder = model.get(text);
            if (holder !== undefined && holder !== owner) expect(result).toEqual({ ok: false, reason: 'conflict', owner: holder });
            else {
              expect(result).toEqual({ ok: true });
              model.set(text, owner);
            }
          } else {
            set.release(subnet, owner);
            if (model.get(text) === owner) model.delete(text);
          }
        }
        expect(set.used).toBe(model.size);
        for (const [text, holder] of model) expect(set.ownerOf(parsePrefix(text)!)).toBe(holder);
      }
    }), { numRuns: 300 });
  });

  test('a prefix outside the cluster CIDR, or of the other family, is refused', () => {
    const set = new CIDRSet(parsePrefix('10.244.0.0/16')!, 24);
    expect(set.occupy(parsePrefix('10.245.0.0/24')!, 'a')).toEqual({ ok: false, reason: 'outside' });
    expect(set.occupy(parsePrefix('10.0.0.0/8')!, 'a')).toEqual({ ok: false, reason: 'outside' });
    expect(set.occupy(parsePrefix('2001:db8::/64')!, 'a')).toEqual({ ok: false, reason: 'outside' });
    expect(set.used).toBe(0);
  });

  test('a wider prefix holds every subnet it covers; a narrower one the subnet around it', () => {
    const set = new CIDRSet(parsePrefix('10.244.0.0/16')!, 24);
    expect(set.occupy(parsePrefix('10.244.4.0/22')!, 'svc')).toEqual({ ok: true });
    expect(set.used).toBe(4);
    expect(set.occupy(parsePrefix('10.244.9.128/25')!, 'n')).toEqual({ ok: true });
    expect(set.ownerOf(parsePrefix('10.244.9.0/24')!)).toBe('n');
    expect(set.occupy(parsePrefix('10.244.6.0/24')!, 'x')).toEqual({ ok: false, reason: 'conflict', owner: 'svc' });
  });

  test('round robin: a released subnet is handed out again only after the others', () => {
    const set = new CIDRSet(parsePrefix('10.244.0.0/22')!, 24);
    const a = set.allocateNext('a')!;
    set.allocateNext('b');
    set.release(a, 'a');
    expect(formatPrefix(set.allocateNext('c')!)).toBe('10.244.2.0/24');
    expect(formatPrefix(set.allocateNext('d')!)).toBe('10.244.3.0/24');
    expect(formatPrefix(set.allocateNext('e')!)).toBe('10.244.0.0/24');
    expect(set.allocateNext('f')).toBeUndefined();
  });

  test('upstream limits: a mask shorter than the cluster CIDR, or more than 2^16 subnets, is refused', () => {
    expect(() => new CIDRSet(parsePrefix('10.244.0.0/16')!, 15)).toThrow('larger than the cluster CIDR');
    expect(() => new CIDRSet(parsePrefix('10.0.0.0/8')!, 25)).toThrow('more than 2^16 subnets');
    expect(() => new CIDRSet(parsePrefix('2001:db8::/48')!, 64)).not.toThrow();
  });
});
