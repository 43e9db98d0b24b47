import { describe, expect, test } from 'bun:test';
import type { V1EndpointSlice, V1Node, V1Service } from '@kubernetes/client-node';
import { loadSpeakerConfig } from '../config.ts';
import { announcementTable, electAddresses, reassignedAddresses, standbyInterfaces, type AddressElection, type ClusterView } from './election.ts';
import { subnetInterface } from './interfaces.ts';
import { electNode } from '../../net/l2/election.ts';
import { parseIP } from '../../net/ip.ts';
import type { PoolConfig } from '../../lb/config-model.ts';

function pools(yaml: string): PoolConfig[] {
  const r = loadSpeakerConfig(yaml);
  if (!r.ok) throw new Error(JSON.stringify(r.errors));
  return r.config.pools;
}

const POOLS = pools(`
inventory: { machines: [] }   # another provider's section: not the speaker's business
loadBalancer:
  pools:
    - { name: lan, addresses: [198.51.100.200-198.51.100.210, "2001:db8:1::200-2001:db8:1::210"], announce: l2 }
    - { name: side, addresses: [203.0.113.200/29], announce: l2, interfaces: [eth1], nodeSelector: "site=a" }
    - { name: routed, addresses: [203.0.113.100/30], announce: bgp }
    - { name: other, addresses: [203.0.113.64/30] }
`);

function node(name: string, opts: { ready?: boolean; labels?: Record<string, string>; taint?: string; address?: string } = {}): V1Node {
  return {
    metadata: { name, labels: opts.labels ?? {} },
    spec: { taints: opts.taint ? [{ key: opts.taint, effect: 'NoSchedule' }] : [] },
    status: {
      conditions: [{ type: 'Ready', status: opts.ready === false ? 'False' : 'True' }],
      addresses: opts.address ? [{ type: 'InternalIP', address: opts.address }] : [],
    },
  };
}

function service(name: string, ips: string[], opts: { local?: boolean; type?: string } = {}): V1Service {
  return {
    metadata: { name, namespace: 'default' },
    spec: { type: opts.type ?? 'LoadBalancer', externalTrafficPolicy: opts.local ? 'Local' : 'Cluster', selector: { app: name } },
    status: { loadBalancer: { ingress: ips.map((ip) => ({ ip })) } },
  };
}

function slice(serviceName: string, endpoints: { node: string; ready?: boolean }[]): V1EndpointSlice {
  return {
    addressType: 'IPv4',
    metadata: { name: `${serviceName}-x`, namespace: 'default', labels: { 'kubernetes.io/service-name': serviceName } },
    endpoints: endpoints.map((e) => ({ addresses: ['10.0.0.1'], nodeName: e.node, conditions: e.ready === undefined ? {} : { ready: e.ready } })),
  };
}

const NODES = ['n1', 'n2', 'n3', 'n4'];
const view = (over: Partial<ClusterView> = {}): ClusterView => ({
  pools: POOLS,
  services: [],
  nodes: NODES.map((n) => node(n)),
  endpointSlices: [],
  alive: new Set(NODES),
  ...over,
});

describe('pool config: announce, interfaces, nodeSelector', () => {
  test('read with their defaults', () => {
    expect(POOLS.map((p) => [p.name, p.announce, p.interfaces])).toEqual([
      ['lan', 'l2', undefined],
      ['side', 'l2', ['eth1']],
      ['routed', 'bgp', undefined],
      ['other', 'none', undefined],
    ]);
    const side = POOLS.find((p) => p.name === 'side')!;
    expect(side.nodeSelector!({ site: 'a' })).toBe(true);
    expect(side.nodeSelector!({ site: 'b' })).toBe(false);
  });

  test('bad values are refused with their paths', () => {
    const r = loadSpeakerConfig(`loadBalancer:
  pools:
    - { name: a, addresses: [198.51.100.0/28], announce: arp, interfaces: [], nodeSelector: "a in (b" }
    - { name: b, addresses: [198.51.100.16/28], announce: bgp, interfaces: [eth0] }
    - { name: c, addresses: [198.51.100.32/28], announce: l2, interfaces: ["eth0/1", "a-very-long-interface-name"] }
`);
    expect(r.ok).toBe(false);
    expect(!r.ok && r.errors.map((e) => `${e.path}: ${e.message}`)).toEqual([
      'loadBalancer.pools[0].announce: must be one of l2, bgp, none',
      'loadBalancer.pools[0].interfaces: must list at least one interface, or be left out',
      'loadBalancer.pools[0].nodeSelector: invalid label selector: invalid label key "a in (b" in "a in (b"',
      "loadBalancer.pools[1].interfaces: interfaces are where the L2 speakers answer: only for announce: l2 (this pool's announce is bgp)",
      'loadBalancer.pools[2].interfaces[0]: must be an interface name (no whitespace, "/" or ":")',
      'loadBalancer.pools[2].interfaces[1]: must be at most 15 characters (a Linux interface name)',
    ]);
  });
});

