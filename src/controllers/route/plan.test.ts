import { describe, expect, test } from 'bun:test';
import type { V1Node } from '@kubernetes/client-node';
import type { Route } from '../../cloud/types.ts';
import { isResponsibleForRoute, networkCondition, planRoutes } from './plan.ts';
import { parsePrefix, type Prefix } from '../../net/ip.ts';

const prefix = (s: string): Prefix => parsePrefix(s, true)!;
const cluster = [prefix('10.120.0.0/16'), prefix('a00::/8')];

function node(name: string, uid: string, cidrs: string[], ip: string): V1Node {
  return {
    metadata: { name, uid },
    spec: { podCIDR: cidrs[0], podCIDRs: cidrs },
    status: { addresses: [{ type: 'InternalIP', address: ip }] },
  };
}
const route = (name: string, target: string, cidr: string, ip: string, extra: Partial<Route> = {}): Route => ({
  name,
  targetNode: target,
  targetNodeAddresses: [{ type: 'InternalIP', address: ip }],
  destinationCIDR: cidr,
  blackhole: false,
  ...extra,
});

const node1 = node('node-1', '01', ['10.120.0.0/24'], '10.0.1.1');
const node2 = node('node-2', '02', ['10.120.1.0/24'], '10.0.2.1');
const node3 = node('node-3', '03', ['10.120.0.0/24', 'a00:100::/24'], '10.0.3.1');
const node4 = node('node-4', '04', ['10.120.1.0/24', 'a00:200::/24'], '10.0.4.1');

describe('isResponsibleForRoute (upstream TestIsResponsibleForRoute)', () => {
  const cases: [string, string, boolean][] = [
    ['10.244.0.0/16', '10.244.0.0/24', true],
    ['10.244.0.0/16', '10.244.10.0/24', true],
    ['10.244.0.0/16', '10.244.255.0/24', true],
    ['10.244.0.0/14', '10.244.0.0/24', true],
    ['10.244.0.0/14', '10.247.255.0/24', true],
    ['a00:100::/10', 'a00:100::/24', true],
    ['10.244.0.0/16', '10.224.0.0/24', false],
    ['10.244.0.0/16', '10.0.10.0/24', false],
    ['10.244.0.0/16', '10.255.255.0/24', false],
    ['10.244.0.0/14', '10.248.0.0/24', false],
    ['10.244.0.0/14', '10.243.255.0/24', false],
    ['a00:100::/10', 'b00:100::/24', false],
  ];
  for (const [clusterCIDR, routeCIDR, want] of cases) {
    test(`${routeCIDR} in ${clusterCIDR}: ${want}`, () => {
      expect(isResponsibleForRoute(route('r', 'n', routeCIDR, '1.1.1.1'), [prefix(clusterCIDR)])).toBe(want);
    });
  }
  test('an unparsable route CIDR is not ours', () => {
    expect(isResponsibleForRoute(route('r', 'n', 'garbage', '1.1.1.1'), cluster)).toBe(false);
  });
});

