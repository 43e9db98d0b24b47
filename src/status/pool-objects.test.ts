import { describe, expect, test } from 'bun:test';
import type { V1Node } from '@kubernetes/client-node';
import { AddressAllocator } from '../lb/allocator.ts';
import { loadStaticConfig } from '../../providers/static/config-load.ts';
import { addressRequest } from '../lb/requests.ts';
import { PoolLoadBalancer } from '../lb/load-balancer.ts';
import { silentLogger } from '../log.ts';
import { DELETION_HELD_CONDITION, heldConditionPatch } from '../controllers/nodelifecycle/held-condition.ts';
import { BreakerLink } from '../controllers/nodelifecycle/breaker-link.ts';
import { MAX_LISTED_SERVICES, desiredPoolObjects, poolObjectName, statusUpdate } from './pool-objects.ts';

/** The pure parts behind the AddressPool and EdgeCCMStatus objects and the DeletionHeld condition. */

const NOW = new Date('2026-03-04T05:06:07.890Z');

function allocator(yaml: string): AddressAllocator {
  const loaded = loadStaticConfig(yaml);
  if (!loaded.ok) throw new Error(JSON.stringify(loaded.errors));
  return new AddressAllocator(loaded.config.loadBalancer.pools, loaded.config.loadBalancer, () => 0);
}

const svc = (name: string) => ({ metadata: { name, namespace: 'ns' }, spec: { type: 'LoadBalancer', ports: [{ port: 80, protocol: 'TCP' }], ipFamilies: ['IPv4'] } });

describe('AddressPool objects', () => {
  test('usage per family, services, Exhausted counting reserved and held addresses as not free', () => {
    const a = allocator(`loadBalancer:
  releaseHoldSeconds: 60
  reservations:
    - { service: ns/vip, addresses: [198.51.100.3] }
  pools:
    - name: Web_Pool
      addresses: [198.51.100.1-198.51.100.3, "2001:db8::/120"]
      includeNetworkAndBroadcast: true
`);
    a.assign(addressRequest(svc('one')));
    a.assign(addressRequest(svc('two')));
    a.release('ns/two');
    const objects = desiredPoolObjects('ccm', a.details(), undefined);
    const o = objects.get('web-pool')!;
    expect(o.metadata).toEqual({ name: 'web-pool', labels: { 'edge-ccm.io/instance': 'ccm' } });
    expect(o.status).toMatchObject({
      pool: 'Web_Pool',
      addresses: ['198.51.100.1-198.51.100.3', '2001:db8::-2001:db8::ff'],
      // one in use, one held for ns/two, one reserved for ns/vip: none free.
      ipv4: { total: '3', used: 1, kept: 2, free: '0' },
      ipv6: { total: '256', used: 0, kept: 0, free: '256' },
      serviceCount: 1,
      services: [{ service: 'ns/one', addresses: ['198.51.100.1'] }],
    });
    expect(o.status!.conditions[0]).toMatchObject({ type: 'Exhausted', status: 'True', reason: 'NoFreeAddress' });
    expect(o.status!.conditions[0]!.message).toContain('IPv4: all 3 addresses are in use or kept (2 reserved or held after a release)');
    expect(o.status!.conditions.find((c) => c.type === 'Invalid')).toMatchObject({ status: 'False' });
    expect(o.status!.conditions.find((c) => c.type === 'Conflict')).toMatchObject({ status: 'False' });
  });

  test('a rejected edit makes every pool Invalid, quoting the problems (at most 20 lines)', () => {
    const problems = Array.from({ length: 25 }, (_, i) => `f.yaml:${i}: loadBalancer.x: bad`).join('\n');
    const o = desiredPoolObjects('ccm', [{ name: 'p', addresses: [], families: [], services: [] }], problems).get('p')!;
    const invalid = o.status!.conditions.find((c) => c.type === 'Invalid')!;
    expect(invalid).toMatchObject({ status: 'True', reason: 'ConfigRejected' });
    expect(invalid.message).toContain('f.yaml:19: loadBalancer.x: bad\n(5 more)');
    expect(invalid.message).not.toContain('f.yaml:20:');
  });

  test('services beyond the first 100 are counted, not listed', () => {
    const services = Array.from({ length: MAX_LISTED_SERVICES + 7 }, (_, i) => ({ service: `ns/s${i}`, addresses: ['198.51.100.1'] }));
    const o = desiredPoolObjects('ccm', [{ name: 'p', addresses: [], families: [], services }], undefined).get('p')!;
    expect(o.status!.services).toHaveLength(MAX_LISTED_SERVICES);
    expect(o.status!.servicesNotListed).toBe(7);
    expect(o.status!.serviceCount).toBe(MAX_LISTED_SERVICES + 7);
  });

  test('Conflict: an address two statuses claim, until the younger claimant is synced to another address', async () => {
    const a = allocator(`loadBalancer:
  pools:
    - name: p
      addresses: [198.51.100.1-198.51.100.2]
`);
    const lb = new PoolLoadBalancer(a, () => [], silentLogger);
    const claimant = (name: string, created: string) => ({ ...svc(name), metadata: { name, namespace: 'ns', creationTimestamp: created as unknown as Date }, status: { loadBalancer: { ingress: [{ ip: '198.51.100.1' }] } } });
    lb.rebuild([claimant('old', '2020-01-01T00:00:00Z'), claimant('young', '2021-01-01T00:00:00Z')]);
    const conflict = () => desiredPoolObjects('ccm', lb.poolStatus(), undefined).get('p')!.status!.conditions.find((c) => c.type === 'Conflict')!;
    expect(conflict()).toMatchObject({ status: 'True', reason: 'AddressClaimedTwice' });
    expect(conflict().message).toBe('service ns/young\'s status claims 198.51.100.1, held by service ns/old: it gets another address on its next sync');
    expect((await lb.ensureLoadBalancer('c', claimant('young', '2021-01-01T00:00:00Z'), [])).ingress).toEqual([{ ip: '198.51.100.2' }]);
    expect(conflict()).toMatchObject({ status: 'False', reason: 'NoConflict' });
  });

  test('names as object names: lower case, "_" as "-"', () => {
    expect(poolObjectName('Team_A.pool')).toBe('team-a.pool');
  });
});

