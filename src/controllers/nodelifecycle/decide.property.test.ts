import { describe, expect, test } from 'bun:test';
import fc from 'fast-check';
import type { V1Node } from '@kubernetes/client-node';
import type { Existence } from '../../cloud/types.ts';
import { decide, type NotFoundStreak } from './decide.ts';
import { ProviderSnapshots } from './snapshot.ts';

/**
 * Properties of the lifecycle decision (decide.ts) and of the provider-snapshot rule
 * (snapshot.ts) over random histories, checked against a reference written from
 * docs/operations.md: a Ready node is never judged; a node is deleted only after `threshold`
 * "not found" answers in a row AND a grace period since the first "not found" of a run that only
 * "exists", Ready or a new UID ends; an empty answer never lets a "not found" through; a loss of
 * more than the shrink share only once confirmed over the grace period.
 */

const answerArb = fc.constantFrom<Existence>('exists', 'not-found', 'unknown');

interface Pass {
  dt: number;
  ready: boolean;
  answer: Existence;
  newUid: boolean;
}

const passArb: fc.Arbitrary<Pass> = fc.record({
  dt: fc.integer({ min: 0, max: 20_000 }),
  ready: fc.integer({ min: 0, max: 4 }).map((x) => x === 0),
  answer: answerArb,
  newUid: fc.integer({ min: 0, max: 19 }).map((x) => x === 0),
});

function node(uid: string, ready: boolean, annotations: Record<string, string> = {}): V1Node {
  return {
    metadata: { name: 'n', uid, annotations },
    status: { conditions: [{ type: 'Ready', status: ready ? 'True' : 'False' }] },
  };
}

const optsArb = fc.record({
  deletionPolicy: fc.constantFrom('delete' as const, 'taint' as const, 'never' as const),
  gracePeriodMs: fc.integer({ min: 0, max: 60_000 }),
  notFoundThreshold: fc.integer({ min: 1, max: 5 }),
});

describe('lifecycle decision properties', () => {
  test('over any history, delete happens exactly when the reference says the machine is confirmed gone', () => {
    fc.assert(fc.property(optsArb, fc.array(passArb, { maxLength: 60 }), fc.boolean(), (opts, passes, isProtected) => {
      let streak: NotFoundStreak | undefined;
      let uid = 1;
      // Reference memory, from the documented table.
      let since: number | undefined;
      let count = 0;
      let now = 0;
      for (const p of passes) {
        now += p.dt;
        if (p.newUid) {
          uid++;
          since = undefined;
          count = 0;
        }
        const n = node(`u${uid}`, p.ready, isProtected ? { 'node.edge-ccm.io/protect-from-deletion': 'true' } : {});
        const d = decide(n, p.answer, streak, now, opts);
        streak = d.streak;

        if (p.ready) {
          since = undefined;
          count = 0;
          expect(d.action.kind).toBe('ready');
          continue;
        }
        if (p.answer === 'exists') {
          since = undefined;
          count = 0;
        } else if (p.answer === 'unknown') {
          count = 0;
        } else {
          since ??= now;
          count++;
        }
        const confirmed = p.answer === 'not-found' && now - since! >= opts.gracePeriodMs && count >= opts.notFoundThreshold;
        const expected = !confirmed || isProtected || opts.deletionPolicy === 'never' ? undefined : opts.deletionPolicy === 'delete' ? 'delete' : 'quarantine';
        const acted = d.action.kind === 'delete' || d.action.kind === 'quarantine' ? d.action.kind : undefined;
        expect(acted).toBe(expected);
        if (p.answer !== 'not-found') expect(['exists', 'unknown']).toContain(d.action.kind);
      }
    }), { numRuns: 2000 });
  });
});

