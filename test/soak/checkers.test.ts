import { CONFIG_REPAIR_GRACE_MS, refusedBrokenConfig } from './replicas.ts';
import { describe, expect, test } from 'bun:test';
import type { V1Node, V1Service } from '@kubernetes/client-node';
import { auditTime } from './audit-tail.ts';
import { bgpConditions, DeadHopWatch, l2Conditions, nodeBgpConditions, TwoMacWatch, type DeadHop, type RibPathView, type TwoMacEpisode } from './check-network.ts';
import { Persistence, serviceConditions } from './check-services.ts';
import { insertSorted, judgeWrite, type LeaseWrite } from './check-terms.ts';
import { parseSoakArgs } from './options.ts';
import { Random } from './random.ts';
import { GROUP_LABEL, World } from './world.ts';

/** The soak's checkers must be able to fail: each rule is shown catching what it is for. */

describe('writes against lease terms', () => {
  const lease = (t: number, user: string, holder = user): LeaseWrite => ({ t, user, holder, durationMs: 6000 });
  const write = (t: number, user: string) => ({ t, user, verb: 'patch', what: 'services/status ns/a', code: 200 });
  const history = [lease(1000, 'a'), lease(2000, 'a'), lease(3000, 'a'), lease(12_000, 'b'), lease(13_000, 'b')];

  test('a write inside the holder term is fine', () => {
    expect(judgeWrite(history, write(3500, 'a'), 1000).ok).toBe(true);
    expect(judgeWrite(history, write(12_500, 'b'), 1000).ok).toBe(true);
  });

  test('a write after the lease expired (a paused leader waking up) is a violation', () => {
    // a renewed at 3000 with 6 s: held until 9000, b took over at 12000.
    const v = judgeWrite(history, write(10_500, 'a'), 1000);
    expect(v.ok).toBe(false);
    expect(v.reason).toContain('expired');
  });

  test('a write after another replica took over is a violation even within the old lease duration', () => {
    const h = [lease(1000, 'a'), lease(2000, 'b')];
    const v = judgeWrite(h, write(4000, 'a'), 1000);
    expect(v.ok).toBe(false);
    expect(v.reason).toContain('b took the lease over');
  });

  test('a write after its own release is a violation; within the tolerance a near miss', () => {
    const h = [lease(1000, 'a'), lease(2000, 'a', '')];
    expect(judgeWrite(h, write(3500, 'a'), 1000).ok).toBe(false);
    const near = judgeWrite(h, write(2500, 'a'), 1000);
    expect(near).toMatchObject({ ok: true, nearMiss: true });
  });

  test('a replica that never held the lease may not write', () => {
    expect(judgeWrite(history, write(5000, 'c'), 1000)).toMatchObject({ ok: false });
  });

  test('lease writes arriving out of order are kept sorted', () => {
    const h: LeaseWrite[] = [];
    for (const t of [3000, 1000, 2000]) insertSorted(h, lease(t, 'a'));
    expect(h.map((x) => x.t)).toEqual([1000, 2000, 3000]);
  });

  test('audit timestamps keep their microseconds', () => {
    expect(auditTime('2026-01-02T03:04:05.123456Z')).toBeCloseTo(Date.parse('2026-01-02T03:04:05Z') + 123.456, 3);
  });
});

