import { describe, expect, test } from 'bun:test';
import type { V1Node, V1Service } from '@kubernetes/client-node';
import type { PoolConfig } from '../lb/config-model.ts';
import { parseAddressRange, type AddressRange } from '../lb/ranges.ts';
import { announcedAddresses, type AddressInputs } from './addresses.ts';

const pool = (name: string, announce: 'bgp' | 'l2', range: string, nodeSelector?: (l: Record<string, string>) => boolean): PoolConfig =>
  ({ name, announce, ranges: [parseAddressRange(range) as AddressRange], nodeSelector } as unknown as PoolConfig);
const node = (name: string, labels: Record<string, string> = {}): V1Node => ({ metadata: { name, labels } });
const service = (name: string, ips: string[], local = false, namespace = 'default'): V1Service => ({
  metadata: { namespace, name },
  spec: { type: 'LoadBalancer', ...(local ? { externalTrafficPolicy: 'Local' } : {}) },
  status: { loadBalancer: { ingress: ips.map((ip) => ({ ip })) } },
});
const inputs = (over: Partial<AddressInputs>): AddressInputs => ({
  protocol: 'bgp', pools: [pool('b', 'bgp', '203.0.113.0/28'), pool('l', 'l2', '198.51.100.192/28'), pool('v6', 'bgp', '2001:db8:f::/120')],
  services: [], candidates: [node('n1'), node('n2'), node('n3')], readyEndpointNodes: new Map(), ...over,
});

describe('announcedAddresses: which address, from which nodes, by which protocol', () => {
  test('only the protocol\'s pools; canonical text; sorted by address', () => {
    const services = [service('web', ['203.0.113.5', '198.51.100.200', '2001:DB8:F::0007', 'not-an-ip', '10.0.0.1'])];
    expect(announcedAddresses(inputs({ services })).map((a) => a.address)).toEqual(['2001:db8:f::7', '203.0.113.5']);
    expect(announcedAddresses(inputs({ services, protocol: 'l2' })).map((a) => [a.address, a.pool.name])).toEqual([['198.51.100.200', 'l']]);
  });

  test('a shared address: the union of its services\' nodes; Local narrows to ready endpoints; the pool\'s selector applies', () => {
    const pools = [pool('b', 'bgp', '203.0.113.0/28', (l) => l.rack !== 'x')];
    const candidates = [node('n1'), node('n2'), node('n3', { rack: 'x' })];
    const services = [service('a', ['203.0.113.9'], true), service('b', ['203.0.113.9'], true, 'other')];
    const readyEndpointNodes = new Map([['default/a', new Set(['n1', 'n3'])], ['other/b', new Set(['n2'])]]);
    const [shared] = announcedAddresses(inputs({ pools, candidates, services, readyEndpointNodes }));
    expect(shared).toMatchObject({ address: '203.0.113.9', services: ['default/a', 'other/b'], nodes: ['n1', 'n2'] });
    const none = announcedAddresses(inputs({ pools, candidates, services: [service('c', ['203.0.113.10'], true)], readyEndpointNodes }));
    expect(none).toMatchObject([{ address: '203.0.113.10', nodes: [] }]);
  });

  test('not announced: a service being deleted, another class, not a LoadBalancer', () => {
    const deleting = { ...service('gone', ['203.0.113.1']), metadata: { namespace: 'default', name: 'gone', deletionTimestamp: new Date() } };
    const foreign = { ...service('foreign', ['203.0.113.2']), spec: { type: 'LoadBalancer', loadBalancerClass: 'example.com/other' } };
    const nodePort = { ...service('np', ['203.0.113.3']), spec: { type: 'NodePort' } };
    expect(announcedAddresses(inputs({ services: [deleting, foreign, nodePort] as V1Service[] }))).toEqual([]);
  });
});
