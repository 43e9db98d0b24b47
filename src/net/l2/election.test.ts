import { describe, expect, test } from 'bun:test';
import { electNode, rankNodes } from './election.ts';

const NODES = ['node-a', 'node-b', 'node-c'];
/** The first n addresses: 250 IPv4 ones, then IPv6. */
const addresses = (n: number) => Array.from({ length: n }, (_, i) => (i < 250 ? `198.51.100.${i}` : `2001:db8::${i.toString(16)}`));

function assignment(list: string[], nodes: string[]): Map<string, string | undefined> {
  return new Map(list.map((a) => [a, electNode(a, nodes)]));
}

describe('electNode', () => {
  test('is deterministic: the same winner whatever the order of the nodes, on every call', () => {
    for (const address of addresses(60)) {
      const winner = electNode(address, NODES);
      expect(electNode(address, [...NODES].reverse())).toBe(winner);
      expect(electNode(address, ['node-b', 'node-a', 'node-c', 'node-a'])).toBe(winner);
    }
  });

  test('agrees however the address is written', () => {
    for (let i = 1; i < 40; i++) {
      const hex = i.toString(16);
      expect(electNode(`2001:DB8:0:0::${hex.padStart(4, '0')}`, NODES)).toBe(electNode(`2001:db8::${hex}`, NODES));
    }
  });

  test('spreads addresses over the nodes', () => {
    const list = addresses(600);
    const counts = new Map<string, number>();
    for (const winner of assignment(list, NODES).values()) counts.set(winner!, (counts.get(winner!) ?? 0) + 1);
    expect([...counts.keys()].sort()).toEqual(NODES);
    // 200 each expected; a fixed input, so this is exact and repeatable, not a statistical gamble.
    for (const count of counts.values()) expect(count).toBeGreaterThan(150);
  });

  test('a node leaving moves only the addresses it held, each to its next node in rank', () => {
    const list = addresses(300);
    const before = assignment(list, NODES);
    const after = assignment(list, ['node-a', 'node-c']);
    let moved = 0;
    for (const address of list) {
      if (before.get(address) === 'node-b') {
        moved++;
        expect(after.get(address)).toBe(rankNodes(address, NODES)[1]!);
      } else {
        expect(after.get(address)).toBe(before.get(address));
      }
    }
    expect(moved).toBeGreaterThan(0);
  });

  test('a node joining takes addresses from the others and moves nothing else', () => {
    const list = addresses(300);
    const before = assignment(list, NODES);
    const after = assignment(list, [...NODES, 'node-d']);
    let taken = 0;
    for (const address of list) {
      if (after.get(address) === 'node-d') taken++;
      else expect(after.get(address)).toBe(before.get(address));
    }
    expect(taken).toBeGreaterThan(40);
  });

  test('no eligible node: nobody announces', () => {
    expect(electNode('198.51.100.7', [])).toBeUndefined();
  });
});
