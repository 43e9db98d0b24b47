import { describe, expect, test } from 'bun:test';
import type { V1LoadBalancerStatus, V1Service } from '@kubernetes/client-node';
import { AddressAllocator } from './allocator.ts';
import { loadStaticConfig } from '../../providers/static/config-load.ts';
import type { PoolConfig } from './config-model.ts';
import { PoolLoadBalancer } from './load-balancer.ts';
import { addressRequest } from './requests.ts';
import { AddressAssignmentError, RetryAfterError } from '../cloud/types.ts';
import { silentLogger } from '../log.ts';
import { formatIP, parseIP } from '../net/ip.ts';
import { subtractRanges, parseAddressRange, normalizeRanges, type AddressRange } from './ranges.ts';
import { RecordingEventRecorder } from '../../test/fakes/event-recorder.ts';

function pools(yaml: string): PoolConfig[] {
  const loaded = loadStaticConfig(`loadBalancer:\n  pools:\n${yaml}`);
  if (!loaded.ok) throw new Error(JSON.stringify(loaded.errors));
  return loaded.config.loadBalancer.pools;
}

const SMALL = pools(`
    - name: small
      addresses: [192.0.2.0/30]
      exclude: [192.0.2.0]
      includeNetworkAndBroadcast: true
    - name: v6
      addresses: ["2001:db8::10-2001:db8::11"]
`);

interface SvcOptions {
  namespace?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  ports?: { port: number; protocol?: string }[];
  loadBalancerIP?: string;
  families?: ('IPv4' | 'IPv6')[];
  policy?: 'SingleStack' | 'PreferDualStack' | 'RequireDualStack';
  ingress?: string[];
  created?: string;
  loadBalancerClass?: string;
  externalTrafficPolicy?: 'Cluster' | 'Local';
  selector?: Record<string, string>;
}

function svc(name: string, o: SvcOptions = {}): V1Service {
  return {
    metadata: { name, namespace: o.namespace ?? 'default', uid: `uid-${name}`, labels: o.labels, annotations: o.annotations, creationTimestamp: o.created as unknown as Date },
    spec: {
      type: 'LoadBalancer',
      ports: (o.ports ?? [{ port: 80 }]).map((p) => ({ port: p.port, protocol: p.protocol ?? 'TCP' })),
      loadBalancerIP: o.loadBalancerIP,
      ipFamilies: o.families ?? ['IPv4'],
      ipFamilyPolicy: o.policy ?? 'SingleStack',
      loadBalancerClass: o.loadBalancerClass,
      externalTrafficPolicy: o.externalTrafficPolicy,
      selector: o.selector,
    },
    status: o.ingress ? { loadBalancer: { ingress: o.ingress.map((ip) => ({ ip })) } } : {},
  };
}

const assign = (a: AddressAllocator, s: V1Service) => a.assign(addressRequest(s)).addresses.map(formatIP);
const ips = (status: { ingress?: { ip?: string }[] } | undefined) => (status?.ingress ?? []).map((i) => i.ip);

describe('address ranges', () => {
  test('subtracting exclusions splits ranges and drops covered ones', () => {
    const r = (s: string) => parseAddressRange(s) as AddressRange;
    const out = subtractRanges([r('10.0.0.0/29')], [r('10.0.0.0'), r('10.0.0.3-10.0.0.4'), r('10.0.0.7')]);
    expect(out.map((x) => [x.first & 255n, x.last & 255n])).toEqual([[1n, 2n], [5n, 6n]]);
    expect(normalizeRanges([r('10.0.0.5-10.0.0.9'), r('10.0.0.0-10.0.0.4')])).toHaveLength(1);
    expect(parseAddressRange('10.0.0.9-10.0.0.1')).toContain('first address is after the last');
    expect(parseAddressRange('10.0.0.1-2001:db8::1')).toContain('one IP family');
  });
});