describe('service invariants', () => {
  let uid = 0;
  const svc = (ns: string, name: string, ip: string | undefined, opts: { key?: string; ports?: [string, number][]; type?: string; finalizer?: boolean; deleting?: boolean; refused?: 'current' | 'older' } = {}): V1Service => ({
    metadata: {
      namespace: ns, name, uid: `u${++uid}`, generation: 3,
      annotations: opts.key ? { 'edge-ccm.io/allow-shared-ip': opts.key } : {},
      finalizers: opts.finalizer ? ['service.kubernetes.io/load-balancer-cleanup'] : [],
      ...(opts.deleting ? { deletionTimestamp: new Date() } : {}),
    },
    spec: { type: opts.type ?? 'LoadBalancer', ports: (opts.ports ?? [['TCP', 80]]).map(([protocol, port]) => ({ protocol, port })) },
    status: {
      ...(ip ? { loadBalancer: { ingress: [{ ip }] } } : {}),
      // The controller refused the spec of that generation (e.g. a requested address outside its pools).
      ...(opts.refused ? { conditions: [{ type: 'edge-ccm.io/AddressAssigned', status: 'False', reason: 'RequestedAddressNotInPool', message: 'refused', lastTransitionTime: new Date(), observedGeneration: opts.refused === 'current' ? 3 : 2 }] } : {}),
    },
  });
  const kinds = (services: V1Service[], warned: string[] = []) => serviceConditions(services, new Set(warned)).conditions.map((c) => c.kind);

  test('two services on one address without a common key conflict', () => {
    expect(kinds([svc('a', 'x', '203.0.113.5'), svc('a', 'y', '203.0.113.5')])).toEqual(['address-conflict']);
  });

  test('sharers with one key and distinct ports do not; a common port does', () => {
    expect(kinds([svc('a', 'x', '203.0.113.5', { key: 'k' }), svc('a', 'y', '203.0.113.5', { key: 'k', ports: [['UDP', 80]] })])).toEqual([]);
    expect(kinds([svc('a', 'x', '203.0.113.5', { key: 'k' }), svc('a', 'y', '203.0.113.5', { key: 'k' })])).toEqual(['address-conflict']);
  });

  test('one key in two namespaces shares only in the cross-namespace pool', () => {
    expect(kinds([svc('a', 'x', '203.0.113.5', { key: 'k' }), svc('b', 'y', '203.0.113.5', { key: 'k', ports: [['TCP', 443]] })])).toEqual(['address-conflict']);
    expect(kinds([svc('a', 'x', '203.0.113.130', { key: 'k' }), svc('b', 'y', '203.0.113.130', { key: 'k', ports: [['TCP', 443]] })])).toEqual([]);
  });

  test("a service whose current spec was refused keeps its last applied terms: its new key is not judged yet, a port clash still is", () => {
    // Shared under one key, then y's key changed in the same edit as a request the controller refused.
    expect(kinds([svc('a', 'x', '203.0.113.5', { key: 'k2' }), svc('a', 'y', '203.0.113.5', { key: 'k1', ports: [['TCP', 443]], refused: 'current' })])).toEqual([]);
    // A refusal of an older generation says nothing about the current spec.
    expect(kinds([svc('a', 'x', '203.0.113.5', { key: 'k2' }), svc('a', 'y', '203.0.113.5', { key: 'k1', ports: [['TCP', 443]], refused: 'older' })])).toEqual(['address-conflict']);
    // Both serving one port on one address clashes in the data plane, whatever the allocator kept.
    expect(kinds([svc('a', 'x', '203.0.113.5', { key: 'k2' }), svc('a', 'y', '203.0.113.5', { key: 'k1', refused: 'current' })])).toEqual(['address-conflict']);
  });

  test('a service without address needs a Warning event', () => {
    const s = svc('a', 'x', undefined);
    expect(kinds([s])).toEqual(['no-address-no-warning']);
    expect(kinds([s], [s.metadata!.uid!])).toEqual([]);
  });

  test('a finalizer on a deleted service or a service no longer a LoadBalancer is left over', () => {
    expect(kinds([svc('a', 'x', '203.0.113.5', { finalizer: true, deleting: true })])).toEqual(['finalizer-left']);
    expect(kinds([svc('a', 'x', undefined, { finalizer: true, type: 'ClusterIP' })])).toEqual(['finalizer-left']);
    expect(kinds([svc('a', 'x', '203.0.113.5', { finalizer: true })])).toEqual([]);
  });

  test('a condition becomes a violation only when it lasts the settle time, and once; its end is told with how long it lasted', () => {
    const ended: [string, number][] = [];
    const p = new Persistence(1000, (c, ms) => ended.push([c.key, ms]));
    const c = { key: 'k', kind: 'address-conflict' as const, detail: 'd' };
    expect(p.observe([c], 0)).toEqual([]);
    expect(p.observe([c], 999)).toEqual([]);
    expect(p.observe([c], 1000).map((v) => v.lastedMs)).toEqual([1000]);
    expect(p.observe([c], 5000)).toEqual([]);
    // Gone, then back: its clock starts again.
    expect(p.observe([], 6000)).toEqual([]);
    expect(p.observe([{ ...c, key: 'k2' }], 6000)).toEqual([]);
    expect(ended).toEqual([['k', 6000]]);
  });
});

