import { describe, expect, test } from 'bun:test';
import type { V1EndpointSlice, V1Node, V1Service } from '@kubernetes/client-node';
import { leaderNextHopCandidates, loadBalancerAnnouncements, mergeAnnouncements, nodeLoadBalancerAnnouncements, podCIDRAnnouncements } from './announcements.ts';
import type { BgpConfig } from './config-model.ts';
import { BgpRouteTable } from './route-table.ts';
import type { LoadBalancerConfig } from '../../lb/config-model.ts';
import { parseAddressRange, type AddressRange } from '../../lb/ranges.ts';
import type { Route } from '../../cloud/types.ts';
import { readyEndpointNodes } from '../../kube/endpoint-slices.ts';
import { parseLabelSelector } from '../../kube/label-selector.ts';

/** What goes to the speaker: pod CIDR routes with their node as next hop, load-balancer host routes with the eligible nodes. */

const bgp: BgpConfig = {
  speaker: { localAsn: 64512, routerId: '198.51.100.2', peers: [] },
  podCIDRs: { announce: true, communities: ['64512:1'] },
  loadBalancers: { announceFrom: 'leader' },
  pools: new Map([['public', { communities: ['no-export'], localPref: 200 }]]),
};

const pool = (name: string, cidr: string, announce: 'bgp' | 'l2' | 'none') => ({
  name, ranges: [parseAddressRange(cidr) as AddressRange], priority: 0, autoAssign: true, shareAcrossNamespaces: false, announce,
});
const lb: LoadBalancerConfig = { classes: [], pools: [pool('public', '203.0.113.0/28', 'bgp'), pool('v6', '2001:db8:f::/120', 'bgp'), pool('l2', '203.0.113.32/28', 'l2')] };

function node(name: string, v4: string, v6?: string, external = false): V1Node {
  const addresses = [{ type: 'Hostname', address: name }, { type: external ? 'ExternalIP' : 'InternalIP', address: v4 }, ...(v6 ? [{ type: 'InternalIP', address: v6 }] : [])];
  return { metadata: { name }, status: { addresses } };
}
function service(name: string, ips: string[], o: { local?: boolean; deleting?: boolean; cls?: string; type?: string } = {}): V1Service {
  return {
    metadata: { namespace: 'default', name, ...(o.deleting ? { deletionTimestamp: new Date() } : {}) },
    spec: { type: o.type ?? 'LoadBalancer', ...(o.local ? { externalTrafficPolicy: 'Local' } : {}), ...(o.cls ? { loadBalancerClass: o.cls } : {}) },
    status: { loadBalancer: { ingress: ips.map((ip) => ({ ip })) } },
  };
}
const nodes = [node('n1', '198.51.100.11', '2001:db8::11'), node('n2', '198.51.100.12', '2001:db8::12'), node('n3', '198.51.100.13', undefined, true)];

describe('load-balancer announcements', () => {
  test('each address of a bgp pool: a host route to every eligible node of its family, with the pool\'s attributes', () => {
    const table = loadBalancerAnnouncements({
      services: [service('web', ['203.0.113.5', '2001:db8:f::7']), service('arp', ['203.0.113.33']), service('foreign', ['192.168.1.1'])],
      eligibleNodes: nodes,
      readyEndpointNodes: new Map(),
    }, lb, bgp);
    // In address order (src/announce/addresses.ts sorts), whatever the services' order.
    expect(table).toEqual([
      { prefix: '2001:db8:f::7/128', nextHops: ['2001:db8::11', '2001:db8::12'] },
      { prefix: '203.0.113.5/32', nextHops: ['198.51.100.11', '198.51.100.12', '198.51.100.13'], communities: ['no-export'], localPref: 200 },
    ]);
  });

  test('externalTrafficPolicy Local: only nodes with a ready endpoint; none: not announced', () => {
    const slices: V1EndpointSlice[] = [{
      addressType: 'IPv4',
      metadata: { namespace: 'default', name: 'web-abc', labels: { 'kubernetes.io/service-name': 'web' } },
      endpoints: [
        { addresses: ['10.0.0.1'], nodeName: 'n2', conditions: { ready: true } },
        { addresses: ['10.0.0.2'], nodeName: 'n3', conditions: { ready: false } },
        { addresses: ['10.0.0.3'], nodeName: 'n1' },
      ],
    }];
    const table = loadBalancerAnnouncements({
      services: [service('web', ['203.0.113.5'], { local: true }), service('idle', ['203.0.113.6'], { local: true })],
      eligibleNodes: nodes,
      readyEndpointNodes: readyEndpointNodes(slices),
    }, lb, bgp);
    // An unset ready condition counts as ready (EndpointSlice semantics).
    expect(table.map((a) => [a.prefix, a.nextHops])).toEqual([['203.0.113.5/32', ['198.51.100.11', '198.51.100.12']]]);
  });

  test('a service being deleted, of a foreign class, or no longer a LoadBalancer: withdrawn', () => {
    const table = loadBalancerAnnouncements({
      services: [service('a', ['203.0.113.1'], { deleting: true }), service('b', ['203.0.113.2'], { cls: 'other' }), service('c', ['203.0.113.3'], { type: 'ClusterIP' })],
      eligibleNodes: nodes,
      readyEndpointNodes: new Map(),
    }, lb, bgp);
    expect(table).toEqual([]);
  });

  test('a shared address gets the union of its services\' next hops', () => {
    const slices: V1EndpointSlice[] = [1, 2].map((i) => ({
      addressType: 'IPv4',
      metadata: { namespace: 'default', name: `s${i}-x`, labels: { 'kubernetes.io/service-name': `s${i}` } },
      endpoints: [{ addresses: ['10.0.0.9'], nodeName: `n${i}` }],
    }));
    const table = loadBalancerAnnouncements({
      services: [service('s1', ['203.0.113.9'], { local: true }), service('s2', ['203.0.113.9'], { local: true })],
      eligibleNodes: nodes,
      readyEndpointNodes: readyEndpointNodes(slices),
    }, lb, bgp);
    expect(table.map((a) => a.nextHops)).toEqual([['198.51.100.11', '198.51.100.12']]);
  });
});