describe('statusUpdate', () => {
  const next = { n: 1, conditions: [{ type: 'A', status: 'True', reason: 'R', message: 'm', lastTransitionTime: '' as unknown as Date }] };

  test('nothing to write when only the times would change; a flip moves the transition time', () => {
    const first = statusUpdate(undefined, next, NOW)!;
    expect(first.conditions[0]!.lastTransitionTime as unknown).toBe('2026-03-04T05:06:07Z');
    expect(statusUpdate(first, next, new Date('2030-01-01T00:00:00Z'))).toBeUndefined();
    const changed = statusUpdate(first, { ...next, n: 2 }, new Date('2030-01-01T00:00:00Z'))!;
    expect(changed.conditions[0]!.lastTransitionTime as unknown).toBe('2026-03-04T05:06:07Z');
    const flipped = statusUpdate(first, { n: 1, conditions: [{ ...next.conditions[0]!, status: 'False' }] }, new Date('2030-01-01T00:00:00Z'))!;
    expect(flipped.conditions[0]!.lastTransitionTime as unknown).toBe('2030-01-01T00:00:00Z');
  });
});

describe('BreakerLink', () => {
  test('an acknowledgment covers the nodes listed when it was read, is spent once used, and the annotation is removed once', () => {
    const link = new BreakerLink();
    let told = 0;
    link.onChange(() => told++);
    link.report({ open: true, gone: 3, allowed: 1, population: 10, windowMs: 1, held: ['a', 'b'] });
    link.report({ open: true, gone: 3, allowed: 1, population: 10, windowMs: 1, held: ['a', 'b'] });
    expect(told).toBe(1);
    link.setAcknowledgment(['a', 'b']);
    expect(link.acknowledges('a')).toBe(true);
    expect(link.acknowledges('c')).toBe(false);
    link.acknowledgmentUsed();
    expect(told).toBe(2);
    expect(link.acknowledges('a')).toBe(false);
    // The annotation is still there when the publisher next reads it: not taken as a new one.
    link.setAcknowledgment(['a', 'b', 'c']);
    expect(link.acknowledges('c')).toBe(false);
    expect(link.takeUsed()).toBe(true);
    expect(link.takeUsed()).toBe(false);
    link.setAcknowledgment(undefined);
    expect(link.acknowledges('a')).toBe(false);
  });
});

describe('DeletionHeld condition', () => {
  const node = (conditions: unknown[] = []): V1Node => ({ metadata: { name: 'n' }, status: { conditions: conditions as never } });
  const state = { reason: 'Breaker' as const, message: 'kept' };

  test('written when it changes, not again; its transition time kept; removed when no longer held', () => {
    const set = heldConditionPatch(node(), state, NOW) as { status: { conditions: { type: string; lastTransitionTime: string }[] } };
    expect(set.status.conditions[0]).toMatchObject({ type: DELETION_HELD_CONDITION, status: 'True', reason: 'Breaker', message: 'kept', lastTransitionTime: '2026-03-04T05:06:07Z' });
    const held = node([set.status.conditions[0]]);
    expect(heldConditionPatch(held, state, new Date('2030-01-01T00:00:00Z'))).toBeUndefined();
    const moved = heldConditionPatch(held, { reason: 'Protected', message: 'x' }, new Date('2030-01-01T00:00:00Z')) as typeof set;
    expect(moved.status.conditions[0]!.lastTransitionTime).toBe('2026-03-04T05:06:07Z');
    expect(heldConditionPatch(held, undefined, NOW)).toEqual({ status: { conditions: [{ $patch: 'delete', type: DELETION_HELD_CONDITION }] } });
    expect(heldConditionPatch(node(), undefined, NOW)).toBeUndefined();
  });
});