describe('allocation', () => {
  test('lowest free address first, skipping exclusions, until the pool is exhausted', () => {
    const a = new AddressAllocator(SMALL);
    expect(assign(a, svc('a'))).toEqual(['192.0.2.1']);
    expect(assign(a, svc('b'))).toEqual(['192.0.2.2']);
    expect(assign(a, svc('c'))).toEqual(['192.0.2.3']);
    expect(() => assign(a, svc('d'))).toThrow('pool small exhausted: add addresses');
    // Released addresses are reused, lowest first.
    a.release('default/b');
    expect(assign(a, svc('d'))).toEqual(['192.0.2.2']);
  });

  test('a CIDR pool never hands out its network or broadcast address, requested or not, unless the pool asks for them', () => {
    const a = new AddressAllocator(pools(`
    - name: cidr
      addresses: [10.9.0.0/30, "2001:db8:9::/127"]
`));
    expect(assign(a, svc('a'))).toEqual(['10.9.0.1']);
    expect(assign(a, svc('b'))).toEqual(['10.9.0.2']);
    expect(() => assign(a, svc('c'))).toThrow('pool cidr exhausted: add addresses');
    expect(() => assign(a, svc('d', { loadBalancerIP: '10.9.0.3' }))).toThrow('requested address 10.9.0.3 is not in any pool');
    // A /127 (as /31) is two usable addresses.
    expect(assign(a, svc('e', { families: ['IPv6'] }))).toEqual(['2001:db8:9::']);
    const asked = new AddressAllocator(pools(`
    - name: cidr
      addresses: [10.9.0.0/30]
      includeNetworkAndBroadcast: true
`));
    expect(assign(asked, svc('a'))).toEqual(['10.9.0.0']);
    expect(assign(asked, svc('d', { loadBalancerIP: '10.9.0.3' }))).toEqual(['10.9.0.3']);
  });

  test('an existing assignment is stable across calls', () => {
    const a = new AddressAllocator(SMALL);
    assign(a, svc('a'));
    assign(a, svc('b'));
    a.release('default/a');
    expect(assign(a, svc('b'))).toEqual(['192.0.2.2']);
  });

  test('usage counts per pool', () => {
    const a = new AddressAllocator(SMALL);
    assign(a, svc('a'));
    expect(a.usage()).toEqual([
      { pool: 'small', total: 3n, used: 1 },
      { pool: 'v6', total: 2n, used: 0 },
    ]);
  });

  test('pools by priority, scoped by namespace and selector, autoAssign, and the pool annotation', () => {
    const p = pools(`
    - name: general
      addresses: [10.0.0.0/30]
    - name: team-a
      priority: 10
      namespaces: [team-a]
      addresses: [10.1.0.0/30]
    - name: public
      priority: 20
      serviceSelector: "exposure=public"
      addresses: [10.2.0.0/30]
    - name: reserved
      autoAssign: false
      addresses: [10.3.0.0/30]
`);
    const a = new AddressAllocator(p);
    expect(assign(a, svc('x'))).toEqual(['10.0.0.1']);
    expect(assign(a, svc('y', { namespace: 'team-a' }))).toEqual(['10.1.0.1']);
    expect(assign(a, svc('z', { namespace: 'team-a', labels: { exposure: 'public' } }))).toEqual(['10.2.0.1']);
    expect(assign(a, svc('r', { annotations: { 'edge-ccm.io/address-pool': 'reserved' } }))).toEqual(['10.3.0.1']);
    expect(() => assign(a, svc('q', { annotations: { 'edge-ccm.io/address-pool': 'team-a' } }))).toThrow('address pool team-a does not serve service default/q');
    expect(() => assign(a, svc('q', { annotations: { 'edge-ccm.io/address-pool': 'nope' } }))).toThrow('unknown address pool "nope"');
  });

  test('no pool for a family says so', () => {
    const a = new AddressAllocator(pools(`
    - name: only4
      addresses: [10.0.0.0/30]
`));
    expect(() => assign(a, svc('a', { families: ['IPv6'] }))).toThrow('no IPv6 address pool is available to service default/a');
  });
});