describe('planRoutes (upstream TestReconcile)', () => {
  test('single cidr, 2 nodes, no routes: both created with the node UID as name hint', () => {
    const plan = planRoutes([node1, node2], [], cluster);
    expect(plan.toCreate.map((c) => [c.nameHint, c.route.destinationCIDR])).toEqual([['01', '10.120.0.0/24'], ['02', '10.120.1.0/24']]);
    expect(plan.toDelete).toEqual([]);
  });

  test('single cidr, all routes exist: nothing to do, all kept', () => {
    const plan = planRoutes([node1, node2], [route('r1', 'node-1', '10.120.0.0/24', '10.0.1.1'), route('r2', 'node-2', '10.120.1.0/24', '10.0.2.1')], cluster);
    expect(plan.toCreate).toEqual([]);
    expect(plan.toDelete).toEqual([]);
    expect([...plan.actions.get('node-1')!.values()]).toEqual(['keep']);
  });

  test('one route created, the other missing', () => {
    const plan = planRoutes([node1, node2], [route('r1', 'node-1', '10.120.0.0/24', '10.0.1.1')], cluster);
    expect(plan.toCreate.map((c) => c.route.targetNode)).toEqual(['node-2']);
  });

  test('too many routes: the extra one in range is deleted', () => {
    const extra = route('r3', 'node-3', '10.120.2.0/24', '10.0.3.1');
    const plan = planRoutes([node1, node2], [route('r1', 'node-1', '10.120.0.0/24', '10.0.1.1'), route('r2', 'node-2', '10.120.1.0/24', '10.0.2.1'), extra], cluster);
    expect(plan.toDelete).toEqual([extra]);
  });

  test('2 routes with 1 incorrect: wrong one deleted, missing one created', () => {
    const wrong = route('r3', 'node-3', '10.120.2.0/24', '10.0.2.1');
    const plan = planRoutes([node1, node2], [route('r1', 'node-1', '10.120.0.0/24', '10.0.1.1'), wrong], cluster);
    expect(plan.toDelete).toEqual([wrong]);
    expect(plan.toCreate.map((c) => c.route.destinationCIDR)).toEqual(['10.120.1.0/24']);
  });

  test('a node without a CIDR gets no route and no condition decision', () => {
    const noCidr: V1Node = { metadata: { name: 'node-2', uid: '02' }, spec: { podCIDR: '' }, status: { addresses: [] } };
    const plan = planRoutes([node1, noCidr], [], cluster);
    expect(plan.toCreate.map((c) => c.route.targetNode)).toEqual(['node-1']);
    expect(plan.actions.has('node-2')).toBe(false);
  });

  test('blackhole route in our range is deleted, out of range is kept', () => {
    const inRange = route('bh1', '', '10.120.2.0/24', '10.0.100.1', { blackhole: true });
    const outOfRange = route('bh2', '', '10.1.2.0/24', '10.0.100.1', { blackhole: true });
    const routes = [route('r1', 'node-1', '10.120.0.0/24', '10.0.1.1'), route('r2', 'node-2', '10.120.1.0/24', '10.0.2.1')];
    expect(planRoutes([node1, node2], [...routes, inRange], cluster).toDelete).toEqual([inRange]);
    expect(planRoutes([node1, node2], [...routes, outOfRange], cluster).toDelete).toEqual([]);
  });

  test('stale route out of our range is never touched', () => {
    const foreign = route('f', 'node-9', '192.168.0.0/24', '10.0.9.1');
    expect(planRoutes([node1], [foreign], cluster).toDelete).toEqual([]);
  });

  test('dual stack: two CIDRs per node, one route each', () => {
    const plan = planRoutes([node3, node4], [], cluster);
    expect(plan.toCreate.map((c) => c.route.destinationCIDR).sort()).toEqual(['10.120.0.0/24', '10.120.1.0/24', 'a00:100::/24', 'a00:200::/24']);
  });

  test('dual stack with a few wrong routes', () => {
    const wrong = route('w', 'node-3', 'a00:300::/24', '10.0.3.1');
    const plan = planRoutes([node3], [route('ok', 'node-3', '10.120.0.0/24', '10.0.3.1'), wrong], cluster);
    expect(plan.toDelete).toEqual([wrong]);
    expect(plan.toCreate.map((c) => c.route.destinationCIDR)).toEqual(['a00:100::/24']);
  });

  test('node addresses changed: the route is updated (deleted, then created) when the provider records addresses', () => {
    const old = route('r1', 'node-1', '10.120.0.0/24', '10.0.1.99', { enableNodeAddresses: true });
    const plan = planRoutes([node1], [old], cluster);
    expect(plan.toDelete).toEqual([old]);
    expect(plan.toCreate.map((c) => c.route.targetNodeAddresses[0]?.address)).toEqual(['10.0.1.1']);
    expect(plan.deleteBeforeCreate).toBe(true);
  });

  test('addresses changed but the provider does not record them: kept', () => {
    const plan = planRoutes([node1], [route('r1', 'node-1', '10.120.0.0/24', '10.0.1.99')], cluster);
    expect(plan.toDelete).toEqual([]);
    expect(plan.toCreate).toEqual([]);
  });

  test('routes with no TargetNodeAddresses at first are updated once addresses are recorded', () => {
    const bare = { ...route('r1', 'node-1', '10.120.0.0/24', 'x'), targetNodeAddresses: [], enableNodeAddresses: true };
    expect(planRoutes([node1], [bare], cluster).toDelete).toEqual([bare]);
  });

  test('duplicate pod CIDR asks for the same route twice (the provider refuses the second)', () => {
    const dup = node('node-4', '04', ['10.120.1.0/24', '10.120.1.0/24'], '10.0.4.1');
    expect(planRoutes([dup], [], cluster).toCreate.length).toBe(2);
  });
});

describe('networkCondition (upstream TestUpdateNetworkingCondition matrix)', () => {
  const now = new Date('2026-01-01T00:00:00Z');
  const withCondition = (status?: string, reason?: string): V1Node => ({
    metadata: { name: 'n' },
    status: status ? { conditions: [{ type: 'NetworkUnavailable', status, reason }] } : {},
  });
  test('no condition, routes created: False/RouteCreated', () => {
    expect(networkCondition(withCondition(), true, now)).toMatchObject({ status: 'False', reason: 'RouteCreated' });
  });
  test('no condition, routes not created: True/NoRouteCreated', () => {
    expect(networkCondition(withCondition(), false, now)).toMatchObject({ status: 'True', reason: 'NoRouteCreated' });
  });
  test('same status and reason RouteCreated: no write', () => {
    expect(networkCondition(withCondition('False', 'RouteCreated'), true, now)).toBeUndefined();
  });
  test('same status, foreign reason (CalicoIsUp): overwritten', () => {
    expect(networkCondition(withCondition('False', 'CalicoIsUp'), true, now)).toMatchObject({ reason: 'RouteCreated' });
  });
  test('True with a foreign reason, routes not created: overwritten', () => {
    expect(networkCondition(withCondition('True', 'Other'), false, now)).toMatchObject({ reason: 'NoRouteCreated' });
  });
  test('False/RouteCreated turning into routes not created: written', () => {
    expect(networkCondition(withCondition('False', 'RouteCreated'), false, now)).toMatchObject({ status: 'True' });
  });
  test('True/NoRouteCreated and still not created: no write', () => {
    expect(networkCondition(withCondition('True', 'NoRouteCreated'), false, now)).toBeUndefined();
  });
});
