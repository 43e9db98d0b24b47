import { describe, expect, test } from 'bun:test';
import fc from 'fast-check';
import type { V1Service } from '@kubernetes/client-node';
import { AddressAllocator } from './allocator.ts';
import { PoolLoadBalancer } from './load-balancer.ts';
import { AllocationError, addressRequest } from './requests.ts';
import { serviceKey } from '../kube/service-helpers.ts';
import { loadStaticConfig } from '../../providers/static/config-load.ts';
import { silentLogger } from '../log.ts';
import { formatIP } from '../net/ip.ts';

/**
 * Properties of the load-balancer address allocator under random sequences of services
 * assigned, edited and released: no address is ever held by two services that may not share it
 * (the rule written again below from docs/providers/static.md, as an oracle), not even after a
 * refused request, which changes nothing but the addresses its new ports would clash on; and the
 * state rebuilt from the services' status (as a new leader does) is the live state.
 */

const loaded = loadStaticConfig(`loadBalancer:
  pools:
    - name: small
      addresses: [198.51.100.0/29]
    - name: cross
      addresses: [198.51.100.16-198.51.100.19]
      autoAssign: false
      shareAcrossNamespaces: true
    - name: v6
      addresses: ["2001:db8::10-2001:db8::13"]
`);
if (!loaded.ok) throw new Error(JSON.stringify(loaded.errors));
const POOLS = loaded.config.loadBalancer.pools;
const CROSS_ADDRESSES = ['198.51.100.16', '198.51.100.17', '198.51.100.18', '198.51.100.19'];
const CANDIDATES = ['198.51.100.1', '198.51.100.2', '198.51.100.3', '198.51.100.17', '198.51.100.9', '2001:db8::10'];

interface Spec {
  name: string;
  namespace: string;
  key?: string;
  ports: string[];
  local?: string; // externalTrafficPolicy Local with this selector
  requested?: string;
  pool?: 'cross';
  dual: boolean;
}

const specArb: fc.Arbitrary<Spec> = fc.record({
  name: fc.constantFrom('a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'),
  namespace: fc.constantFrom('ns1', 'ns2'),
  key: fc.option(fc.constantFrom('k1', 'k2', ' k1 '), { nil: undefined }),
  ports: fc.uniqueArray(fc.constantFrom('TCP/80', 'TCP/443', 'UDP/53', 'TCP/53'), { minLength: 1, maxLength: 3 }),
  local: fc.option(fc.constantFrom('app=x', 'app=y'), { nil: undefined }),
  requested: fc.option(fc.constantFrom(...CANDIDATES), { nil: undefined, freq: 3 }),
  pool: fc.option(fc.constant('cross' as const), { nil: undefined, freq: 4 }),
  dual: fc.boolean(),
});

type Op = { kind: 'assign'; spec: Spec } | { kind: 'release'; name: string; namespace: string };
const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 4, arbitrary: specArb.map((spec) => ({ kind: 'assign' as const, spec })) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('release' as const), name: fc.constantFrom('a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'), namespace: fc.constantFrom('ns1', 'ns2') }) },
);

function service(s: Spec, created = 0, ingress: string[] = []): V1Service {
  const annotations: Record<string, string> = {};
  if (s.key !== undefined) annotations['edge-ccm.io/allow-shared-ip'] = s.key;
  if (s.pool) annotations['edge-ccm.io/address-pool'] = s.pool;
  if (s.requested) annotations['edge-ccm.io/load-balancer-ips'] = s.requested;
  const [app, value] = (s.local ?? '=').split('=') as [string, string];
  return {
    metadata: { name: s.name, namespace: s.namespace, annotations, creationTimestamp: new Date(Date.UTC(2026, 0, 1, 0, 0, created)) as unknown as Date },
    spec: {
      type: 'LoadBalancer',
      ports: s.ports.map((p) => ({ protocol: p.split('/')[0], port: Number(p.split('/')[1]) })),
      ...(s.local ? { externalTrafficPolicy: 'Local', selector: { [app]: value } } : { selector: { app: s.name } }),
      ipFamilyPolicy: s.dual && !s.requested ? 'PreferDualStack' : 'SingleStack',
      ipFamilies: s.dual && !s.requested ? ['IPv4', 'IPv6'] : s.requested?.includes(':') ? ['IPv6'] : ['IPv4'],
    },
    status: { loadBalancer: { ingress: ingress.map((ip) => ({ ip })) } },
  };
}

/** Why two services may not hold one address (docs/providers/static.md, "Sharing"); undefined when they may. */
function mayNotShare(a: Spec, b: Spec, ip: string): string | undefined {
  const ka = a.key?.trim();
  const kb = b.key?.trim();
  if (!ka || !kb || ka !== kb) return 'keys';
  if (a.namespace !== b.namespace && !CROSS_ADDRESSES.includes(ip)) return 'namespace';
  if (a.ports.some((p) => b.ports.includes(p))) return 'port';
  if ((a.local ?? 'Cluster') !== (b.local ?? 'Cluster')) return 'traffic';
  return undefined;
}