describe('pod CIDR routes', () => {
  const route = (node: string, cidr: string, addresses: V1Node['status']): Route => ({ name: '', targetNode: node, targetNodeAddresses: addresses?.addresses ?? [], destinationCIDR: cidr, blackhole: false });

  test('the route table announces each pod CIDR with its node\'s address of the same family; listRoutes is what is announced', async () => {
    const table = new BgpRouteTable();
    let changes = 0;
    table.onChange(() => changes++);
    await table.createRoute('kubernetes', 'uid-1', route('n1', '203.0.113.64/29', nodes[0]!.status));
    await table.createRoute('kubernetes', 'uid-1', route('n1', '2001:db8:100:1::/64', nodes[0]!.status));
    await table.createRoute('kubernetes', 'uid-3', route('n3', '203.0.113.80/29', nodes[2]!.status));
    expect(podCIDRAnnouncements(table.announced(), bgp)).toEqual([
      { prefix: '203.0.113.64/29', nextHops: ['198.51.100.11'], communities: ['64512:1'] },
      { prefix: '2001:db8:100:1::/64', nextHops: ['2001:db8::11'], communities: ['64512:1'] },
      { prefix: '203.0.113.80/29', nextHops: ['198.51.100.13'], communities: ['64512:1'] },
    ]);
    const listed = await table.listRoutes();
    expect(listed.map((r) => [r.name, r.targetNode, r.destinationCIDR, r.enableNodeAddresses])).toEqual([
      ['kubernetes-uid-1', 'n1', '203.0.113.64/29', true],
      ['kubernetes-uid-1', 'n1', '2001:db8:100:1::/64', true],
      ['kubernetes-uid-3', 'n3', '203.0.113.80/29', true],
    ]);
    await table.deleteRoute('kubernetes', listed[0]!);
    expect((await table.listRoutes()).map((r) => r.destinationCIDR)).toEqual(['2001:db8:100:1::/64', '203.0.113.80/29']);
    expect(changes).toBe(4);
    expect(table.hasSynced).toBe(false);
    table.synced();
    expect(table.hasSynced).toBe(true);
  });

  test('a node without an address of the CIDR\'s family: createRoute fails (the controller reports it), nothing announced', async () => {
    const table = new BgpRouteTable();
    await expect(table.createRoute('kubernetes', 'uid-3', route('n3', '2001:db8:100:3::/64', nodes[2]!.status))).rejects.toThrow(
      'node n3 has no InternalIP or ExternalIP of IPv6 to announce 2001:db8:100:3::/64 with',
    );
    expect(table.announced()).toEqual([]);
  });

  test('pod CIDRs not announced when the section says so; a load-balancer route that equals a pod CIDR is left out', () => {
    const off = { ...bgp, podCIDRs: { announce: false, communities: [] } };
    const table = new BgpRouteTable();
    void table.createRoute('c', 'u', route('n1', '203.0.113.64/29', nodes[0]!.status));
    expect(podCIDRAnnouncements(table.announced(), off)).toEqual([]);
    expect(mergeAnnouncements([{ prefix: '203.0.113.5/32', nextHops: ['198.51.100.11'] }], [{ prefix: '203.0.113.5/32', nextHops: ['198.51.100.12'] }])).toEqual({
      table: [{ prefix: '203.0.113.5/32', nextHops: ['198.51.100.11'] }],
      clashes: ['203.0.113.5/32'],
    });
  });
});