describe('electAddresses', () => {
  test('only addresses of announce: l2 pools, each with its rendezvous winner among the eligible nodes', () => {
    const elections = electAddresses(view({
      services: [service('web', ['198.51.100.200', '2001:db8:1::200']), service('bgp', ['203.0.113.100']), service('none', ['203.0.113.64']), service('foreign', ['203.0.113.250'])],
    }));
    expect(elections.map((e) => [e.address, e.pool.name, e.owner])).toEqual([
      ['198.51.100.200', 'lan', electNode('198.51.100.200', NODES)],
      ['2001:db8:1::200', 'lan', electNode('2001:db8:1::200', NODES)],
    ]);
  });

  test('a service that is not a LoadBalancer, has no address yet, or belongs to another load-balancer class is not announced', () => {
    const foreign = service('foreign', ['198.51.100.201']);
    foreign.spec!.loadBalancerClass = 'example.com/other';
    expect(electAddresses(view({ services: [service('np', ['198.51.100.200'], { type: 'NodePort' }), service('pending', []), foreign] }))).toEqual([]);
    // A class listed in loadBalancer.classes is edge-ccm's own.
    expect(electAddresses(view({ services: [foreign], classes: ['example.com/other'] })).map((e) => e.address)).toEqual(['198.51.100.201']);
  });

  test('not Ready, excluded, tainted for deletion, outside the node selector, or speaker dead: not eligible', () => {
    const nodes = [
      node('ready', { labels: { site: 'a' } }),
      node('notready', { ready: false, labels: { site: 'a' } }),
      node('excluded', { labels: { site: 'a', 'node.kubernetes.io/exclude-from-external-load-balancers': 'true' } }),
      node('included', { labels: { site: 'a', 'node.kubernetes.io/exclude-from-external-load-balancers': 'false' } }),
      node('autoscaled', { labels: { site: 'a' }, taint: 'ToBeDeletedByClusterAutoscaler' }),
      node('elsewhere', { labels: { site: 'b' } }),
      node('silent', { labels: { site: 'a' } }),
    ];
    const alive = new Set(nodes.map((n) => n.metadata!.name!).filter((n) => n !== 'silent'));
    const [lan, side] = electAddresses(view({ nodes, alive, services: [service('web', ['198.51.100.200', '203.0.113.201'])] }));
    expect(lan!.eligible).toEqual(['elsewhere', 'included', 'ready']);
    expect(side!.eligible).toEqual(['included', 'ready']);
    expect(side!.owner).toBe(electNode('203.0.113.201', ['included', 'ready'])!);
  });

  test('no eligible node: no owner, so nobody answers', () => {
    const [e] = electAddresses(view({ alive: new Set(), services: [service('web', ['198.51.100.200'])] }));
    expect(e!.owner).toBeUndefined();
  });

  test('externalTrafficPolicy Local: only nodes with a ready endpoint; the owner follows the endpoints', () => {
    const web = service('web', ['198.51.100.201'], { local: true });
    const on = (...nodes: string[]) => electAddresses(view({ services: [web], endpointSlices: [slice('web', nodes.map((n) => ({ node: n })))] }))[0]!;
    expect(on().eligible).toEqual([]);
    expect(on('n2').owner).toBe('n2');
    expect(on('n3').owner).toBe('n3');
    expect(on('n2', 'n4').owner).toBe(electNode('198.51.100.201', ['n2', 'n4'])!);
    const notReady = electAddresses(view({ services: [web], endpointSlices: [slice('web', [{ node: 'n1', ready: false }, { node: 'n2', ready: true }])] }))[0]!;
    expect(notReady.eligible).toEqual(['n2']);
  });

  test('a shared address lists every service holding it', () => {
    const [e] = electAddresses(view({ services: [service('a', ['198.51.100.202']), service('b', ['198.51.100.202'])] }));
    expect(e!.services).toEqual(['default/a', 'default/b']);
  });

  test('every speaker computes the same owners whatever order it lists things in', () => {
    const services = Array.from({ length: 11 }, (_, i) => service(`s${i}`, [`198.51.100.${200 + i}`]));
    const a = electAddresses(view({ services }));
    const b = electAddresses(view({ services: [...services].reverse(), nodes: NODES.map((n) => node(n)).reverse() }));
    expect(b.map((e) => [e.address, e.owner])).toEqual(a.map((e) => [e.address, e.owner]));
    // Spread: with 11 addresses over 4 nodes, more than one node announces.
    expect(new Set(a.map((e) => e.owner)).size).toBeGreaterThan(1);
  });
});

