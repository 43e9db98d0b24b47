import { describe, expect, test } from 'bun:test';
import { FakeClock } from '../../../test/fakes/fake-clock.ts';
import { BfdDiag, BfdState, type ControlPacket, decodeControlPacket } from './packet.ts';
import { BfdSession, type BfdStateChange, type BfdTimers } from './session.ts';

const TIMERS: BfdTimers = { desiredMinTxMs: 200, requiredMinRxMs: 200, detectMult: 3 };

/** A session on a fake clock, its packets decoded as they go out. */
function harness(timers = TIMERS, random = () => 0.999) {
  const clock = new FakeClock(1_000);
  const sent: { at: number; p: ControlPacket }[] = [];
  const changes: BfdStateChange[] = [];
  const session = new BfdSession({
    localDiscriminator: 11,
    timers,
    clock,
    random,
    send: (bytes) => {
      const d = decodeControlPacket(bytes);
      if ('error' in d) throw new Error(d.detail);
      sent.push({ at: clock.now(), p: d.packet });
    },
    onStateChange: (c) => changes.push(c),
  });
  return { clock, sent, changes, session };
}

/** A packet from the remote (discriminator 22). */
function remote(over: Partial<ControlPacket>): ControlPacket {
  return {
    diag: BfdDiag.None, state: BfdState.Down, poll: false, final: false, controlPlaneIndependent: false, demand: false,
    detectMult: 3, myDiscriminator: 22, yourDiscriminator: 0, desiredMinTxUs: 1_000_000, requiredMinRxUs: 200_000, requiredMinEchoRxUs: 0, ...over,
  };
}

/** The remote and the session through the three-way handshake: Down -> Init -> Up. */
function bringUp(h: ReturnType<typeof harness>) {
  h.session.start();
  h.session.receive(remote({ state: BfdState.Down }));
  expect(h.session.state).toBe(BfdState.Init);
  h.session.receive(remote({ state: BfdState.Up, yourDiscriminator: 11 }));
  expect(h.session.state).toBe(BfdState.Up);
}

