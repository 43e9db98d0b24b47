import { describe, expect, test } from 'bun:test';
import fc from 'fast-check';
import type { PeerReport, SpeakerState } from '../l2/liveness.ts';
import { rankNodes } from '../../net/l2/election.ts';
import { decideVip, type VipDecisionInput } from './decision.ts';

const KEY = '198.51.100.10';
const HOSTS = ['cp1', 'cp2', 'cp3'];
/** The hosts in the VIP's order: FIRST is elected when all are eligible. */
const [FIRST, SECOND, THIRD] = rankNodes(KEY, HOSTS) as [string, string, string];

const report = (state: SpeakerState, view = '', heard = true, refused = false): PeerReport => ({ heard, state, view, refused });

function input(over: Partial<VipDecisionInput> & { self: string }): VipDecisionInput {
  return {
    hosts: HOSTS, key: KEY, warmedUp: true, healthy: true, peers: new Map(), holding: false,
    heardSinceStart: true, probeClear: false, recentlySilent: new Set(), ...over,
  };
}

/** Every peer other than `self` heard, ready, agreeing (digest computed as the self's). */
function agreeingPeers(self: string, names: string[]): Map<string, PeerReport> {
  const digest = decideVip(input({ self, peers: new Map(names.map((n) => [n, report('ready')])) })).digest;
  return new Map(names.map((n) => [n, report('ready', digest)]));
}

describe('decideVip', () => {
  test('all healthy and agreeing: the first in the order takes, the others do not', () => {
    const d1 = decideVip(input({ self: FIRST, peers: agreeingPeers(FIRST, [SECOND, THIRD]) }));
    expect(d1).toMatchObject({ eligible: true, basis: 'quorum', holder: FIRST, hold: true });
    const d2 = decideVip(input({ self: SECOND, peers: agreeingPeers(SECOND, [FIRST, THIRD]) }));
    expect(d2).toMatchObject({ eligible: true, holder: FIRST, hold: false });
  });

  test('an unhealthy API server: not eligible, releases, even while it hears everyone', () => {
    const d = decideVip(input({ self: FIRST, healthy: false, holding: true, peers: agreeingPeers(FIRST, [SECOND, THIRD]) }));
    expect(d).toMatchObject({ eligible: false, basis: 'apiserver-unhealthy', hold: false });
    expect(d.candidates.has(FIRST)).toBe(false);
  });

  test('warming up: not eligible', () => {
    expect(decideVip(input({ self: FIRST, warmedUp: false, peers: agreeingPeers(FIRST, [SECOND, THIRD]) }))).toMatchObject({ eligible: false, basis: 'warming', hold: false });
  });

  test('the holder that says warming is replaced by the next once the third agrees', () => {
    const peers = new Map([[FIRST, report('warming')], [THIRD, report('ready', 'stale-digest')]]);
    const waiting = decideVip(input({ self: SECOND, peers }));
    expect(waiting).toMatchObject({ holder: SECOND, hold: false, blocker: THIRD });
    const digest = waiting.digest;
    const agreed = decideVip(input({ self: SECOND, peers: new Map([[FIRST, report('warming')], [THIRD, report('ready', digest)]]) }));
    expect(agreed).toMatchObject({ holder: SECOND, hold: true });
  });

  test('a holder cut off from both others loses quorum and releases; it takes nothing alone', () => {
    const silent = new Map([[SECOND, report('ready', '', false)], [THIRD, report('ready', '', false)]]);
    expect(decideVip(input({ self: FIRST, holding: true, peers: silent }))).toMatchObject({ eligible: false, basis: 'no-quorum', hold: false, needProbe: false });
    expect(decideVip(input({ self: FIRST, holding: false, peers: silent }))).toMatchObject({ hold: false });
  });

  test('the pair that lost the holder waits for the grace, then takes (never beside a holder that may merely be cut off)', () => {
    const peers = (digestOf: string) => new Map([[FIRST, report('ready', '', false)], [THIRD, report('ready', digestOf)]]);
    const first = decideVip(input({ self: SECOND, peers: peers(''), recentlySilent: new Set([FIRST]) }));
    expect(first).toMatchObject({ quorum: true, holder: SECOND, hold: false, blocker: FIRST });
    expect(decideVip(input({ self: SECOND, peers: peers(first.digest) }))).toMatchObject({ hold: true });
  });

  test('a lone host on the minority side of a partition is not eligible: the majority elects without it', () => {
    const d = decideVip(input({ self: THIRD, peers: new Map([[FIRST, report('ready', '', false)], [SECOND, report('ready', '', false)]]) }));
    expect(d).toMatchObject({ eligible: false, quorum: false, hold: false });
  });

  test('bootstrap: nobody heard since the start, the VIP probed free: it takes; before the probe it asks for one', () => {
    const before = decideVip(input({ self: THIRD, heardSinceStart: false }));
    expect(before).toMatchObject({ eligible: false, needProbe: true, hold: false });
    expect(decideVip(input({ self: THIRD, heardSinceStart: false, probeClear: true }))).toMatchObject({ eligible: true, basis: 'bootstrap', holder: THIRD, hold: true });
    // Held under bootstrap, it keeps it while it still hears nobody.
    expect(decideVip(input({ self: THIRD, heardSinceStart: false, holding: true }))).toMatchObject({ basis: 'bootstrap', hold: true });
    // Once someone was heard, silence is no longer bootstrap: quorum rules.
    expect(decideVip(input({ self: THIRD, heardSinceStart: true, holding: true, probeClear: true }))).toMatchObject({ basis: 'no-quorum', hold: false, needProbe: false });
  });

  test('bootstrap holder, a preferred host joins: the ordered handback (it waits for the release)', () => {
    // THIRD holds alone; FIRST comes up ready with the view {FIRST, THIRD}.
    const joinerView = decideVip(input({ self: FIRST, peers: new Map([[THIRD, report('ready')]]) }));
    expect(joinerView.holder).toBe(FIRST);
    const holderOld = decideVip(input({ self: THIRD, heardSinceStart: false, holding: true })).digest;
    expect(decideVip(input({ self: FIRST, peers: new Map([[THIRD, report('ready', holderOld)]]) }))).toMatchObject({ hold: false, blocker: THIRD });
    const holderNow = decideVip(input({ self: THIRD, holding: true, peers: new Map([[FIRST, report('ready', joinerView.digest)]]) }));
    expect(holderNow).toMatchObject({ holder: FIRST, hold: false });
    expect(decideVip(input({ self: FIRST, peers: new Map([[THIRD, report('ready', holderNow.digest)]]) }))).toMatchObject({ hold: true });
  });

  test('the only host configured needs no quorum', () => {
    expect(decideVip(input({ self: 'cp1', hosts: ['cp1'] }))).toMatchObject({ basis: 'sole-candidate', hold: true });
  });

  test('peers not in the hosts list are ignored', () => {
    const d = decideVip(input({ self: SECOND, peers: new Map([['intruder', report('ready')]]) }));
    expect(d.candidates.has('intruder')).toBe(false);
    expect(d.quorum).toBe(false);
  });
});