describe('announcementTable', () => {
  const elections = electAddresses(view({ services: [service('web', ['198.51.100.200', '2001:db8:1::200', '203.0.113.201'])], nodes: NODES.map((n) => node(n, { labels: { site: 'a' } })) }));

  test('standby: the interfaces of the IPv4 addresses another node owns and this one may take over', () => {
    const v4 = elections.filter((e) => e.ip.family === 4);
    for (const self of NODES) {
      const expected = new Set(v4.filter((e) => e.owner !== self).map((e) => (e.pool.name === 'side' ? 'eth1' : 'eth0')));
      expect([...standbyInterfaces(elections, self, () => 'eth0')].sort()).toEqual([...expected].sort());
    }
    // Not eligible (not alive): no standby.
    const without = electAddresses(view({ services: [service('web', ['198.51.100.200'])], alive: new Set(['n1']) }));
    expect([...standbyInterfaces(without, 'n2', () => 'eth0')]).toEqual([]);
  });

  test("this node's addresses on its pool's interfaces, or on the interface of the address's subnet", () => {
    for (const self of NODES) {
      const { table, unplaced } = announcementTable(elections, self, (ip) => (ip.family === 4 ? 'eth0' : 'eth0'));
      const mine = elections.filter((e) => e.owner === self);
      expect([...table.values()].flat().sort()).toEqual(mine.map((e) => e.address).sort());
      for (const e of mine) expect(table.get(e.pool.name === 'side' ? 'eth1' : 'eth0')).toContain(e.address);
      expect(unplaced).toEqual([]);
    }
  });

  test('no interface on the subnet and no list: unplaced, answered nowhere', () => {
    const owner = elections.find((e) => e.address === '198.51.100.200')!.owner!;
    const { table, unplaced } = announcementTable(elections, owner, () => undefined);
    expect([...table.values()].flat()).not.toContain('198.51.100.200');
    expect(unplaced).toContain('198.51.100.200');
  });
});

describe('subnetInterface', () => {
  const ifaces = {
    lo: [{ address: '127.0.0.1', cidr: '127.0.0.1/8', internal: true, family: 'IPv4', netmask: '', mac: '' }],
    eth0: [{ address: '198.51.100.11', cidr: '198.51.100.11/24', internal: false, family: 'IPv4', netmask: '', mac: '' }, { address: '2001:db8:1::b', cidr: '2001:db8:1::b/64', internal: false, family: 'IPv6', netmask: '', mac: '', scopeid: 0 }],
    kube: [{ address: '198.51.100.200', cidr: '198.51.100.200/32', internal: false, family: 'IPv4', netmask: '', mac: '' }],
    eth1: [{ address: '198.51.100.130', cidr: '198.51.100.130/25', internal: false, family: 'IPv4', netmask: '', mac: '' }],
  } as unknown as NodeJS.Dict<import('node:os').NetworkInterfaceInfo[]>;
  test('the longest prefix holding the address; host routes and loopback never', () => {
    expect(subnetInterface(parseIP('198.51.100.200')!, ifaces)).toBe('eth1');
    expect(subnetInterface(parseIP('198.51.100.20')!, ifaces)).toBe('eth0');
    expect(subnetInterface(parseIP('2001:db8:1::200')!, ifaces)).toBe('eth0');
    expect(subnetInterface(parseIP('203.0.113.1')!, ifaces)).toBeUndefined();
    expect(subnetInterface(parseIP('127.0.0.2')!, ifaces)).toBeUndefined();
  });
});

describe('reassignedAddresses', () => {
  const held = (address: string, services: string[]) => ({ address, services }) as AddressElection;
  test('an address now held only by services that did not hold it before is a new assignment', () => {
    const before = [held('198.51.100.1', ['ns/taken']), held('198.51.100.2', ['ns/a']), held('198.51.100.3', ['ns/b', 'ns/c'])];
    const now = [held('198.51.100.1', ['ns/once']), held('198.51.100.2', ['ns/a']), held('198.51.100.3', ['ns/c', 'ns/d']), held('198.51.100.4', ['ns/e'])];
    // .3 keeps one of its services (shared, one left): the same assignment; .4 was free: new, but not "re"-assigned.
    expect([...reassignedAddresses(before, now)]).toEqual(['198.51.100.1']);
  });
});