describe('requested addresses', () => {
  test('inside a pool and free: granted', () => {
    const a = new AddressAllocator(SMALL);
    expect(assign(a, svc('a', { loadBalancerIP: '192.0.2.3' }))).toEqual(['192.0.2.3']);
    // The next automatic allocation goes around it.
    expect(assign(a, svc('b'))).toEqual(['192.0.2.1']);
  });

  test('outside every pool, excluded, or in a pool the service may not use: refused, nothing allocated', () => {
    const p = pools(`
    - name: open
      addresses: [192.0.2.0/29]
      exclude: [192.0.2.0]
    - name: team-a
      namespaces: [team-a]
      addresses: [198.51.100.0/29]
`);
    const a = new AddressAllocator(p);
    expect(() => assign(a, svc('a', { loadBalancerIP: '203.0.113.9' }))).toThrow('requested address 203.0.113.9 is not in any pool this service may use (allowed: open)');
    expect(() => assign(a, svc('a', { loadBalancerIP: '192.0.2.0' }))).toThrow('requested address 192.0.2.0 is not in any pool');
    expect(() => assign(a, svc('a', { loadBalancerIP: '198.51.100.1' }))).toThrow('requested address 198.51.100.1 is not in any pool this service may use (allowed: open)');
    expect(() => assign(a, svc('a', { loadBalancerIP: 'not-an-ip' }))).toThrow('invalid address "not-an-ip" in spec.loadBalancerIP');
    expect(a.assignmentOf('default/a')).toBeUndefined();
    expect(a.usage().every((u) => u.used === 0)).toBe(true);
  });

  test('taken by another service: refused, and the holder keeps it', () => {
    const a = new AddressAllocator(SMALL);
    assign(a, svc('a', { loadBalancerIP: '192.0.2.2' }));
    expect(() => assign(a, svc('b', { loadBalancerIP: '192.0.2.2' }))).toThrow('address 192.0.2.2 is already used by service default/a');
    expect(a.assignmentOf('default/b')).toBeUndefined();
    expect(assign(a, svc('a', { loadBalancerIP: '192.0.2.2' }))).toEqual(['192.0.2.2']);
  });

  test('changing the request to a taken address keeps the old assignment', () => {
    const a = new AddressAllocator(SMALL);
    assign(a, svc('a'));
    assign(a, svc('b'));
    expect(() => assign(a, svc('b', { loadBalancerIP: '192.0.2.1' }))).toThrow('already used by service default/a');
    expect(a.assignmentOf('default/b')!.addresses.map(formatIP)).toEqual(['192.0.2.2']);
  });
});

