import { describe, expect, test } from 'bun:test';
import fc from 'fast-check';
import type { PeerReport, SpeakerState } from '../l2/liveness.ts';
import { rankNodes } from '../../net/l2/election.ts';
import { decideVip, type VipDecisionInput } from './decision.ts';
import { electsToken, encodeWord } from './word.ts';

const KEY = '198.51.100.10';
const HOSTS = ['cp1', 'cp2', 'cp3'];
/** The hosts in the VIP's order: FIRST is elected when all are eligible and none holds. */
const [FIRST, SECOND, THIRD] = rankNodes(KEY, HOSTS) as [string, string, string];
const T = 1000;
/** Each host's epoch in these tests (word.ts: 8 hex characters). */
const EPOCH: Record<string, string> = { [FIRST]: 'aaaaaaa1', [SECOND]: 'aaaaaaa2', [THIRD]: 'aaaaaaa3' };

/** A peer's heartbeat: its state and word (epoch only while ready; `elects` a host in that host's EPOCH). */
function peer(state: SpeakerState, o: { elects?: string; holding?: boolean; epoch?: string; heard?: boolean; view?: string } = {}, self?: string): PeerReport {
  const epoch = o.epoch ?? (state === 'ready' && self ? EPOCH[self]! : '');
  const view = o.view ?? encodeWord({ epoch, holding: !!o.holding, elects: o.elects ? electsToken(o.elects, EPOCH[o.elects]!) : '' });
  return { heard: o.heard ?? true, state, view, refused: false };
}
const ready = (name: string, o: { elects?: string; holding?: boolean; heard?: boolean } = {}) => [name, peer('ready', o, name)] as const;
const warming = (name: string, o: { elects?: string; heard?: boolean } = {}) => [name, peer('warming', o, name)] as const;

function input(over: Partial<VipDecisionInput> & { self: string }): VipDecisionInput {
  return {
    hosts: HOSTS, key: KEY, warmedUp: true, healthy: true, peers: new Map(), holding: false,
    heardSinceStart: true, probeClear: false, recentlySilent: new Set(), epoch: EPOCH[over.self] ?? 'aaaaaaa9',
    eligibleForMs: 0, livenessTimeoutMs: T, ...over,
  };
}
const decide = (self: string, peers: (readonly [string, PeerReport])[], over: Partial<VipDecisionInput> = {}) => decideVip(input({ self, peers: new Map(peers), ...over }));