describe('network invariants', () => {
  const lb = (name: string, ips: string[], extra: Partial<V1Service['metadata']> = {}): V1Service => ({
    metadata: { name, namespace: 'soak-a', uid: name, ...extra },
    spec: { type: 'LoadBalancer', ports: [{ port: 80, protocol: 'TCP' }] },
    status: { loadBalancer: { ingress: ips.map((ip) => ({ ip })) } },
  });
  const node = (name: string, address?: string, podCIDR?: string): V1Node => ({
    metadata: { name, labels: { [GROUP_LABEL]: 'static' } },
    spec: podCIDR ? { podCIDRs: [podCIDR] } : {},
    status: address ? { addresses: [{ type: 'InternalIP', address }] } : {},
  });
  const path = (prefix: string, neighbor = '198.51.100.2', stale = false): RibPathView => ({ prefix, neighbor, stale });
  const base = { nodes: [node('s-01', '198.51.100.21', '203.0.113.162/31'), node('s-02', undefined, '203.0.113.164/31')], leader: '198.51.100.2', extraPool: false, excluded: [], judgeMissing: true };
  const kinds = (r: { conditions: { kind: string; key: string }[] }) => r.conditions.map((c) => c.key).sort();

  test('the replicas\' router holding exactly the pod CIDRs of nodes with an address, from the leader, is clean; a load-balancer address there is a stray (the nodes announce those)', () => {
    const r = bgpConditions({ ...base, services: [lb('a', ['203.0.113.5']), lb('l2', ['198.51.100.240'])], paths: [path('203.0.113.162/31')] });
    expect(r.conditions).toEqual([]);
    expect(r.checks).toBe(2);
    expect(kinds(bgpConditions({ ...base, services: [lb('a', ['203.0.113.5'])], paths: [path('203.0.113.5/32'), path('203.0.113.162/31')] }))).toEqual(['bgp-unexpected:203.0.113.5/32:198.51.100.2']);
  });

  test('a missing pod CIDR, a stray prefix, and a path of another replica are each a condition; missing is not judged while told not to', () => {
    const r = bgpConditions({ ...base, services: [], paths: [path('203.0.113.9/32'), path('203.0.113.162/31', '198.51.100.3', true)] });
    expect(kinds(r)).toEqual(['bgp-missing:203.0.113.162/31', 'bgp-not-leader:198.51.100.3', 'bgp-unexpected:203.0.113.9/32:198.51.100.2']);
    expect(bgpConditions({ ...base, services: [], paths: [], judgeMissing: false }).conditions).toEqual([]);
    // No leader: every expected prefix is missing, and a path of any replica is another's.
    expect(kinds(bgpConditions({ ...base, leader: undefined, services: [], paths: [path('203.0.113.162/31')] }))).toEqual(['bgp-missing:203.0.113.162/31', 'bgp-not-leader:198.51.100.2']);
  });

  describe('the nodes\' router (announceFrom: nodes)', () => {
    const nodesBase = { serving: ['198.51.100.11', '198.51.100.12'], extraPool: false, excluded: [], judgeMissing: true };
    const table = (entries: [string, string[]][]) => new Map(entries);

    test('each held address through each serving node is clean; a path missing through one serving node, or a stray prefix, is a condition', () => {
      expect(nodeBgpConditions({ ...nodesBase, services: [lb('a', ['203.0.113.5'])], table: table([['203.0.113.5/32', ['198.51.100.11', '198.51.100.12']]]) }).conditions).toEqual([]);
      const r = nodeBgpConditions({ ...nodesBase, services: [lb('a', ['203.0.113.5'])], table: table([['203.0.113.5/32', ['198.51.100.11']], ['203.0.113.9/32', ['198.51.100.12']]]) });
      expect(kinds(r)).toEqual(['bgp-node-missing:203.0.113.5/32:198.51.100.12', 'bgp-unexpected:203.0.113.9/32:nodes']);
      // A node not serving (dead, drained) is not expected; missing is not judged while told not to.
      expect(nodeBgpConditions({ ...nodesBase, serving: ['198.51.100.11'], services: [lb('a', ['203.0.113.5'])], table: table([['203.0.113.5/32', ['198.51.100.11']]]) }).conditions).toEqual([]);
      expect(nodeBgpConditions({ ...nodesBase, judgeMissing: false, services: [lb('a', ['203.0.113.5'])], table: table([]) }).conditions).toEqual([]);
    });

    test('a deleted service\'s address must be gone; an address of the extra pool taken out of the file may linger, and is not expected', () => {
      const deleting = lb('a', ['203.0.113.5'], { deletionTimestamp: new Date() });
      expect(kinds(nodeBgpConditions({ ...nodesBase, services: [deleting], table: table([['203.0.113.5/32', ['198.51.100.11']]]) }))).toEqual(['bgp-unexpected:203.0.113.5/32:nodes']);
      expect(nodeBgpConditions({ ...nodesBase, services: [lb('x', ['203.0.113.70'])], table: table([['203.0.113.70/32', ['198.51.100.11']]]) }).conditions).toEqual([]);
      expect(nodeBgpConditions({ ...nodesBase, services: [lb('x', ['203.0.113.70'])], table: table([]) }).conditions).toEqual([]);
    });

    test('a dead node\'s next hop seen later than the limit after its death is a violation, once per death; its withdrawal time is told once', () => {
      const violations: DeadHop[] = [];
      const withdrawn: [string, number][] = [];
      const watch = new DeadHopWatch(1_200, (d) => violations.push(d), (node, ms) => withdrawn.push([node, ms]));
      const both = table([['203.0.113.5/32', ['198.51.100.11', '198.51.100.12']]]);
      const one = table([['203.0.113.5/32', ['198.51.100.12']]]);
      watch.observe(both, new Map(), 0);
      expect(watch.observe(both, new Map([['198.51.100.11', 100]]), 1_000)).toBe(1);
      watch.observe(both, new Map([['198.51.100.11', 100]]), 1_300);
      expect(violations).toEqual([]);
      watch.observe(both, new Map([['198.51.100.11', 100]]), 1_400);
      watch.observe(both, new Map([['198.51.100.11', 100]]), 1_600);
      expect(violations).toEqual([{ node: '198.51.100.11', prefixes: ['203.0.113.5/32'], deadSince: 100, lateMs: 1_300 }]);
      watch.observe(one, new Map([['198.51.100.11', 100]]), 1_800);
      watch.observe(one, new Map([['198.51.100.11', 100]]), 2_000);
      expect(withdrawn).toEqual([['198.51.100.11', 1_700]]);
      // Back, then dead again: a new death, judged afresh; withdrawn in time, no violation.
      watch.observe(both, new Map(), 5_000);
      watch.observe(one, new Map([['198.51.100.11', 5_100]]), 5_700);
      expect(violations.length).toBe(1);
      expect(withdrawn).toEqual([['198.51.100.11', 1_700], ['198.51.100.11', 600]]);
      // A node dead with no next hop before it died tells no withdrawal time.
      watch.observe(one, new Map([['198.51.100.11', 9_000]]), 9_500);
      expect(withdrawn.length).toBe(2);
    });
  });

  test('L2: a held address answered once is clean; silent, twice, or answered though unheld are conditions', () => {
    const services = [lb('a', ['198.51.100.240', '2001:db8:1::240']), lb('b', ['198.51.100.241']), lb('c', ['198.51.100.242'])];
    const answers = new Map<string, string[]>([
      ['198.51.100.240', ['02:00:5e:01:00:0b']], ['2001:db8:1::240', ['02:00:5e:01:00:0c']],
      ['198.51.100.241', []], ['198.51.100.242', ['02:00:5e:01:00:0b', '02:00:5e:01:00:0c']], ['198.51.100.243', ['02:00:5e:01:00:0c']],
    ]);
    const r = l2Conditions({ services, answers, speakerOf: (m) => m, judgeSilent: true });
    expect(kinds(r)).toEqual(['l2-double:198.51.100.242', 'l2-silent:198.51.100.241', 'l2-stray:198.51.100.243']);
    expect(kinds(l2Conditions({ services, answers, speakerOf: (m) => m, judgeSilent: false }))).toEqual(['l2-double:198.51.100.242', 'l2-stray:198.51.100.243']);
  });
});