describe('sharing matrix', () => {
  const shared = (name: string, key: string | undefined, ports: { port: number; protocol?: string }[], ip = '192.0.2.1') =>
    svc(name, { loadBalancerIP: ip, ports, annotations: key ? { 'edge-ccm.io/allow-shared-ip': key } : {} });

  test('same key, TCP/53 and UDP/53: shared', () => {
    const a = new AddressAllocator(SMALL);
    expect(assign(a, shared('dns-tcp', 'dns', [{ port: 53, protocol: 'TCP' }]))).toEqual(['192.0.2.1']);
    expect(assign(a, shared('dns-udp', 'dns', [{ port: 53, protocol: 'UDP' }]))).toEqual(['192.0.2.1']);
    expect(a.usage()[0]!.used).toBe(1);
    // Still held after one of them goes.
    a.release('default/dns-tcp');
    expect(() => assign(a, svc('other', { loadBalancerIP: '192.0.2.1' }))).toThrow('already used by service default/dns-udp');
  });

  test('same key, TCP/53 twice: conflict', () => {
    const a = new AddressAllocator(SMALL);
    assign(a, shared('one', 'dns', [{ port: 53, protocol: 'TCP' }]));
    expect(() => assign(a, shared('two', 'dns', [{ port: 53, protocol: 'TCP' }]))).toThrow(
      'address 192.0.2.1 is shared with service default/one, which already uses port TCP/53',
    );
  });

  test('different keys, or a key on one side only: refused', () => {
    const a = new AddressAllocator(SMALL);
    assign(a, shared('one', 'k1', [{ port: 80 }]));
    expect(() => assign(a, shared('two', 'k2', [{ port: 81 }]))).toThrow('their sharing keys differ');
    expect(() => assign(a, shared('three', undefined, [{ port: 82 }]))).toThrow('both need the same edge-ccm.io/allow-shared-ip annotation');
  });

  test('externalTrafficPolicy: all Cluster, or all Local with the same selector (in any key order); never mixed', () => {
    const a = new AddressAllocator(SMALL);
    const dns = (name: string, port: number, protocol: string, extra: SvcOptions = {}) =>
      svc(name, { loadBalancerIP: '192.0.2.1', ports: [{ port, protocol }], annotations: { 'edge-ccm.io/allow-shared-ip': 'dns' }, ...extra });
    const local = (selector: Record<string, string>): SvcOptions => ({ externalTrafficPolicy: 'Local', selector });
    expect(assign(a, dns('tcp', 53, 'TCP', local({ app: 'dns', tier: 'edge' })))).toEqual(['192.0.2.1']);
    expect(assign(a, dns('udp', 53, 'UDP', local({ tier: 'edge', app: 'dns' })))).toEqual(['192.0.2.1']);
    expect(() => assign(a, dns('other-pods', 54, 'TCP', local({ app: 'other' })))).toThrow(
      'whose externalTrafficPolicy or pod selector differs (services sharing an address must all use Cluster, or all Local with the same selector)',
    );
    expect(() => assign(a, dns('cluster', 55, 'TCP', { externalTrafficPolicy: 'Cluster', selector: { app: 'dns', tier: 'edge' } }))).toThrow('externalTrafficPolicy');
    const b = new AddressAllocator(SMALL);
    expect(assign(b, dns('one', 53, 'TCP'))).toEqual(['192.0.2.1']);
    expect(assign(b, dns('two', 53, 'UDP', { externalTrafficPolicy: 'Cluster' }))).toEqual(['192.0.2.1']);
    expect(() => assign(b, dns('three', 54, 'TCP', local({ app: 'dns' })))).toThrow('externalTrafficPolicy');
  });

  test('a rebuild keeps a mixed-policy sharer off the address it claims', () => {
    const a = new AddressAllocator(SMALL);
    const key = { 'edge-ccm.io/allow-shared-ip': 'k' };
    const lb = new PoolLoadBalancer(a, () => [], silentLogger);
    lb.rebuild([
      svc('first', { ingress: ['192.0.2.1'], annotations: key, ports: [{ port: 80 }], created: '2026-01-01T00:00:00Z' }),
      svc('second', { ingress: ['192.0.2.1'], annotations: key, ports: [{ port: 81 }], created: '2026-01-02T00:00:00Z', externalTrafficPolicy: 'Local', selector: { app: 'x' } }),
    ]);
    expect(a.assignmentOf('default/first')!.addresses.map(formatIP)).toEqual(['192.0.2.1']);
    expect(a.assignmentOf('default/second')).toBeUndefined();
  });

  test('automatic allocation with a key joins an address its key holds when ports allow', () => {
    const a = new AddressAllocator(SMALL);
    const auto = (name: string, key: string, port: number, protocol = 'TCP') => svc(name, { ports: [{ port, protocol }], annotations: { 'edge-ccm.io/allow-shared-ip': key } });
    expect(assign(a, auto('tcp', 'dns', 53))).toEqual(['192.0.2.1']);
    expect(assign(a, auto('udp', 'dns', 53, 'UDP'))).toEqual(['192.0.2.1']);
    // Collides on TCP/53: a fresh address instead.
    expect(assign(a, auto('tcp2', 'dns', 53))).toEqual(['192.0.2.2']);
    // Another key never joins.
    expect(assign(a, auto('web', 'web', 80))).toEqual(['192.0.2.3']);
  });

  test('a refused change keeps the address, but the ports it serves now are what later sharers are judged against', () => {
    // Found by the soak (seed 3699472322): an edit that added UDP/53 was refused (its requested
    // address is in no pool), the service kept its address, and a later UDP/53 sharer joined it:
    // both served UDP/53 on one address (kube-proxy programs the spec's ports either way).
    const a = new AddressAllocator(SMALL);
    const key = { 'edge-ccm.io/allow-shared-ip': 'k' };
    expect(assign(a, svc('first', { ports: [{ port: 8080 }], annotations: key }))).toEqual(['192.0.2.1']);
    const refused = svc('first', { ports: [{ port: 8080 }, { port: 53, protocol: 'UDP' }], annotations: { ...key, 'edge-ccm.io/load-balancer-ips': '198.51.100.40' } });
    expect(() => a.assign(addressRequest(refused))).toThrow('is not in any pool');
    expect(a.assignmentOf('default/first')!.addresses.map(formatIP)).toEqual(['192.0.2.1']);
    const later = a.assign(addressRequest(svc('later', { ports: [{ port: 53, protocol: 'UDP' }], annotations: key })));
    expect(later.addresses.map(formatIP)).toEqual(['192.0.2.2']);
    expect(later.notShared.map((n) => formatIP(n.address))).toEqual(['192.0.2.1']);
  });
});