describe('BFD session state machine (RFC 5880 6.8)', () => {
  test('Down sends at 1 s at most, with discriminators and intervals as negotiated', () => {
    const h = harness();
    h.session.start();
    h.clock.advance(3_000);
    const gaps = h.sent.slice(1).map((s, i) => s.at - h.sent[i]!.at);
    expect(gaps.every((g) => g >= 750 && g <= 1000)).toBe(true);
    const p = h.sent[0]!.p;
    expect(p).toMatchObject({ state: BfdState.Down, myDiscriminator: 11, yourDiscriminator: 0, detectMult: 3, desiredMinTxUs: 1_000_000, requiredMinRxUs: 200_000, poll: false });
  });

  test('three-way handshake: Down hears Down -> Init, Init hears Up -> Up; then a Poll Sequence moves to the fast rate', () => {
    const h = harness();
    bringUp(h);
    expect(h.changes.map((c) => [BfdState[c.from], BfdState[c.to]])).toEqual([['Down', 'Init'], ['Init', 'Up']]);
    h.sent.length = 0;
    h.clock.advance(1_000);
    // The Poll goes out with the new DesiredMinTx; the remote asks for 200 ms, so packets follow every 150-200 ms.
    expect(h.sent[0]!.p).toMatchObject({ state: BfdState.Up, poll: true, yourDiscriminator: 22, desiredMinTxUs: 200_000 });
    expect(h.sent.length).toBeGreaterThanOrEqual(5);
    h.session.receive(remote({ state: BfdState.Up, yourDiscriminator: 11, final: true, desiredMinTxUs: 200_000 }));
    h.sent.length = 0;
    h.clock.advance(400);
    expect(h.sent.every((s) => !s.p.poll && !s.p.final)).toBe(true);
  });

  test('a state change goes out at once, not an interval later', () => {
    const h = harness();
    h.session.start();
    h.clock.advance(10);
    h.sent.length = 0;
    h.session.receive(remote({ state: BfdState.Down }));
    expect(h.sent.map((s) => [s.at, BfdState[s.p.state]])).toEqual([[1010, 'Init']]);
    h.session.receive(remote({ state: BfdState.Up, yourDiscriminator: 11 }));
    expect(h.sent.map((s) => [s.at, BfdState[s.p.state], s.p.poll])).toEqual([[1010, 'Init', false], [1010, 'Up', true]]);
  });

  test('Down hearing Init goes straight to Up', () => {
    const h = harness();
    h.session.start();
    h.session.receive(remote({ state: BfdState.Init, yourDiscriminator: 11 }));
    expect(h.session.state).toBe(BfdState.Up);
  });

  test('a Poll is answered at once with Final, outside the periodic schedule', () => {
    const h = harness();
    bringUp(h);
    h.sent.length = 0;
    h.session.receive(remote({ state: BfdState.Up, yourDiscriminator: 11, poll: true, desiredMinTxUs: 300_000 }));
    expect(h.sent).toHaveLength(1);
    expect(h.sent[0]!.p).toMatchObject({ final: true, poll: false });
  });

  test('silence for the detection time (remote mult x max(our RequiredMinRx, its DesiredMinTx)) brings Up down with diag 1', () => {
    const h = harness();
    bringUp(h);
    h.session.receive(remote({ state: BfdState.Up, yourDiscriminator: 11, desiredMinTxUs: 300_000, detectMult: 3 }));
    expect(h.session.stats().detectionTimeMs).toBe(900);
    h.clock.advance(899);
    expect(h.session.state).toBe(BfdState.Up);
    h.clock.advance(1);
    expect(h.session.state).toBe(BfdState.Down);
    expect(h.changes.at(-1)).toEqual({ from: BfdState.Up, to: BfdState.Down, diag: BfdDiag.ControlDetectionTimeExpired });
    // The remote's discriminator is forgotten, the rate is slow again.
    h.sent.length = 0;
    h.clock.advance(2_000);
    expect(h.sent[0]!.p).toMatchObject({ state: BfdState.Down, yourDiscriminator: 0, desiredMinTxUs: 1_000_000, diag: BfdDiag.ControlDetectionTimeExpired });
    expect(h.session.stats().downs).toBe(1);
  });

  test('each packet received restarts the detection timer', () => {
    const h = harness();
    bringUp(h);
    for (let i = 0; i < 10; i++) {
      h.clock.advance(500);
      h.session.receive(remote({ state: BfdState.Up, yourDiscriminator: 11, desiredMinTxUs: 200_000 }));
    }
    expect(h.session.state).toBe(BfdState.Up);
  });

  test('the remote saying Down or AdminDown brings Up down with diag 3', () => {
    for (const state of [BfdState.Down, BfdState.AdminDown]) {
      const h = harness();
      bringUp(h);
      h.session.receive(remote({ state, yourDiscriminator: 11, diag: BfdDiag.AdministrativelyDown }));
      expect(h.session.state).toBe(BfdState.Down);
      expect(h.changes.at(-1)!.diag).toBe(BfdDiag.NeighborSignaledSessionDown);
      expect(h.session.stats().remoteDiag).toBe(BfdDiag.AdministrativelyDown);
    }
  });

  test('the transmit interval is the larger of ours and the remote\'s RequiredMinRx', () => {
    const h = harness();
    bringUp(h);
    h.session.receive(remote({ state: BfdState.Up, yourDiscriminator: 11, requiredMinRxUs: 500_000, final: true }));
    expect(h.session.stats().txIntervalMs).toBe(500);
    h.sent.length = 0;
    h.clock.advance(2_000);
    const gaps = h.sent.slice(1).map((s, i) => s.at - h.sent[i]!.at);
    expect(Math.min(...gaps)).toBeGreaterThanOrEqual(375);
    // RequiredMinRx 0: the remote wants no periodic packets (RFC 5880 6.8.7).
    h.session.receive(remote({ state: BfdState.Up, yourDiscriminator: 11, requiredMinRxUs: 0 }));
    expect(h.session.stats().txIntervalMs).toBe(200);
  });

  test('stop: AdminDown with diag 7, three packets, then silence; what arrives afterwards is ignored', async () => {
    const h = harness();
    bringUp(h);
    h.sent.length = 0;
    const stopped = h.session.stop();
    for (let i = 0; i < 5; i++) {
      h.clock.advance(1_000);
      await Bun.sleep(0);
    }
    await stopped;
    expect(h.sent.map((s) => [BfdState[s.p.state], s.p.diag])).toEqual([['AdminDown', 7], ['AdminDown', 7], ['AdminDown', 7]]);
    h.session.receive(remote({ state: BfdState.Down }));
    expect(h.session.state).toBe(BfdState.AdminDown);
    expect(h.clock.pendingTimers).toBe(0);
  });

  test('stop does not wait on the remote: with its Required Min RX Interval at an hour, one AdminDown and done', async () => {
    const h = harness();
    bringUp(h);
    h.session.receive(remote({ state: BfdState.Up, yourDiscriminator: 11, requiredMinRxUs: 3_600_000_000 }));
    h.sent.length = 0;
    let done = false;
    const stopped = h.session.stop().then(() => (done = true));
    await Bun.sleep(0);
    // No clock advance: the old code waited two intervals (two hours) for its two more copies.
    expect(done).toBe(true);
    await stopped;
    expect(h.sent.map((s) => [BfdState[s.p.state], s.p.diag])).toEqual([['AdminDown', 7]]);
    expect(h.clock.pendingTimers).toBe(0);
  });

  test('jitter: with Detect Mult 1 the interval is 75-90 % of the negotiated one', () => {
    for (const draw of [0, 0.999]) {
      const h = harness({ ...TIMERS, detectMult: 1 }, () => draw);
      h.session.start();
      h.clock.advance(5_000);
      const gaps = h.sent.slice(1).map((s, i) => s.at - h.sent[i]!.at);
      for (const g of gaps) expect(g).toBeCloseTo(draw === 0 ? 750 : 899.85, 0);
    }
  });

  test('refuses settings it cannot run with', () => {
    const clock = new FakeClock();
    const make = (localDiscriminator: number, timers: BfdTimers) => () => new BfdSession({ localDiscriminator, timers, clock, send: () => {} });
    expect(make(0, TIMERS)).toThrow('discriminator');
    expect(make(1, { ...TIMERS, detectMult: 0 })).toThrow('multiplier');
    expect(make(1, { ...TIMERS, desiredMinTxMs: 0 })).toThrow('positive');
  });
});