describe('node deletions against the inventory', () => {
  test('a node deleted while its machine was listed throughout the tolerance before is a violation', () => {
    const world = new World(2, 0, 0);
    expect(world.deletionProblem('s-01', 60_000, 10_000)).toContain('in the inventory');
    world.setPresent('s-01', false, 100_000);
    expect(world.deletionProblem('s-01', 125_000, 10_000)).toBeUndefined(); // gone 25 s before: fine
    expect(world.deletionProblem('s-01', 105_000, 10_000)).toBeUndefined(); // left inside the window: not judged
    world.setPresent('s-01', true, 130_000); // came back
    expect(world.deletionProblem('s-01', 135_000, 10_000)).toBeUndefined(); // the answer may predate the return
    expect(world.deletionProblem('s-01', 141_000, 10_000)).toContain('in the inventory');
    expect(world.deletionProblem('unknown-node', 141_000, 10_000)).toBeUndefined();
  });
});

describe('soak options and seed', () => {
  test('one seed gives one sequence', () => {
    const a = new Random(42);
    const b = new Random(42);
    expect(Array.from({ length: 5 }, () => a.int(0, 1e6))).toEqual(Array.from({ length: 5 }, () => b.int(0, 1e6)));
  });

  test('flags are checked', () => {
    expect(parseSoakArgs(['--seed', '7', '--minutes=5', '--profile', 'ci'])).toMatchObject({ seed: 7, minutes: 5, profile: { name: 'ci' } });
    expect(() => parseSoakArgs(['--profile', 'huge'])).toThrow('--profile: expected ci or full');
    expect(() => parseSoakArgs(['--seed', '-1'])).toThrow('--seed');
    expect(() => parseSoakArgs(['--bogus'])).toThrow('unknown argument');
    // Two MACs for one probe: never, unless a run says otherwise (and says so).
    expect(parseSoakArgs([]).l2TwoMacsToleranceMs).toBe(0);
    expect(parseSoakArgs(['--l2-two-macs-tolerance-ms', '500']).l2TwoMacsToleranceMs).toBe(500);
    expect(() => parseSoakArgs(['--l2-two-macs-tolerance-ms', '-1'])).toThrow('--l2-two-macs-tolerance-ms: expected a whole number');
  });
});