describe('dual stack', () => {
  test('RequireDualStack gets one address of each family, in family order', () => {
    const a = new AddressAllocator(SMALL);
    expect(assign(a, svc('a', { families: ['IPv6', 'IPv4'], policy: 'RequireDualStack' }))).toEqual(['2001:db8::10', '192.0.2.1']);
  });

  test('RequireDualStack fails when one family is exhausted; PreferDualStack takes what it can', () => {
    const a = new AddressAllocator(SMALL);
    assign(a, svc('v6a', { families: ['IPv6'] }));
    assign(a, svc('v6b', { families: ['IPv6'] }));
    expect(() => assign(a, svc('req', { families: ['IPv4', 'IPv6'], policy: 'RequireDualStack' }))).toThrow('pool v6 exhausted');
    expect(a.assignmentOf('default/req')).toBeUndefined();
    expect(assign(a, svc('pref', { families: ['IPv4', 'IPv6'], policy: 'PreferDualStack' }))).toEqual(['192.0.2.1']);
    // Once an IPv6 address is free, the next ensure adds it and keeps the IPv4 one.
    a.release('default/v6a');
    expect(assign(a, svc('pref', { families: ['IPv4', 'IPv6'], policy: 'PreferDualStack' }))).toEqual(['192.0.2.1', '2001:db8::10']);
  });

  test('SingleStack takes only the primary family', () => {
    const a = new AddressAllocator(SMALL);
    expect(assign(a, svc('a', { families: ['IPv4', 'IPv6'], policy: 'SingleStack' }))).toEqual(['192.0.2.1']);
  });

  test('requested dual-stack addresses by annotation; family mismatches refused', () => {
    const a = new AddressAllocator(SMALL);
    const both = { 'edge-ccm.io/load-balancer-ips': '2001:db8::11, 192.0.2.3' };
    expect(assign(a, svc('a', { families: ['IPv4', 'IPv6'], policy: 'RequireDualStack', annotations: both }))).toEqual(['192.0.2.3', '2001:db8::11']);
    expect(() => assign(a, svc('b', { families: ['IPv4'], annotations: { 'edge-ccm.io/load-balancer-ips': '2001:db8::10' } }))).toThrow(
      "requested address 2001:db8::10 is IPv6 but the service's IP families are IPv4",
    );
    expect(() => assign(a, svc('c', { families: ['IPv4', 'IPv6'], policy: 'RequireDualStack', annotations: { 'edge-ccm.io/load-balancer-ips': '192.0.2.1' } }))).toThrow(
      'lack an IPv6 address',
    );
    expect(() => assign(a, svc('d', { annotations: { 'edge-ccm.io/load-balancer-ips': '192.0.2.1,192.0.2.2' } }))).toThrow('at most one IPv4 address per service');
  });
});

