import { describe, expect, test } from 'bun:test';
import type { V1Service } from '@kubernetes/client-node';
import { auditTime } from './audit-tail.ts';
import { Persistence, serviceConditions } from './check-services.ts';
import { insertSorted, judgeWrite, type LeaseWrite } from './check-terms.ts';
import { parseSoakArgs } from './options.ts';
import { Random } from './random.ts';
import { World } from './world.ts';

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
  const svc = (ns: string, name: string, ip: string | undefined, opts: { key?: string; ports?: [string, number][]; type?: string; finalizer?: boolean; deleting?: boolean } = {}): V1Service => ({
    metadata: {
      namespace: ns, name, uid: `u${++uid}`,
      annotations: opts.key ? { 'edge-ccm.io/allow-shared-ip': opts.key } : {},
      finalizers: opts.finalizer ? ['service.kubernetes.io/load-balancer-cleanup'] : [],
      ...(opts.deleting ? { deletionTimestamp: new Date() } : {}),
    },
    spec: { type: opts.type ?? 'LoadBalancer', ports: (opts.ports ?? [['TCP', 80]]).map(([protocol, port]) => ({ protocol, port })) },
    status: ip ? { loadBalancer: { ingress: [{ ip }] } } : {},
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

  test('a condition becomes a violation only when it lasts the settle time, and once', () => {
    const p = new Persistence(1000);
    const c = { key: 'k', kind: 'address-conflict' as const, detail: 'd' };
    expect(p.observe([c], 0)).toEqual([]);
    expect(p.observe([c], 999)).toEqual([]);
    expect(p.observe([c], 1000).map((v) => v.lastedMs)).toEqual([1000]);
    expect(p.observe([c], 5000)).toEqual([]);
    // Gone, then back: its clock starts again.
    expect(p.observe([], 6000)).toEqual([]);
    expect(p.observe([{ ...c, key: 'k2' }], 6000)).toEqual([]);
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
  });
});