describe('never two MACs for one address (the prober\'s rounds)', () => {
  const A = '198.51.100.240';
  const round = (r: number, macs: string[]) => ({ round: r, sentAt: 1000 + r * 100, answers: new Map([[A, macs], ['198.51.100.241', []]]) });
  const watch = (toleranceMs: number) => {
    const violations: TwoMacEpisode[] = [];
    const ended: TwoMacEpisode[] = [];
    const w = new TwoMacWatch(toleranceMs, 100, (m) => `node-of-${m}`, (e) => violations.push(e), (e) => ended.push(e));
    return { w, violations, ended };
  };

  test('zero tolerance: the first round in which two MACs answer one probe is a violation, reported once per episode', () => {
    const { w, violations, ended } = watch(0);
    expect(w.observe(round(1, ['m1']))).toBe(2);
    w.observe(round(2, ['m1', 'm2']));
    expect(violations).toEqual([{ address: A, who: 'node-of-m1 (m1), node-of-m2 (m2)', firstAt: 1200, lastedMs: 100, rounds: 1 }]);
    w.observe(round(3, ['m2', 'm1']));
    w.observe(round(4, ['m2']));
    expect(violations).toHaveLength(1);
    expect(ended).toEqual([{ address: A, who: 'node-of-m1 (m1), node-of-m2 (m2)', firstAt: 1200, lastedMs: 200, rounds: 2 }]);
    // A later episode is another violation.
    w.observe(round(9, ['m3', 'm2']));
    expect(violations).toHaveLength(2);
    expect(w.current().map((e) => e.rounds)).toEqual([1]);
  });

  test('a tolerance lets an episode up to that long pass, and one longer is a violation; a takeover (one MAC, then another) is none', () => {
    const { w, violations } = watch(200);
    w.observe(round(1, ['m1', 'm2']));
    w.observe(round(2, ['m1', 'm2']));
    w.observe(round(3, ['m2']));
    expect(violations).toEqual([]);
    for (let r = 4; r <= 6; r++) w.observe(round(r, ['m1', 'm2']));
    expect(violations.map((e) => e.rounds)).toEqual([3]);
    const quiet = watch(0);
    for (const [r, m] of [[1, 'm1'], [2, 'm1'], [3, 'm2'], [4, 'm2']] as const) quiet.w.observe(round(r, [m]));
    expect(quiet.violations).toEqual([]);
  });
});

describe('an exit refusing a config the soak holds broken', () => {
  const refusal = { code: 2, at: 10_000, logTail: 'error: --cloud-config: invalid proxmox provider configuration:\n/tmp/x/proxmox.yaml:3: clusters[0].url: must be a URL' };
  test('exit 2 with the invalid-configuration message, while held or within the grace after the repair: expected', () => {
    expect(refusedBrokenConfig(refusal, true, -Infinity)).toBe(true);
    expect(refusedBrokenConfig(refusal, false, 10_000 - CONFIG_REPAIR_GRACE_MS + 1)).toBe(true);
    expect(refusedBrokenConfig({ ...refusal, logTail: 'error: speaker: --cloud-config: invalid configuration:\nx.yaml:1: y' }, true, -Infinity)).toBe(true);
  });
  test('any other exit, or one long after the repair: a violation as before', () => {
    expect(refusedBrokenConfig(refusal, false, 10_000 - CONFIG_REPAIR_GRACE_MS - 1)).toBe(false);
    expect(refusedBrokenConfig({ ...refusal, code: 1 }, true, -Infinity)).toBe(false);
    expect(refusedBrokenConfig({ ...refusal, logTail: 'panic: something else' }, true, -Infinity)).toBe(false);
  });
});