describe('decideVip', () => {
  test('all ready, nobody holding, every peer acking the first in the order: it takes; the others do not', () => {
    expect(decide(FIRST, [ready(SECOND, { elects: FIRST }), ready(THIRD, { elects: FIRST })])).toMatchObject({ eligible: true, basis: 'quorum', holder: FIRST, hold: true });
    expect(decide(SECOND, [ready(FIRST, { elects: FIRST }), ready(THIRD, { elects: FIRST })])).toMatchObject({ eligible: true, holder: FIRST, hold: false });
  });

  test('the take waits for every peer heard to ack it in its current epoch, ready or warming', () => {
    expect(decide(FIRST, [ready(SECOND, { elects: FIRST }), warming(THIRD)])).toMatchObject({ holder: FIRST, hold: false, blocker: THIRD });
    expect(decide(FIRST, [ready(SECOND, { elects: FIRST }), warming(THIRD, { elects: FIRST })])).toMatchObject({ hold: true });
    // An ack of an earlier epoch of FIRST's is no ack.
    const stale = peer('warming', { view: encodeWord({ epoch: '', holding: false, elects: electsToken(FIRST, 'bbbbbbbb') }) });
    expect(decide(FIRST, [ready(SECOND, { elects: FIRST }), [THIRD, stale]])).toMatchObject({ hold: false, blocker: THIRD });
    // A peer that has not decided yet (no word), or speaks another version's view (a digest), is no ack either.
    expect(decide(FIRST, [ready(SECOND, { elects: FIRST }), [THIRD, peer('ready', { view: '0123456789abcdef' })]])).toMatchObject({ hold: false, blocker: THIRD });
  });

  test('the cold-start race (issue 39): two hosts whose warm-ups end together, each last heard the other warming: neither takes on that', () => {
    // Each has just become eligible; the other's last word is "warming" (not yet an answer to this epoch).
    expect(decide(FIRST, [warming(SECOND), warming(THIRD)])).toMatchObject({ eligible: true, holder: FIRST, hold: false, blocker: SECOND });
    expect(decide(THIRD, [warming(FIRST), warming(SECOND)])).toMatchObject({ eligible: true, holder: THIRD, hold: false, blocker: FIRST });
    // Then each hears the other ready: both elect FIRST; THIRD answers it, FIRST takes once both did.
    expect(decide(THIRD, [ready(FIRST), warming(SECOND, { elects: FIRST })])).toMatchObject({ holder: FIRST, hold: false });
    expect(decide(FIRST, [warming(SECOND, { elects: FIRST }), ready(THIRD, { elects: FIRST })])).toMatchObject({ holder: FIRST, hold: true });
  });

  test('sticky: a healthy holder keeps the VIP; a host that comes back, first in the order, elects it and waits in standby', () => {
    const back = decide(FIRST, [ready(SECOND, { elects: SECOND, holding: true }), ready(THIRD, { elects: SECOND })]);
    expect(back).toMatchObject({ eligible: true, holder: SECOND, hold: false });
    // The holder, hearing FIRST ready, keeps it.
    expect(decide(SECOND, [ready(FIRST, { elects: SECOND }), ready(THIRD, { elects: SECOND })], { holding: true })).toMatchObject({ holder: SECOND, hold: true });
  });

  test('preferredHost: the holder hands the VIP back to it (released first); it takes once the holder says so', () => {
    const preferredHost = THIRD;
    // THIRD comes back; the holder FIRST still says it holds: THIRD elects itself but waits.
    expect(decide(THIRD, [ready(FIRST, { elects: FIRST, holding: true }), ready(SECOND, { elects: THIRD })], { preferredHost })).toMatchObject({ holder: THIRD, hold: false, blocker: FIRST });
    // FIRST hears THIRD ready: releases (hold false) and says so, electing THIRD.
    const holder = decide(FIRST, [ready(SECOND, { elects: THIRD }), ready(THIRD, { elects: FIRST })], { holding: true, preferredHost });
    expect(holder).toMatchObject({ holder: THIRD, hold: false });
    expect(holder.word).toBe(encodeWord({ epoch: EPOCH[FIRST]!, holding: false, elects: electsToken(THIRD, EPOCH[THIRD]!) }));
    expect(decide(THIRD, [ready(FIRST, { elects: THIRD }), ready(SECOND, { elects: THIRD })], { preferredHost })).toMatchObject({ hold: true });
    // Without the preferred host eligible, the election is sticky as ever.
    expect(decide(FIRST, [ready(SECOND, { elects: SECOND, holding: true }), warming(THIRD, { elects: SECOND })], { preferredHost })).toMatchObject({ holder: SECOND, hold: false });
  });

  test('an unhealthy API server: not eligible, releases, even while it hears everyone; its word still answers the next', () => {
    const d = decide(FIRST, [ready(SECOND, { elects: FIRST }), ready(THIRD, { elects: FIRST })], { healthy: false, holding: true });
    expect(d).toMatchObject({ eligible: false, basis: 'apiserver-unhealthy', hold: false, holder: SECOND });
    expect(d.candidates.has(FIRST)).toBe(false);
    expect(d.word).toBe(encodeWord({ epoch: '', holding: false, elects: electsToken(SECOND, EPOCH[SECOND]!) }));
  });

  test('warming up: not eligible', () => {
    expect(decide(FIRST, [ready(SECOND), ready(THIRD)], { warmedUp: false })).toMatchObject({ eligible: false, basis: 'warming', hold: false });
  });

  test('a peer deaf to this host (warming, never answering) holds the take back for one liveness timeout of eligibility, not longer', () => {
    const peers = [warming(SECOND), ready(THIRD, { elects: FIRST })];
    expect(decide(FIRST, peers, { eligibleForMs: T - 1 })).toMatchObject({ hold: false, blocker: SECOND });
    expect(decide(FIRST, peers, { eligibleForMs: T })).toMatchObject({ hold: true });
    // Not a ready peer, nor one that says it holds: those are waited for however long.
    expect(decide(FIRST, [ready(SECOND), ready(THIRD, { elects: FIRST })], { eligibleForMs: 10 * T })).toMatchObject({ hold: false, blocker: SECOND });
    expect(decide(FIRST, [[SECOND, peer('warming', { holding: true })], ready(THIRD, { elects: FIRST })], { eligibleForMs: 10 * T })).toMatchObject({ hold: false, blocker: SECOND });
  });

  test('a holder cut off from both others loses quorum and releases; it takes nothing alone', () => {
    const silent = [ready(SECOND, { heard: false }), ready(THIRD, { heard: false })];
    expect(decide(FIRST, silent, { holding: true })).toMatchObject({ eligible: false, basis: 'no-quorum', hold: false, needProbe: false });
    expect(decide(FIRST, silent)).toMatchObject({ hold: false });
  });

  test('the pair that lost the holder waits for the grace, then takes with the other\'s ack', () => {
    const peers = [ready(FIRST, { heard: false, holding: true }), ready(THIRD, { elects: SECOND })];
    expect(decide(SECOND, peers, { recentlySilent: new Set([FIRST]) })).toMatchObject({ quorum: true, holder: SECOND, hold: false, blocker: FIRST });
    expect(decide(SECOND, peers)).toMatchObject({ hold: true });
  });

  test('a lone host on the minority side of a partition is not eligible: the majority elects without it', () => {
    expect(decide(THIRD, [ready(FIRST, { heard: false }), ready(SECOND, { heard: false })])).toMatchObject({ eligible: false, quorum: false, hold: false });
  });

  test('a leaving peer (released, going away) needs not answer', () => {
    expect(decide(SECOND, [[FIRST, peer('leaving')], ready(THIRD, { elects: SECOND })])).toMatchObject({ holder: SECOND, hold: true });
  });

  test('bootstrap: nobody heard since the start, the VIP probed free: it takes; before the probe it asks for one', () => {
    const before = decide(THIRD, [], { heardSinceStart: false });
    expect(before).toMatchObject({ eligible: false, needProbe: true, hold: false });
    expect(decide(THIRD, [], { heardSinceStart: false, probeClear: true })).toMatchObject({ eligible: true, basis: 'bootstrap', holder: THIRD, hold: true });
    expect(decide(THIRD, [], { heardSinceStart: false, holding: true })).toMatchObject({ basis: 'bootstrap', hold: true });
    expect(decide(THIRD, [], { heardSinceStart: true, holding: true, probeClear: true })).toMatchObject({ basis: 'no-quorum', hold: false, needProbe: false });
  });

  test('bootstrap holder, the others join: they elect it (it says it holds), it keeps it', () => {
    expect(decide(FIRST, [ready(THIRD, { holding: true, elects: THIRD })])).toMatchObject({ holder: THIRD, hold: false });
    expect(decide(THIRD, [ready(FIRST, { elects: THIRD })], { holding: true })).toMatchObject({ basis: 'quorum', holder: THIRD, hold: true });
  });

  test('two saying they hold (never by the take rule; a safety net): the first in the order keeps it, the other releases', () => {
    expect(decide(SECOND, [ready(FIRST, { holding: true, elects: FIRST }), ready(THIRD, { elects: SECOND })], { holding: true })).toMatchObject({ holder: FIRST, hold: false });
  });

  test('the only host configured needs no quorum', () => {
    expect(decideVip(input({ self: 'cp1', hosts: ['cp1'] }))).toMatchObject({ basis: 'sole-candidate', hold: true });
  });

  test('peers not in the hosts list are ignored', () => {
    const d = decide(SECOND, [ready('intruder')]);
    expect(d.candidates.has('intruder')).toBe(false);
    expect(d.quorum).toBe(false);
  });
});

