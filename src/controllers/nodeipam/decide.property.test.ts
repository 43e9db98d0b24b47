import { describe, expect, test } from 'bun:test';
import fc from 'fast-check';
import { formatPrefix, parsePrefix, type Prefix } from '../../net/ip.ts';
import { nodeOwner, type Allocations } from './allocations.ts';
import { decide, type NodeRequest } from './decide.ts';
import { rebuildAllocations } from './rebuild.ts';
import type { NodeIPAMOptions } from './options.ts';

/**
 * The allocator in a model world: Nodes (the API server's, podCIDRs written once), the
 * CloudAllocator's record (a ConfigMap: written before the node, as the controller does), and the
 * leader's memory, which a leader change throws away and rebuilds from the first two. Random runs
 * of registrations (a machine under a new or old node name), syncs, deletions, leader changes
 * and a leader dying between its two writes. Held after every step:
 * - no two live Nodes' podCIDRs overlap, nor one the service range; none outside the cluster CIDRs;
 * - (CloudAllocator) no two machines' records overlap, and every Node of a machine gets the same
 *   CIDRs, ever: its pin when it has a valid one, else the ones its machine got first.
 */

const V4_ONLY: Omit<NodeIPAMOptions, 'allocatorType' | 'recordNamespace' | 'recordName'> = {
  clusterCIDRs: [parsePrefix('10.244.0.0/28')!],
  maskSizes: [30],
  serviceCIDRs: [parsePrefix('10.244.0.12/30')!],
};
const DUAL: typeof V4_ONLY = {
  clusterCIDRs: [parsePrefix('10.244.0.0/28')!, parsePrefix('2001:db8::/125')!],
  maskSizes: [30, 126],
  serviceCIDRs: [],
};
const NODE_NAMES = ['a', 'b', 'c', 'd', 'e'];
const MACHINES = 5;
/** Pins drawn from: valid ones, one overlapping the service range, one outside, one of the wrong size. */
const PIN_CHOICES = [['10.244.0.4/30', '2001:db8::4/126'], ['10.244.0.8/30', '2001:db8::/126'], ['10.244.0.12/30'], ['10.245.0.0/30'], ['10.244.0.0/29'], ['10.244.0.4/30']];

type Op =
  | { kind: 'register'; machine: number; name: number }
  | { kind: 'sync'; name: number; dieBetweenWrites: boolean }
  | { kind: 'delete'; name: number }
  | { kind: 'leader' };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ kind: fc.constant('register' as const), machine: fc.nat(MACHINES - 1), name: fc.nat(NODE_NAMES.length - 1) }),
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('sync' as const), name: fc.nat(NODE_NAMES.length - 1), dieBetweenWrites: fc.boolean() }) },
  fc.record({ kind: fc.constant('delete' as const), name: fc.nat(NODE_NAMES.length - 1) }),
  fc.record({ kind: fc.constant('leader' as const) }),
);

interface World {
  nodes: Map<string, { machine: number; podCIDRs: string[] }>;
  record: Map<string, string[]>;
  state: Allocations;
  /** What each machine's Nodes got first (the test's memory, not the controller's). */
  firstGot: Map<number, string>;
}

const machineID = (m: number) => `static://m${m}`;

function overlap(a: Prefix, b: Prefix): boolean {
  return a.family === b.family && a.first <= b.last && b.first <= a.last;
}