describe('rebuild and races', () => {
  const classes = () => ['edge-ccm.io/static'];

  function balancer(p = SMALL) {
    const allocator = new AddressAllocator(p);
    return { allocator, lb: new PoolLoadBalancer(allocator, classes, silentLogger) };
  }

  test('ensure before the rebuild asks for a retry instead of allocating', async () => {
    const { lb } = balancer();
    const err = await lb.ensureLoadBalancer('c', svc('a'), []).catch((e) => e);
    expect(err).toBeInstanceOf(RetryAfterError);
    expect(await lb.ensureLoadBalancerDeleted('c', svc('a')).catch((e) => e)).toBeInstanceOf(RetryAfterError);
  });

  test('a restart rebuilt from service status gives the same assignment and never allocates twice', async () => {
    const first = balancer();
    first.lb.rebuild([]);
    const services = ['a', 'b', 'c'].map((n) => svc(n));
    const statuses: V1LoadBalancerStatus[] = [];
    for (const s of services) statuses.push(await first.lb.ensureLoadBalancer('c', s, []));
    expect(statuses.map(ips)).toEqual([['192.0.2.1'], ['192.0.2.2'], ['192.0.2.3']]);

    // A new process: the status the controller wrote is the only record. "b" was deleted meanwhile,
    // and a foreign-class service claiming an address is ignored.
    const second = balancer();
    const persisted = services.map((s, i) => svc(s.metadata!.name!, { ingress: ips(statuses[i]) as string[] }));
    const foreign = svc('foreign', { loadBalancerClass: 'other.io/lb', ingress: ['192.0.2.2'] });
    second.lb.rebuild([persisted[0]!, persisted[2]!, foreign]);
    expect(ips(await second.lb.ensureLoadBalancer('c', persisted[2]!, []))).toEqual(['192.0.2.3']);
    expect(ips(await second.lb.ensureLoadBalancer('c', persisted[0]!, []))).toEqual(['192.0.2.1']);
    expect(ips(await second.lb.ensureLoadBalancer('c', svc('new'), []))).toEqual(['192.0.2.2']);
    await expect(second.lb.ensureLoadBalancer('c', svc('newer'), [])).rejects.toThrow('pool small exhausted');
    expect((await second.lb.getLoadBalancer('c', persisted[0]!)).exists).toBe(true);
    expect((await second.lb.getLoadBalancer('c', svc('newer'))).exists).toBe(false);
  });

  test('two statuses claiming one address: the older service keeps it, the other is reassigned', async () => {
    const { lb } = balancer();
    const old = svc('old', { ingress: ['192.0.2.1'], created: '2024-01-01T00:00:00Z' });
    const young = svc('young', { ingress: ['192.0.2.1'], created: '2024-06-01T00:00:00Z' });
    lb.rebuild([young, old]);
    expect(ips(await lb.ensureLoadBalancer('c', old, []))).toEqual(['192.0.2.1']);
    expect(ips(await lb.ensureLoadBalancer('c', young, []))).toEqual(['192.0.2.2']);
  });

  test('an address is released on delete and reused', async () => {
    const { lb, allocator } = balancer();
    lb.rebuild([]);
    await lb.ensureLoadBalancer('c', svc('a'), []);
    await lb.ensureLoadBalancerDeleted('c', svc('a'));
    expect(allocator.assignmentOf('default/a')).toBeUndefined();
    expect(ips(await lb.ensureLoadBalancer('c', svc('b'), []))).toEqual(['192.0.2.1']);
  });

  test('two services racing for one requested address: exactly one gets it', async () => {
    const { lb } = balancer();
    lb.rebuild([]);
    const results = await Promise.allSettled([
      lb.ensureLoadBalancer('c', svc('x', { loadBalancerIP: '192.0.2.2' }), []),
      lb.ensureLoadBalancer('c', svc('y', { loadBalancerIP: '192.0.2.2' }), []),
    ]);
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    const rejected = results.filter((r) => r.status === 'rejected') as PromiseRejectedResult[];
    expect(rejected).toHaveLength(1);
    expect(String(rejected[0]!.reason)).toContain('already used by service');
  });

  test('many services racing for automatic addresses get distinct ones', async () => {
    const { lb } = balancer(pools(`
    - name: big
      addresses: [10.0.0.0/24]
`));
    lb.rebuild([]);
    const statuses = await Promise.all(Array.from({ length: 200 }, (_, i) => lb.ensureLoadBalancer('c', svc(`s${i}`), [])));
    const all = statuses.flatMap(ips);
    expect(all).toHaveLength(200);
    expect(new Set(all).size).toBe(200);
  });
});

describe('sharing keys and namespaces', () => {
  // Ranges, not CIDRs: every address of a range is handed out, whatever the network/broadcast rules.
  const SCOPED = pools(`
    - name: scoped
      addresses: [198.51.100.10-198.51.100.19]
    - name: open
      addresses: [203.0.113.10-203.0.113.19]
      autoAssign: false
      shareAcrossNamespaces: true
`);
  const keyed = (name: string, namespace: string, port: number, extra: SvcOptions = {}) =>
    svc(name, { namespace, ports: [{ port }], ...extra, annotations: { 'edge-ccm.io/allow-shared-ip': 'web', ...extra.annotations } });

  test('a key is scoped to its namespace: the same key in another namespace never joins the address', () => {
    const a = new AddressAllocator(SCOPED);
    expect(assign(a, keyed('victim', 'team-a', 80))).toEqual(['198.51.100.10']);
    // Same namespace, same key, other port: shares.
    expect(assign(a, keyed('sibling', 'team-a', 443))).toEqual(['198.51.100.10']);
    // Another namespace with the same key: a fresh address, automatic or not.
    expect(assign(a, keyed('intruder', 'team-b', 8080))).toEqual(['198.51.100.11']);
    expect(() => assign(a, keyed('asks', 'team-b', 8081, { loadBalancerIP: '198.51.100.10' }))).toThrow(
      'sharing keys are scoped to the namespace, and pool scoped does not set shareAcrossNamespaces',
    );
    expect(a.assignmentOf('team-b/asks')).toBeUndefined();
  });

  test('a rebuild keeps a sharer from another namespace off the address its status claims', () => {
    const a = new AddressAllocator(SCOPED);
    const lb = new PoolLoadBalancer(a, () => [], silentLogger);
    lb.rebuild([
      keyed('victim', 'team-a', 80, { ingress: ['198.51.100.10'], created: '2026-01-01T00:00:00Z' }),
      keyed('intruder', 'team-b', 8080, { ingress: ['198.51.100.10'], created: '2026-01-02T00:00:00Z' }),
    ]);
    expect(a.assignmentOf('team-a/victim')!.addresses.map(formatIP)).toEqual(['198.51.100.10']);
    expect(a.assignmentOf('team-b/intruder')).toBeUndefined();
  });

  test('a pool with shareAcrossNamespaces lets one key share across namespaces', () => {
    const a = new AddressAllocator(SCOPED);
    const open = { annotations: { 'edge-ccm.io/address-pool': 'open' } };
    expect(assign(a, keyed('dns-a', 'team-a', 53, open))).toEqual(['203.0.113.10']);
    expect(assign(a, keyed('dns-b', 'team-b', 54, open))).toEqual(['203.0.113.10']);
    // Still only with the same key.
    expect(() => assign(a, svc('other', { namespace: 'team-b', ports: [{ port: 55 }], annotations: { ...open.annotations, 'edge-ccm.io/allow-shared-ip': 'dns' }, loadBalancerIP: '203.0.113.10' }))).toThrow('their sharing keys differ');
  });
});