describe('taints in the decision', () => {
  const OURS = ['node.cloudprovider.kubernetes.io/shutdown', 'node.edge-ccm.io/instance-not-found'];
  // Others' taints a node carries besides ours: the API server's on every NotReady node, the kubelet's, anyone's.
  const taintArb = fc.constantFrom(...OURS, 'node.kubernetes.io/not-ready', 'node.kubernetes.io/unreachable', 'node.cloudprovider.kubernetes.io/uninitialized', 'example.com/dedicated');

  test('a Ready node loses exactly our taints it carries, an existing NotReady one exactly the quarantine taint; others\' are never touched', () => {
    fc.assert(fc.property(fc.array(taintArb, { maxLength: 6 }), fc.boolean(), (keys, ready) => {
      const n = node('u1', ready);
      n.spec = { taints: keys.map((key) => ({ key, effect: 'NoSchedule' })) };
      const d = decide(n, 'exists', undefined, 0, { deletionPolicy: 'delete', gracePeriodMs: 0, notFoundThreshold: 1 });
      const wanted = ready ? OURS.filter((k) => keys.includes(k)) : keys.includes(OURS[1]!) ? [OURS[1]!] : [];
      expect(d.action).toEqual({ kind: ready ? 'ready' : 'exists', removeTaints: wanted });
      expect(d.streak).toBeUndefined();
    }), { numRuns: 500 });
  });
});

describe('provider snapshot properties', () => {
  const OPTS = { shrinkMaxShare: 0.5, gracePeriodMs: 30_000, confirmReads: 3 };
  const nodes = (n: number) => Array.from({ length: n }, (_, i): V1Node => ({ metadata: { name: `w${i}`, uid: `u${i}` }, spec: { providerID: `proxmox://r/${100 + i}` } }));

  test('answers are only ever made less certain: exists and unknown pass unchanged, not-found may become unknown', () => {
    fc.assert(fc.property(fc.integer({ min: 1, max: 8 }), fc.array(fc.tuple(fc.integer({ min: 0, max: 20_000 }), fc.array(answerArb, { minLength: 8, maxLength: 8 })), { maxLength: 30 }), (n, passes) => {
      const s = new ProviderSnapshots(OPTS);
      const ns = nodes(n);
      let now = 0;
      for (const [dt, raw] of passes) {
        now += dt;
        const answers = new Map(ns.map((x, i) => [x.metadata!.name!, raw[i]!]));
        const j = s.judge(ns, answers, now);
        for (const [name, given] of answers) {
          const out = j.answers.get(name);
          if (given === 'not-found') expect(['not-found', 'unknown']).toContain(out!);
          else expect(out).toBe(given);
        }
        // An empty answer (none found) never lets a not-found through.
        if (!raw.slice(0, n).includes('exists')) expect([...j.answers.values()]).not.toContain('not-found');
      }
    }), { numRuns: 1000 });
  });

  test('after a full list, losing more than the shrink share lets nothing through until the smaller list was read the confirm count over the grace period', () => {
    fc.assert(fc.property(
      fc.integer({ min: 2, max: 12 }),
      fc.double({ min: 0, max: 1, noNaN: true }),
      fc.array(fc.integer({ min: 1, max: 15_000 }), { minLength: 1, maxLength: 20 }),
      (n, lostShare, gaps) => {
        const ns = nodes(n);
        const lost = Math.min(n - 1, Math.max(1, Math.round(lostShare * n))); // at least one machine stays listed
        const s = new ProviderSnapshots(OPTS);
        s.judge(ns, new Map(ns.map((x) => [x.metadata!.name!, 'exists' as Existence])), 0);
        const answers = new Map(ns.map((x, i) => [x.metadata!.name!, (i < lost ? 'not-found' : 'exists') as Existence]));
        const shrunk = lost > OPTS.shrinkMaxShare * n;
        let now = 1;
        const first = now;
        let reads = 0;
        for (const gap of [0, ...gaps]) {
          now += gap;
          reads++;
          const j = s.judge(ns, answers, now);
          const through = [...j.answers.values()].filter((a) => a === 'not-found').length;
          const believed = !shrunk || (now - first >= OPTS.gracePeriodMs && reads >= OPTS.confirmReads);
          expect(through).toBe(believed ? lost : 0);
          if (believed) break; // confirmed: the smaller list is the new baseline from here on
        }
      },
    ), { numRuns: 1000 });
  });
});