function run(options: typeof V4_ONLY, cloud: boolean, pins: (number | undefined)[], ops: Op[]): void {
  const owner = (name: string, machine: number) => (cloud ? machineID(machine) : nodeOwner(name));
  const requests = (w: World): NodeRequest[] => [...w.nodes].map(([name, n]) => ({ node: name, podCIDRs: n.podCIDRs, owner: owner(name, n.machine) }));
  const world: World = { nodes: new Map(), record: new Map(), state: rebuildAllocations(options, new Map(), []).state, firstGot: new Map() };
  for (const op of ops) {
    const name = 'name' in op ? NODE_NAMES[op.name]! : '';
    if (op.kind === 'register') {
      if (!world.nodes.has(name)) world.nodes.set(name, { machine: op.machine, podCIDRs: [] });
    } else if (op.kind === 'delete') {
      const node = world.nodes.get(name);
      world.nodes.delete(name);
      if (node && !cloud) world.state.releaseAll(nodeOwner(name));
    } else if (op.kind === 'leader') {
      world.state = rebuildAllocations(options, cloud ? world.record : new Map(), requests(world)).state;
    } else {
      const node = world.nodes.get(name);
      if (!node) continue;
      const o = owner(name, node.machine);
      const pin = cloud && pins[node.machine] !== undefined ? PIN_CHOICES[pins[node.machine]!] : undefined;
      const sharedWith = cloud ? [...world.nodes].find(([other, n]) => other !== name && n.machine === node.machine && n.podCIDRs.length > 0)?.[0] : undefined;
      const decision = decide(world.state, { node: name, podCIDRs: node.podCIDRs, owner: o, pin, sharedWith });
      if (decision.kind === 'refuse') continue;
      if (cloud && decision.ownerChanged) world.record.set(o, world.state.held(o).map(formatPrefix));
      if (decision.kind === 'assign' && !op.dieBetweenWrites) {
        expect(node.podCIDRs).toEqual([]); // written once
        node.podCIDRs = decision.cidrs.map(formatPrefix);
      }
      if (op.dieBetweenWrites) world.state = rebuildAllocations(options, cloud ? world.record : new Map(), requests(world)).state;
    }
    check(world, options, cloud, pins);
  }
}

function check(world: World, options: typeof V4_ONLY, cloud: boolean, pins: (number | undefined)[]): void {
  const live = [...world.nodes].flatMap(([name, n]) => n.podCIDRs.map((c) => ({ name, prefix: parsePrefix(c)! })));
  for (let i = 0; i < live.length; i++) {
    const a = live[i]!;
    expect(options.clusterCIDRs.some((c) => a.prefix.first >= c.first && a.prefix.last <= c.last)).toBe(true);
    for (const s of options.serviceCIDRs) expect(overlap(a.prefix, s)).toBe(false);
    for (let j = i + 1; j < live.length; j++) {
      const b = live[j]!;
      if (a.name !== b.name) expect(overlap(a.prefix, b.prefix), `${a.name} and ${b.name} both have ${formatPrefix(a.prefix)}`).toBe(false);
    }
  }
  if (!cloud) return;
  const recorded = [...world.record].flatMap(([owner, cidrs]) => cidrs.map((c) => ({ owner, prefix: parsePrefix(c)! })));
  for (let i = 0; i < recorded.length; i++) {
    for (let j = i + 1; j < recorded.length; j++) {
      if (recorded[i]!.owner !== recorded[j]!.owner) expect(overlap(recorded[i]!.prefix, recorded[j]!.prefix)).toBe(false);
    }
  }
  for (const [, n] of world.nodes) {
    if (n.podCIDRs.length === 0) continue;
    const got = n.podCIDRs.join(',');
    const pin = pins[n.machine] === undefined ? undefined : PIN_CHOICES[pins[n.machine]!]!.join(',');
    if (pin !== undefined) expect(got).toBe(pin);
    const first = world.firstGot.get(n.machine);
    if (first === undefined) world.firstGot.set(n.machine, got);
    else expect(got, `machine m${n.machine} got ${first} first, now ${got}`).toBe(first);
  }
}

const pinsArb = fc.array(fc.option(fc.nat(PIN_CHOICES.length - 1), { nil: undefined, freq: 2 }), { minLength: MACHINES, maxLength: MACHINES });

describe('node IPAM in a model world', () => {
  for (const [label, options] of [['IPv4', V4_ONLY], ['dual-stack', DUAL]] as const) {
    test(`RangeAllocator, ${label}: no CIDR on two live nodes, across leader changes and re-registrations`, () => {
      fc.assert(fc.property(fc.array(opArb, { minLength: 20, maxLength: 80, size: 'max' }), (ops) => run(options, false, [], ops)), { numRuns: 400 });
    });
    test(`CloudAllocator, ${label}: also no CIDR on two machines, and a machine's CIDRs never change`, () => {
      fc.assert(fc.property(pinsArb, fc.array(opArb, { minLength: 20, maxLength: 80, size: 'max' }), (pins, ops) => run(options, true, pins, ops)), { numRuns: 400 });
    });
  }
});