/**
 * Hosts on a network that delays and loses heartbeats (each host's words reach each peer in the
 * order sent, any of them lost, any time later; the periodic heartbeat resends the current one),
 * stepping one at a time in any order, with warm-ups ending, API servers failing and recovering,
 * processes dying and restarting at any point: never two holders. No time passes in this model,
 * so the deaf-peer grace (eligibleForMs >= the timeout) never applies: the take rule alone.
 */
describe('never two holders, whatever the delays, losses and interleavings', () => {
  type Host = { alive: boolean; healthy: boolean; warmedUp: boolean; holding: boolean; eligible: boolean; epoch: string; state: SpeakerState; word: string };
  type Sent = { state: SpeakerState; view: string };

  class Net {
    readonly hosts: Map<string, Host>;
    /** `from>to`: words sent, not yet delivered. */
    readonly queues = new Map<string, Sent[]>();
    /** `to<from`: the last word delivered. */
    readonly known = new Map<string, Sent>();
    private epochs = 0;

    constructor(readonly names: string[], readonly preferredHost?: string) {
      this.hosts = new Map(names.map((n) => [n, { alive: true, healthy: true, warmedUp: false, holding: false, eligible: false, epoch: '', state: 'warming', word: '' }]));
    }

    step(name: string): void {
      const h = this.hosts.get(name)!;
      if (!h.alive) return;
      const peers = new Map<string, PeerReport>();
      for (const o of this.names) {
        const k = this.known.get(`${name}<${o}`);
        if (o !== name && k) peers.set(o, { heard: this.hosts.get(o)!.alive, state: k.state, view: k.view, refused: false });
      }
      const epoch = h.eligible ? h.epoch : (++this.epochs).toString(16).padStart(8, '0');
      const d = decideVip({
        self: name, hosts: this.names, key: KEY, warmedUp: h.warmedUp, healthy: h.healthy, peers, holding: h.holding,
        heardSinceStart: true, probeClear: false, recentlySilent: new Set(), epoch, eligibleForMs: 0, livenessTimeoutMs: T,
        ...(this.preferredHost ? { preferredHost: this.preferredHost } : {}),
      });
      // Act first, then tell.
      h.holding = d.hold;
      h.eligible = d.eligible;
      h.epoch = d.eligible ? epoch : '';
      const state: SpeakerState = d.eligible ? 'ready' : 'warming';
      if (state !== h.state || d.word !== h.word) {
        Object.assign(h, { state, word: d.word });
        this.beat(name);
      }
    }

    beat(name: string): void {
      const h = this.hosts.get(name)!;
      if (!h.alive) return;
      for (const o of this.names) if (o !== name) this.queue(name, o).push({ state: h.state, view: h.word });
    }

    /** The first word queued from `from` to `to`: delivered, or lost. */
    deliver(from: string, to: string, lose: boolean): void {
      const w = this.queue(from, to).shift();
      if (w && !lose) this.known.set(`${to}<${from}`, w);
    }

    kill(name: string): void {
      Object.assign(this.hosts.get(name)!, { alive: false, holding: false, eligible: false, warmedUp: false, epoch: '', state: 'warming', word: '' });
      // Its words in flight die with it; the others stop hearing it.
      for (const o of this.names) {
        this.queues.delete(`${name}>${o}`);
        this.known.delete(`${o}<${name}`);
      }
    }

    holders(): string[] {
      return [...this.hosts].filter(([, h]) => h.alive && h.holding).map(([n]) => n);
    }

    private queue(from: string, to: string): Sent[] {
      let q = this.queues.get(`${from}>${to}`);
      if (!q) this.queues.set(`${from}>${to}`, (q = []));
      return q;
    }
  }

  const pair = { from: fc.nat(4), to: fc.nat(4) };
  const event = fc.oneof(
    { weight: 6, arbitrary: fc.record({ kind: fc.constant('step' as const), host: fc.nat(4) }) },
    { weight: 6, arbitrary: fc.record({ kind: fc.constant('deliver' as const), ...pair, lose: fc.boolean() }) },
    { weight: 2, arbitrary: fc.record({ kind: fc.constant('beat' as const), host: fc.nat(4) }) },
    { weight: 2, arbitrary: fc.record({ kind: fc.constant('warm' as const), host: fc.nat(4) }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('health' as const), host: fc.nat(4) }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('kill' as const), host: fc.nat(4) }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('start' as const), host: fc.nat(4) }) },
  );
  type Event = typeof event extends fc.Arbitrary<infer E> ? E : never;

  function run(net: Net, events: Event[]): void {
    const n = net.names.length;
    for (const e of events) {
      if (e.kind === 'deliver') {
        const from = net.names[e.from % n]!, to = net.names[e.to % n]!;
        if (from !== to) net.deliver(from, to, e.lose);
      } else {
        const name = net.names[e.host % n]!;
        const h = net.hosts.get(name)!;
        if (e.kind === 'step') net.step(name);
        else if (e.kind === 'beat') net.beat(name);
        else if (e.kind === 'warm') h.warmedUp = h.alive;
        else if (e.kind === 'health') h.healthy = !h.healthy;
        else if (e.kind === 'kill') net.kill(name);
        else h.alive = true;
      }
      const holders = net.holders();
      if (holders.length > 1) throw new Error(`two holders: ${holders.join(', ')}`);
    }
  }

  /** Then everything heals (all up, warmed, healthy; every word delivered): exactly one holder, with nobody left waiting forever. */
  function settle(net: Net): void {
    for (const h of net.hosts.values()) Object.assign(h, { alive: true, warmedUp: true, healthy: true });
    for (let round = 0; round < 8; round++) {
      for (const name of net.names) net.step(name);
      for (const name of net.names) net.beat(name);
      for (const from of net.names) for (const to of net.names) while (from !== to && (net.queues.get(`${from}>${to}`)?.length ?? 0) > 0) net.deliver(from, to, false);
      const holders = net.holders();
      if (holders.length > 1) throw new Error(`two holders while settling: ${holders.join(', ')}`);
    }
    expect(net.holders()).toHaveLength(1);
  }

  test('sticky and with a preferred host: faults, flaps, restarts', () => {
    fc.assert(fc.property(fc.integer({ min: 2, max: 5 }), fc.boolean(), fc.array(event, { minLength: 30, maxLength: 200 }), (n, preferred, events) => {
      const names = Array.from({ length: n }, (_, i) => `cp${i + 1}`);
      const net = new Net(names, preferred ? names[n - 1] : undefined);
      run(net, events);
      settle(net);
    }), { numRuns: 600 });
  });

  test('cold start of all at once: every host heard warming by every other, warm-ups ending in any order and interleaving', () => {
    const racing = fc.oneof(
      { weight: 3, arbitrary: fc.record({ kind: fc.constant('step' as const), host: fc.nat(4) }) },
      { weight: 4, arbitrary: fc.record({ kind: fc.constant('deliver' as const), ...pair, lose: fc.boolean() }) },
      { weight: 1, arbitrary: fc.record({ kind: fc.constant('beat' as const), host: fc.nat(4) }) },
      { weight: 2, arbitrary: fc.record({ kind: fc.constant('warm' as const), host: fc.nat(4) }) },
    );
    fc.assert(fc.property(fc.integer({ min: 2, max: 5 }), fc.boolean(), fc.array(racing, { minLength: 5, maxLength: 80 }), (n, preferred, events) => {
      const names = Array.from({ length: n }, (_, i) => `cp${i + 1}`);
      const net = new Net(names, preferred ? names[0] : undefined);
      // Up and warming, each heard by every other (the state at the end of the warm-up interval).
      for (const name of names) net.step(name);
      for (const from of names) for (const to of names) if (from !== to) net.deliver(from, to, false);
      run(net, events);
      settle(net);
    }), { numRuns: 2000 });
  });
});