/** The allocator's state as plain data: key -> addresses. */
function snapshot(alloc: AddressAllocator, keys: Iterable<string>): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const k of keys) {
    const a = alloc.assignmentOf(k);
    if (a) out[k] = a.addresses.map(formatIP);
  }
  return out;
}

/**
 * A refused change to a service that holds addresses keeps its addresses and sharing key, but its
 * ports and traffic policy are the new spec's (the data plane serves them either way): what the
 * allocator records, and what a later sharer is judged against (docs/providers/static.md).
 */
function refusedChange(specs: Map<string, Spec>, key: string, refused: Spec): void {
  const held = specs.get(key);
  if (held) specs.set(key, { ...held, ports: refused.ports, local: refused.local });
}

/**
 * The state after a refused change of `key` (its spec in `specs` already the refused one's
 * ports and policy): unchanged, except that the service gives up each address on which it now
 * may not share with another holder (issue 29: kube-proxy would serve one port twice there).
 */
function afterRefusal(before: Record<string, string[]>, specs: Map<string, Spec>, key: string): Record<string, string[]> {
  const mine = before[key];
  if (!mine) return before;
  const others = Object.entries(before).filter(([k]) => k !== key);
  const kept = mine.filter((ip) => !others.some(([k, ips]) => ips.includes(ip) && mayNotShare(specs.get(key)!, specs.get(k)!, ip)));
  const out = { ...before };
  if (kept.length) out[key] = kept;
  else delete out[key];
  return out;
}

const ALL_KEYS = ['ns1', 'ns2'].flatMap((ns) => 'abcdefgh'.split('').map((n) => `${ns}/${n}`));

/** Each address held in the snapshot, and its holders. */
function holdersByAddress(state: Record<string, string[]>): Map<string, string[]> {
  const holders = new Map<string, string[]>();
  for (const [k, ips] of Object.entries(state)) {
    for (const ip of ips) holders.set(ip, [...(holders.get(ip) ?? []), k]);
  }
  return holders;
}

/** Two services holding one address that may not share it, and why. */
interface Clash { ip: string; holders: [string, string]; why: string }

/**
 * The pairs holding one address that may not share it, judged by `specs`. Only a refused edit
 * (the user changed the spec; nothing was handed out) can leave such a pair.
 */
function clashes(state: Record<string, string[]>, specs: Map<string, Spec>): Clash[] {
  const found: Clash[] = [];
  for (const [ip, keys] of holdersByAddress(state)) {
    for (let i = 0; i < keys.length; i++) {
      for (let j = i + 1; j < keys.length; j++) {
        const why = mayNotShare(specs.get(keys[i]!)!, specs.get(keys[j]!)!, ip);
        if (why) found.push({ ip, holders: [keys[i]!, keys[j]!], why });
      }
    }
  }
  return found;
}

/** An address just granted to `key` is shared only with holders that may share it, as the allocator records them. */
function checkGrant(alloc: AddressAllocator, specs: Map<string, Spec>, key: string): void {
  const mine = clashes(snapshot(alloc, ALL_KEYS), specs).filter((c) => c.holders.includes(key));
  if (mine.length) throw new Error(`granted to ${key} an address held by a service that may not share it: ${JSON.stringify(mine)}`);
}