describe('an address the key holds but cannot share', () => {
  const RANGE = pools(`
    - name: web
      addresses: [198.51.100.10-198.51.100.19]
`);
  const keyed = (name: string, port: number, namespace = 'default') =>
    svc(name, { namespace, ports: [{ port }], annotations: { 'edge-ccm.io/allow-shared-ip': 'web' } });

  test('a second TCP/80 with the same key gets a fresh address and a Normal AddressNotShared event naming the clash', async () => {
    const recorder = new RecordingEventRecorder();
    const lb = new PoolLoadBalancer(new AddressAllocator(RANGE), () => [], silentLogger);
    lb.reportEventsTo(recorder);
    lb.rebuild([]);
    expect(ips(await lb.ensureLoadBalancer('c', keyed('first', 80), []))).toEqual(['198.51.100.10']);
    expect(ips(await lb.ensureLoadBalancer('c', keyed('second', 80), []))).toEqual(['198.51.100.11']);
    expect(recorder.events).toEqual([{
      kind: 'Service', namespace: 'default', name: 'second', type: 'Normal', reason: 'AddressNotShared',
      message: 'not sharing 198.51.100.10 (edge-ccm.io/allow-shared-ip: web) with service default/first: both use port TCP/80; assigned 198.51.100.11 instead',
    }]);
    // Ensured again, it keeps its address: nothing new to say.
    await lb.ensureLoadBalancer('c', keyed('second', 80), []);
    // A sharer that fits says nothing; a key held only in another namespace is not this key.
    await lb.ensureLoadBalancer('c', keyed('third', 443), []);
    await lb.ensureLoadBalancer('c', keyed('elsewhere', 80, 'team-b'), []);
    expect(recorder.events).toHaveLength(1);
  });
});

