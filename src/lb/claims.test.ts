import { describe, expect, test } from 'bun:test';
import type { V1Service } from '@kubernetes/client-node';
import { AddressAllocator } from './allocator.ts';
import type { LoadBalancerConfig } from './config-model.ts';
import { AllocationError, addressRequest } from './requests.ts';
import { loadStaticConfig } from '../../providers/static/config-load.ts';
import { formatIP } from '../net/ip.ts';

/**
 * loadBalancer.reservations (a service's sticky addresses) and loadBalancer.releaseHoldSeconds
 * (a released address stays with its service that long): in the allocator and in the config.
 */

function config(yaml: string): LoadBalancerConfig {
  const loaded = loadStaticConfig(yaml);
  if (!loaded.ok) throw new Error(JSON.stringify(loaded.errors));
  return loaded.config.loadBalancer;
}

function problems(yaml: string): string[] {
  const loaded = loadStaticConfig(yaml);
  if (loaded.ok) return [];
  return loaded.errors.map((e) => `${e.path}: ${e.message}`);
}

function svc(name: string, o: { namespace?: string; ip?: string; families?: ('IPv4' | 'IPv6')[] } = {}): V1Service {
  return {
    metadata: { name, namespace: o.namespace ?? 'default', annotations: o.ip ? { 'edge-ccm.io/load-balancer-ips': o.ip } : {} },
    spec: { type: 'LoadBalancer', ports: [{ port: 80, protocol: 'TCP' }], ipFamilies: o.families ?? ['IPv4'], ipFamilyPolicy: o.families?.length === 2 ? 'RequireDualStack' : 'SingleStack' },
  };
}

const assign = (a: AddressAllocator, s: V1Service) => a.assign(addressRequest(s)).addresses.map(formatIP);
const refusal = (fn: () => unknown): AllocationError => {
  try {
    fn();
  } catch (e) {
    if (e instanceof AllocationError) return e;
    throw e;
  }
  throw new Error('not refused');
};

const POOLS = `loadBalancer:
  pools:
    - name: web
      addresses: [198.51.100.1-198.51.100.3, "2001:db8::1-2001:db8::2"]
`;

describe('reservations', () => {
  const lb = config(`${POOLS}  reservations:
    - service: shop/front
      addresses: [198.51.100.1, "2001:db8::2"]
`);

  test('the reserved service gets its addresses, before anyone else asked or after; nobody else gets them automatically', () => {
    const a = new AddressAllocator(lb.pools, lb);
    expect(assign(a, svc('x'))).toEqual(['198.51.100.2']);
    expect(assign(a, svc('y'))).toEqual(['198.51.100.3']);
    // The pool is full for everyone but shop/front.
    expect(refusal(() => assign(a, svc('z'))).reason).toBe('PoolExhausted');
    expect(assign(a, svc('front', { namespace: 'shop', families: ['IPv4', 'IPv6'] }))).toEqual(['198.51.100.1', '2001:db8::2']);
    // Deleted and re-created: the same addresses again, whatever was freed meanwhile.
    a.release('shop/front');
    a.release('default/x');
    expect(assign(a, svc('front', { namespace: 'shop' }))).toEqual(['198.51.100.1']);
  });

  test('another service requesting a reserved address is refused, naming the reservation', () => {
    const a = new AddressAllocator(lb.pools, lb);
    const e = refusal(() => assign(a, svc('thief', { ip: '198.51.100.1' })));
    expect(e.reason).toBe('RequestedAddressInUse');
    expect(e.message).toBe('requested address 198.51.100.1 is reserved for service shop/front in loadBalancer.reservations: request another address, or change the reservation');
  });

  test('a reservation added while another service holds the address takes nothing away: the reserved service is told', () => {
    const before = config(POOLS);
    const a = new AddressAllocator(before.pools, before);
    expect(assign(a, svc('early'))).toEqual(['198.51.100.1']);
    a.setPools(lb.pools, lb);
    expect(assign(a, svc('early'))).toEqual(['198.51.100.1']);
    const e = refusal(() => assign(a, svc('front', { namespace: 'shop' })));
    expect(e.reason).toBe('RequestedAddressInUse');
    expect(e.message).toContain('address 198.51.100.1 is reserved for this service in loadBalancer.reservations but already used by service default/early');
  });

  test('config: each problem with its path', () => {
    expect(problems(`${POOLS}  reservations:
    - service: shop/front
      addresses: [192.0.2.77]
    - service: shop/front
      addresses: [198.51.100.2]
    - service: a/b
      addresses: [198.51.100.2, 198.51.100.3]
    - service: c/d
      addresses: [198.51.100.2]
    - service: no-namespace
      addresses: [nope]
`)).toEqual([
      'loadBalancer.reservations[0].addresses[0]: reserved address 192.0.2.77 is in no pool: add it to a pool\'s addresses (and not to its exclude)',
      'loadBalancer.reservations[1].service: service shop/front is already reserved for in loadBalancer.reservations[0]: list all its addresses there',
      'loadBalancer.reservations[2].addresses[1]: more than one IPv4 address for service a/b: a service holds one address per IP family',
      'loadBalancer.reservations[3].addresses[0]: address 198.51.100.2 is already reserved for service a/b (loadBalancer.reservations[2])',
      'loadBalancer.reservations[4].service: must be NAMESPACE/NAME of a Service',
      'loadBalancer.reservations[4].addresses[0]: invalid IP address "nope"',
    ]);
  });
});

describe('release hold', () => {
  const lb = config(`${POOLS}  releaseHoldSeconds: 600\n`);

  test('a released address goes to nobody else until the hold ends; its own service (same key) gets it back', () => {
    let now = 1_000_000;
    const a = new AddressAllocator(lb.pools, lb, () => now);
    expect(assign(a, svc('a'))).toEqual(['198.51.100.1']);
    a.release('default/a');
    // Another service gets the next free address, not a's.
    expect(assign(a, svc('b'))).toEqual(['198.51.100.2']);
    // a, re-created under the same name: its old address, although a lower one would not be free anyway.
    expect(assign(a, svc('a'))).toEqual(['198.51.100.1']);
    a.release('default/a');
    now += 600_000;
    expect(assign(a, svc('c'))).toEqual(['198.51.100.1']);
  });

  test('a request for a held address is a deliberate choice: granted', () => {
    const a = new AddressAllocator(lb.pools, lb, () => 0);
    assign(a, svc('a'));
    a.release('default/a');
    expect(assign(a, svc('b', { ip: '198.51.100.1' }))).toEqual(['198.51.100.1']);
  });

  test('without a hold, a released address is free at once (the default)', () => {
    const plain = config(POOLS);
    const a = new AddressAllocator(plain.pools, plain, () => 0);
    assign(a, svc('a'));
    a.release('default/a');
    expect(assign(a, svc('b'))).toEqual(['198.51.100.1']);
  });

  test('config: not negative, at most 31 days', () => {
    expect(problems(`${POOLS}  releaseHoldSeconds: -1\n`)).toEqual(['loadBalancer.releaseHoldSeconds: must not be negative']);
    expect(problems(`${POOLS}  releaseHoldSeconds: 99999999\n`)).toEqual(['loadBalancer.releaseHoldSeconds: must be at most 31 days (2678400)']);
    expect(config(`${POOLS}  releaseHoldSeconds: 1.5\n`).releaseHoldMs).toBe(1500);
  });
});