describe('the leader\'s next hops follow readiness (announceFrom: leader)', () => {
  const withReady = (n: V1Node, status: string | undefined): V1Node => ({ ...n, status: { ...n.status, ...(status ? { conditions: [{ type: 'Ready', status }] } : {}) } });
  test('a node whose Ready is Unknown, False or not yet posted is no next hop', () => {
    const [n1, n2, n3] = nodes;
    const { nodes: candidates, noneReady } = leaderNextHopCandidates([withReady(n1!, 'True'), withReady(n2!, 'Unknown'), withReady(n3!, 'False'), withReady(node('n4', '198.51.100.14'), undefined)]);
    expect(candidates.map((n) => n.metadata?.name)).toEqual(['n1']);
    expect(noneReady).toBe(false);
    const table = loadBalancerAnnouncements({ services: [service('web', ['203.0.113.5'])], eligibleNodes: candidates, readyEndpointNodes: new Map() }, lb, bgp);
    expect(table).toEqual([{ prefix: '203.0.113.5/32', nextHops: ['198.51.100.11'], communities: ['no-export'], localPref: 200 }]);
  });
  test('no eligible node Ready (the control plane cut off from every kubelet): every eligible node kept, not every address withdrawn', () => {
    const unknown = nodes.map((n) => withReady(n, 'Unknown'));
    expect(leaderNextHopCandidates(unknown)).toEqual({ nodes: unknown, noneReady: true });
    expect(leaderNextHopCandidates([])).toEqual({ nodes: [], noneReady: false });
  });
});

test("a pool's nodeSelector narrows its addresses' next hops", () => {
  const labelled = (name: string, v4: string, edge: boolean): V1Node => ({ metadata: { name, labels: edge ? { edge: 'true' } : {} }, status: { addresses: [{ type: 'InternalIP', address: v4 }] } });
  const selective: LoadBalancerConfig = { classes: [], pools: [{ ...pool('public', '203.0.113.0/28', 'bgp'), nodeSelector: parseLabelSelector('edge=true') }] };
  const table = loadBalancerAnnouncements({
    services: [service('web', ['203.0.113.5'])],
    eligibleNodes: [labelled('a', '198.51.100.11', true), labelled('b', '198.51.100.12', false), labelled('c', '198.51.100.13', true)],
    readyEndpointNodes: new Map(),
  }, selective, bgp);
  expect(table.map((a) => a.nextHops)).toEqual([['198.51.100.11', '198.51.100.13']]);
});

describe("a node's own announcements (loadBalancers.announceFrom: nodes)", () => {
  const services = [service('web', ['203.0.113.1', '2001:db8:f::1']), service('local', ['203.0.113.2'], { local: true }), service('l2', ['203.0.113.33'])];
  const ready = new Map([['default/local', new Set(['n2'])]]);
  const n1 = nodes[0]!;
  const own = (n: V1Node | undefined, r: Map<string, Set<string>> = ready) => nodeLoadBalancerAnnouncements(n, { services, readyEndpointNodes: r }, lb, bgp).map((a) => [a.prefix, a.nextHops]);

  test('every address it may serve, with itself as the only next hop; eTP Local only with a ready endpoint here', () => {
    expect(own(n1)).toEqual([['2001:db8:f::1/128', ['2001:db8::11']], ['203.0.113.1/32', ['198.51.100.11']]]);
    expect(own(n1, new Map([['default/local', new Set(['n1'])]]))).toEqual([['2001:db8:f::1/128', ['2001:db8::11']], ['203.0.113.1/32', ['198.51.100.11']], ['203.0.113.2/32', ['198.51.100.11']]]);
  });

  test('nothing while drained (ToBeDeleted taint, exclusion label, deletion) or unknown; readiness is not asked', () => {
    const drained: V1Node[] = [
      { ...n1, spec: { taints: [{ key: 'ToBeDeletedByClusterAutoscaler', effect: 'NoSchedule' }] } },
      { ...n1, metadata: { ...n1.metadata, labels: { 'node.kubernetes.io/exclude-from-external-load-balancers': '' } } },
      { ...n1, metadata: { ...n1.metadata, deletionTimestamp: new Date() } },
    ];
    for (const n of drained) expect(own(n)).toEqual([]);
    expect(own(undefined)).toEqual([]);
    const notReady = { ...n1, status: { ...n1.status, conditions: [{ type: 'Ready', status: 'Unknown' }] } };
    expect(own(notReady)).toHaveLength(2);
  });
});