/**
 * Hosts that hear each other (full mesh; a dead host is heard by nobody and answers nothing),
 * stepping one at a time in any order, each reading what the others last sent, with API servers
 * failing and recovering and processes dying and restarting at any point: never two holders.
 */
describe('never two holders among hosts that hear each other', () => {
  type Host = { alive: boolean; healthy: boolean; warmedUp: boolean; holding: boolean; state: SpeakerState; view: string; heard: boolean };
  const event = fc.oneof(
    fc.record({ kind: fc.constant('step' as const), host: fc.nat(4) }),
    fc.record({ kind: fc.constant('health' as const), host: fc.nat(4) }),
    fc.record({ kind: fc.constant('kill' as const), host: fc.nat(4) }),
    fc.record({ kind: fc.constant('start' as const), host: fc.nat(4) }),
    fc.record({ kind: fc.constant('warm' as const), host: fc.nat(4) }),
  );

  test('property', () => {
    fc.assert(fc.property(fc.integer({ min: 2, max: 5 }), fc.array(event, { minLength: 30, maxLength: 120 }), (n, events) => {
      const names = Array.from({ length: n }, (_, i) => `cp${i + 1}`);
      const hosts = new Map<string, Host>(names.map((name) => [name, { alive: true, healthy: true, warmedUp: false, holding: false, state: 'warming', view: '', heard: false }]));
      for (const e of events) {
        const name = names[e.host % n]!;
        const h = hosts.get(name)!;
        if (e.kind === 'health') h.healthy = !h.healthy;
        else if (e.kind === 'kill') Object.assign(h, { alive: false, holding: false, warmedUp: false, state: 'warming', view: '' });
        else if (e.kind === 'start') h.alive = true;
        else if (e.kind === 'warm') h.warmedUp = h.alive;
        else if (h.alive) {
          const peers = new Map<string, PeerReport>();
          for (const [other, o] of hosts) if (other !== name) peers.set(other, report(o.state, o.view, o.alive, !o.alive));
          const d = decideVip({ self: name, hosts: names, key: KEY, warmedUp: h.warmedUp, healthy: h.healthy, peers, holding: h.holding, heardSinceStart: true, probeClear: false, recentlySilent: new Set() });
          // Release (or take) first, then tell: what the barrier relies on.
          h.holding = d.hold;
          h.state = d.eligible ? 'ready' : 'warming';
          h.view = d.digest;
        }
        const holders = [...hosts].filter(([, x]) => x.alive && x.holding).map(([x]) => x);
        if (holders.length > 1) throw new Error(`two holders: ${holders.join(', ')}`);
      }
    }), { numRuns: 400 });
  });
});