describe('a refused spec never keeps an address it clashes on (issue 29, soak seed 3651965050)', () => {
  // The soak's cross-namespace pool: two namespaces may share an address under one key, never one port.
  const CROSS = pools(`
    - name: main
      addresses: [198.51.100.10-198.51.100.19]
    - name: cross
      addresses: [203.0.113.128-203.0.113.143]
      autoAssign: false
      shareAcrossNamespaces: true
`);
  const cross = (name: string, namespace: string, ports: { port: number; protocol?: string }[], extra: SvcOptions = {}) =>
    svc(name, { namespace, ports, ...extra, annotations: { 'edge-ccm.io/allow-shared-ip': 'k1', 'edge-ccm.io/address-pool': 'cross', ...extra.annotations } });
  const UDP53 = { port: 53, protocol: 'UDP' };
  /** An edit the allocator must refuse: a requested address outside the cross pool. */
  const outsidePool = { loadBalancerIP: '198.51.100.12' };

  test('a refused edit that adds a port a co-holder serves gives that address up; the co-holder keeps it', async () => {
    const a = new AddressAllocator(CROSS);
    const lb = new PoolLoadBalancer(a, () => [], silentLogger);
    lb.rebuild([]);
    expect(ips(await lb.ensureLoadBalancer('c', cross('svc-25', 'soak-b', [UDP53]), []))).toEqual(['203.0.113.128']);
    expect(ips(await lb.ensureLoadBalancer('c', cross('svc-36', 'soak-c', [{ port: 80 }]), []))).toEqual(['203.0.113.128']);
    // One edit requests an address outside its pool (refused, the address kept), the next adds UDP/53.
    await expect(lb.ensureLoadBalancer('c', cross('svc-36', 'soak-c', [{ port: 80 }], outsidePool), [])).rejects.toThrow('is not in any pool');
    expect(a.assignmentOf('soak-c/svc-36')!.addresses.map(formatIP)).toEqual(['203.0.113.128']);
    const error = await lb.ensureLoadBalancer('c', cross('svc-36', 'soak-c', [{ port: 80 }, UDP53], outsidePool), []).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AddressAssignmentError);
    // kube-proxy would serve UDP/53 on .128 for both: the refused service holds nothing now, and says so.
    expect(a.holdersOf(parseIP('203.0.113.128')!)).toEqual(['soak-b/svc-25']);
    expect(a.assignmentOf('soak-c/svc-36')).toBeUndefined();
    expect((error as AddressAssignmentError).holds).toEqual({ ingress: [] });
    expect((error as Error).message).toContain('; the service gave up 203.0.113.128, which it shared with service soak-b/svc-25 (both use port UDP/53)');
  });

  test('a refused edit keeps the addresses it still may share: what it holds is what its status says', async () => {
    const a = new AddressAllocator(CROSS);
    const lb = new PoolLoadBalancer(a, () => [], silentLogger);
    lb.rebuild([]);
    await lb.ensureLoadBalancer('c', cross('first', 'soak-b', [UDP53]), []);
    await lb.ensureLoadBalancer('c', cross('second', 'soak-c', [{ port: 80 }]), []);
    const error = await lb.ensureLoadBalancer('c', cross('second', 'soak-c', [{ port: 443 }], outsidePool), []).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AddressAssignmentError);
    expect((error as AddressAssignmentError).holds).toEqual({ ingress: [{ ip: '203.0.113.128' }] });
    expect(a.assignmentOf('soak-c/second')!.addresses.map(formatIP)).toEqual(['203.0.113.128']);
  });

  test('after a rebuild gave the address to the older claimant, the younger one\'s refused spec clears its claim', async () => {
    const a = new AddressAllocator(CROSS);
    const lb = new PoolLoadBalancer(a, () => [], silentLogger);
    // A new leader reads both statuses: svc-36's refused spec clashes with svc-25 on UDP/53.
    lb.rebuild([
      cross('svc-25', 'soak-b', [UDP53], { ingress: ['203.0.113.131'], created: '2026-11-27T03:20:00Z' }),
      cross('svc-36', 'soak-c', [{ port: 80 }, UDP53], { ...outsidePool, ingress: ['203.0.113.131'], created: '2026-11-27T03:22:00Z' }),
    ]);
    expect(a.holdersOf(parseIP('203.0.113.131')!)).toEqual(['soak-b/svc-25']);
    const error = await lb.ensureLoadBalancer('c', cross('svc-36', 'soak-c', [{ port: 80 }, UDP53], { ...outsidePool, ingress: ['203.0.113.131'] }), []).catch((e: unknown) => e);
    // Its status still claims .131 for UDP/53: the controller must write what it holds (nothing).
    expect((error as AddressAssignmentError).holds).toEqual({ ingress: [] });
  });

  test('a rebuild while the config lacks the pool (emptied, cut short) keeps every sharer the status records', () => {
    const a = new AddressAllocator([]);
    const lb = new PoolLoadBalancer(a, () => [], silentLogger);
    lb.rebuild([
      cross('svc-25', 'soak-b', [UDP53], { ingress: ['203.0.113.131'], created: '2026-11-27T03:20:00Z' }),
      cross('svc-36', 'soak-c', [{ port: 80 }], { ingress: ['203.0.113.131'], created: '2026-11-27T03:22:00Z' }),
      cross('svc-37', 'soak-c', [{ port: 443 }], { ingress: ['203.0.113.131'], created: '2026-11-27T03:23:00Z' }),
      // A port clash is judged without the pool too: the older keeps the address.
      cross('svc-38', 'soak-a', [UDP53], { ingress: ['203.0.113.131'], created: '2026-11-27T03:24:00Z' }),
    ]);
    expect(a.holdersOf(parseIP('203.0.113.131')!).sort()).toEqual(['soak-b/svc-25', 'soak-c/svc-36', 'soak-c/svc-37']);
    // The pools come back: nobody else may take a port the sharers serve there.
    a.setPools(CROSS);
    const later = a.assign(addressRequest(cross('later', 'soak-a', [{ port: 80 }])));
    expect(later.addresses.map(formatIP)).toEqual(['203.0.113.128']);
  });
});