describe('allocator properties', () => {
  test('random operation sequences never leave one address with two services that may not share it; a refused request changes nothing but what it gives up', () => {
    fc.assert(fc.property(fc.array(opArb, { maxLength: 40 }), (ops) => {
      const alloc = new AddressAllocator(POOLS);
      const specs = new Map<string, Spec>(); // what each key was last assigned with
      for (const op of ops) {
        if (op.kind === 'release') {
          alloc.release(`${op.namespace}/${op.name}`);
          continue;
        }
        const svc = service(op.spec);
        const key = serviceKey(svc);
        const before = snapshot(alloc, ALL_KEYS);
        try {
          const got = alloc.assign(addressRequest(svc));
          specs.set(key, op.spec);
          checkGrant(alloc, specs, key);
          if (op.spec.requested) expect(got.addresses.map(formatIP)).toEqual([op.spec.requested.trim()]);
          // One address per family at most, the primary family first.
          expect(new Set(got.addresses.map((ip) => ip.family)).size).toBe(got.addresses.length);
        } catch (e) {
          if (!(e instanceof AllocationError)) throw e;
          refusedChange(specs, key, op.spec);
          expect(snapshot(alloc, ALL_KEYS)).toEqual(afterRefusal(before, specs, key));
        }
        // Refused or not, no two holders of one address may not share it by what they serve now.
        expect(clashes(snapshot(alloc, ALL_KEYS), specs)).toEqual([]);
      }
    }), { numRuns: 400 });
  });

  test('the state rebuilt from the services\' status equals the live state; where refused edits left a clash, the older holder keeps the address', () => {
    fc.assert(fc.property(fc.array(opArb, { maxLength: 40 }), (ops) => {
      const alloc = new AddressAllocator(POOLS);
      const latest = new Map<string, Spec>(); // each service's spec now, whether or not its change was granted
      const created = new Map<string, number>();
      ops.forEach((op, i) => {
        if (op.kind === 'release') {
          const key = `${op.namespace}/${op.name}`;
          alloc.release(key);
          latest.delete(key);
          created.delete(key); // deleted: a later one of that name is a new object
          return;
        }
        const svc = service(op.spec);
        latest.set(serviceKey(svc), op.spec);
        if (!created.has(serviceKey(svc))) created.set(serviceKey(svc), i);
        try {
          alloc.assign(addressRequest(svc));
        } catch (e) {
          if (!(e instanceof AllocationError)) throw e;
        }
      });
      const live = snapshot(alloc, ALL_KEYS);
      // What a new leader reads: every service's spec now, with the status its assignment was written as.
      const services = Object.entries(live).map(([key, ips]) => service(latest.get(key)!, created.get(key)!, ips));
      const fresh = new AddressAllocator(POOLS);
      new PoolLoadBalancer(fresh, () => [], silentLogger).rebuild(services);
      const rebuilt = snapshot(fresh, ALL_KEYS);
      const liveClashes = clashes(live, latest);
      if (!liveClashes.length) {
        expect(rebuilt).toEqual(live);
        return;
      }
      // A refused edit left two holders that may not share by their specs now: the rebuild keeps
      // each address with its oldest holder; the younger gets a new one on its next sync.
      expect(clashes(rebuilt, latest)).toEqual([]);
      const holders = holdersByAddress(live);
      for (const ip of new Set(liveClashes.map((c) => c.ip))) {
        const oldest = holders.get(ip)!.reduce((a, b) => (created.get(a)! <= created.get(b)! ? a : b));
        expect(rebuilt[oldest]).toContain(ip);
      }
      const inClash = new Set(liveClashes.flatMap((c) => c.holders));
      for (const [key, ips] of Object.entries(live)) {
        if (!inClash.has(key)) expect(rebuilt[key]).toEqual(ips);
        else for (const ip of rebuilt[key] ?? []) expect(ips).toContain(ip);
      }
    }), { numRuns: 300 });
  });
});

describe('sharing and port rules', () => {
  const pair = fc.tuple(specArb, specArb).filter(([a, b]) => `${a.namespace}/${a.name}` !== `${b.namespace}/${b.name}`);

  test('a service may request a held address exactly when the sharing rule allows it', () => {
    fc.assert(fc.property(pair, ([a, b]) => {
      const alloc = new AddressAllocator(POOLS);
      const first = { ...a, requested: undefined, dual: false };
      let held: string;
      try {
        held = formatIP(alloc.assign(addressRequest(service(first))).addresses[0]!);
      } catch (e) {
        if (e instanceof AllocationError) return; // e.g. the pool is out of the service's reach
        throw e;
      }
      const second = { ...b, requested: held, dual: false };
      // Requested addresses must be in a pool the service may use: with the pool annotation, that pool only.
      const inReach = second.pool ? CROSS_ADDRESSES.includes(held) : true;
      const allowed = inReach && !mayNotShare(first, second, held);
      let granted: boolean;
      try {
        alloc.assign(addressRequest(service(second)));
        granted = true;
      } catch (e) {
        if (!(e instanceof AllocationError)) throw e;
        granted = false;
      }
      expect(granted).toBe(allowed);
    }), { numRuns: 1000 });
  });

  test('a service with a key joins its key\'s address when it may, and otherwise gets another one and is told why', () => {
    fc.assert(fc.property(pair, ([a, b]) => {
      const alloc = new AddressAllocator(POOLS);
      const first = { ...a, requested: undefined, dual: false, key: 'k1' };
      const second = { ...b, requested: undefined, dual: false, key: 'k1', pool: first.pool };
      let held: string;
      try {
        held = formatIP(alloc.assign(addressRequest(service(first))).addresses[0]!);
      } catch (e) {
        if (e instanceof AllocationError) return;
        throw e;
      }
      const got = alloc.assign(addressRequest(service(second)));
      const joined = formatIP(got.addresses[0]!) === held;
      expect(joined).toBe(!mayNotShare(first, second, held));
      // Told why only when the key's address could not be joined for a port or traffic reason.
      const refused = mayNotShare(first, second, held);
      if (joined || refused === 'namespace') expect(got.notShared).toEqual([]);
      else expect(got.notShared.map((n) => formatIP(n.address))).toEqual([held]);
    }), { numRuns: 1000 });
  });
});
