import { describe, expect, test } from 'bun:test';
import { Registry } from 'prom-client';
import {
  type ElectionClock,
  formatMicroTime,
  LeaderElector,
  type LeaderElectionOptions,
  makeIdentity,
} from './leader-election.ts';
import type { KubeTransport } from './transport.ts';
import { silentLogger } from '../log.ts';
import { FakeLeaseApi } from '../../test/fakes/lease-api.ts';
import { RecordingEventRecorder } from '../../test/fakes/event-recorder.ts';
import { eventually } from '../../test/harness/eventually.ts';

const MICROTIME = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/;

class ManualClock implements ElectionClock {
  mono = 1_000;
  wall = Date.UTC(2026, 0, 2, 3, 4, 5, 678);
  wallMs = () => this.wall;
  monotonicMs = () => this.mono;
  advance(ms: number): void {
    this.mono += ms;
    this.wall += ms;
  }
}

function elector(api: KubeTransport, identity: string, extra: Partial<LeaderElectionOptions> = {}): LeaderElector {
  return new LeaderElector({
    transport: api,
    namespace: 'kube-system',
    name: 'ccm',
    identity,
    leaseDurationMs: 15_000,
    renewDeadlineMs: 10_000,
    retryPeriodMs: 2_000,
    logger: silentLogger,
    onStartedLeading: () => {},
    onStoppedLeading: () => {},
    ...extra,
  });
}

/** One lease API and one manual clock, seen by two candidates a and b (an elector does nothing until asked). */
function onManualClock() {
  const api = new FakeLeaseApi();
  const clock = new ManualClock();
  return { api, clock, a: elector(api, 'a', { clock }), b: elector(api, 'b', { clock }) };
}

describe('helpers', () => {
  test('makeIdentity is HOST_UUID and unique per call', () => {
    const a = makeIdentity('node-1');
    expect(a).toMatch(/^node-1_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    expect(makeIdentity('node-1')).not.toBe(a);
  });

  test('formatMicroTime writes six fractional digits in UTC', () => {
    expect(formatMicroTime(Date.UTC(2006, 0, 2, 15, 4, 5, 0))).toBe('2006-01-02T15:04:05.000000Z');
    expect(formatMicroTime(Date.UTC(2006, 0, 2, 15, 4, 5, 123) + 0.456)).toBe('2006-01-02T15:04:05.123456Z');
  });

  test('durations are checked as upstream', () => {
    const api = new FakeLeaseApi();
    expect(() => elector(api, 'a', { leaseDurationMs: 10_000, renewDeadlineMs: 10_000 })).toThrow(/leaseDuration/);
    expect(() => elector(api, 'a', { renewDeadlineMs: 2_000, retryPeriodMs: 2_000 })).toThrow(/renewDeadline/);
    expect(() => elector(api, '')).toThrow(/identity/);
  });
});

describe('tryAcquireOrRenew', () => {
  test('creates a missing lease and holds it', async () => {
    const { api, a } = onManualClock();
    expect(a.isLeader()).toBe(false);
    expect(await a.tryAcquireOrRenew()).toBe(true);
    expect(a.isLeader()).toBe(true);
    const spec = api.spec()!;
    expect(spec).toEqual({
      holderIdentity: 'a',
      leaseDurationSeconds: 15,
      acquireTime: '2026-01-02T03:04:05.678000Z',
      renewTime: '2026-01-02T03:04:05.678000Z',
      leaseTransitions: 0,
    });
    expect(spec.acquireTime).toMatch(MICROTIME);
  });

  test('renewal keeps acquireTime and transitions, and is a single PUT while the lease is valid', async () => {
    const { api, clock, a } = onManualClock();
    await a.tryAcquireOrRenew();
    const acquired = api.spec()!.acquireTime;
    clock.advance(2_000);
    api.requests.length = 0;
    expect(await a.tryAcquireOrRenew()).toBe(true);
    expect(api.requests).toEqual(['PUT ccm']);
    expect(api.spec()!.acquireTime).toBe(acquired);
    expect(api.spec()!.renewTime).toBe(formatMicroTime(clock.wall));
    expect(api.spec()!.leaseTransitions).toBe(0);
  });

  test('a held lease is taken only after it stayed unchanged for its duration on our clock', async () => {
    const { api, clock, a, b } = onManualClock();
    await a.tryAcquireOrRenew();

    expect(await b.tryAcquireOrRenew()).toBe(false);
    expect(b.leader()).toBe('a');
    clock.advance(14_000);
    expect(await b.tryAcquireOrRenew()).toBe(false); // 14s since b first saw this record
    clock.advance(1_001);
    expect(await b.tryAcquireOrRenew()).toBe(true);
    expect(b.isLeader()).toBe(true);
    expect(api.spec()).toMatchObject({ holderIdentity: 'b', leaseTransitions: 1, acquireTime: formatMicroTime(clock.wall) });

    // a still thinks it leads; its renewal conflicts, and the read that follows shows b.
    expect(a.isLeader()).toBe(true);
    expect(await a.tryAcquireOrRenew()).toBe(false);
    expect(a.isLeader()).toBe(false);
    expect(a.leader()).toBe('b');
  });

  test('every renewal by the holder restarts the expiry as others see it', async () => {
    const { api, clock, a, b } = onManualClock();
    await a.tryAcquireOrRenew();
    expect(await b.tryAcquireOrRenew()).toBe(false);
    for (let i = 0; i < 5; i++) {
      clock.advance(10_000);
      expect(await a.tryAcquireOrRenew()).toBe(true);
      expect(await b.tryAcquireOrRenew()).toBe(false);
    }
    expect(api.spec()!.holderIdentity).toBe('a');
  });

  test('an empty holder (a released lease) is taken at once, counting a transition', async () => {
    const { api, clock, a, b } = onManualClock();
    await a.tryAcquireOrRenew();
    api.rivalWrite('kube-system/ccm', { holderIdentity: '', leaseDurationSeconds: 1, leaseTransitions: 4, renewTime: formatMicroTime(clock.wall) });
    expect(await b.tryAcquireOrRenew()).toBe(true);
    expect(api.spec()).toMatchObject({ holderIdentity: 'b', leaseTransitions: 5 });
  });

  test('losing the write race (409) means not acquired', async () => {
    const { api, clock, a, b } = onManualClock();
    await a.tryAcquireOrRenew();
    await b.tryAcquireOrRenew();
    clock.advance(16_000);
    // c writes between b's read and b's PUT.
    api.beforeNextPut = () => api.rivalWrite('kube-system/ccm', { holderIdentity: 'c', leaseDurationSeconds: 15, leaseTransitions: 1 });
    expect(await b.tryAcquireOrRenew()).toBe(false);
    expect(b.isLeader()).toBe(false);
    expect(api.spec()!.holderIdentity).toBe('c');
  });

  test('two candidates creating the lease at once: exactly one wins', async () => {
    const api = new FakeLeaseApi();
    const a = elector(api, 'a');
    const b = elector(api, 'b');
    const results = await Promise.all([a.tryAcquireOrRenew(), b.tryAcquireOrRenew()]);
    expect(results.filter(Boolean)).toHaveLength(1);
    expect([a.isLeader(), b.isLeader()].filter(Boolean)).toHaveLength(1);
  });

  test('API errors are "not acquired", never thrown', async () => {
    const api = new FakeLeaseApi();
    api.unreachable = true;
    expect(await elector(api, 'a').tryAcquireOrRenew()).toBe(false);
  });
});

describe('holdsLeaseNow', () => {
  test('true after an acquire or renewal, false once the renew deadline passed without one (a paused leader waking up), true again after a renewal', async () => {
    const { clock, a } = onManualClock();
    expect(a.holdsLeaseNow()).toBe(false);
    expect(await a.tryAcquireOrRenew()).toBe(true);
    expect(a.holdsLeaseNow()).toBe(true);
    clock.advance(9_999);
    expect(a.holdsLeaseNow()).toBe(true);
    clock.advance(1);
    // Still the holder as far as it last saw, but its renewal is a renew deadline old.
    expect(a.isLeader()).toBe(true);
    expect(a.holdsLeaseNow()).toBe(false);
    expect(await a.tryAcquireOrRenew()).toBe(true);
    expect(a.holdsLeaseNow()).toBe(true);
  });

  test('a standby never holds it', async () => {
    const { a, b } = onManualClock();
    expect(await a.tryAcquireOrRenew()).toBe(true);
    expect(await b.tryAcquireOrRenew()).toBe(false);
    expect(b.holdsLeaseNow()).toBe(false);
  });
});

describe('health check', () => {
  test('unhealthy only when leading without a renewal for lease duration + tolerance', async () => {
    const { clock, a } = onManualClock();
    expect(a.check()).toBeUndefined(); // not leading
    await a.tryAcquireOrRenew();
    clock.advance(15_000 + 20_000);
    expect(a.check()).toBeUndefined();
    clock.advance(1);
    expect(a.check()?.message).toContain('failed election to renew leadership on lease ccm');
    expect(a.check(60_000)).toBeUndefined();
    await a.tryAcquireOrRenew();
    expect(a.check()).toBeUndefined();
  });
});

describe('run', () => {
  const fast = { leaseDurationMs: 2_000, renewDeadlineMs: 1_000, retryPeriodMs: 200 };

  test('leads, reports, and on abort releases the lease and stops', async () => {
    const api = new FakeLeaseApi();
    const registry = new Registry();
    const events = new RecordingEventRecorder();
    let leadingSignal: AbortSignal | undefined;
    let stopped = 0;
    const leaders: string[] = [];
    const a = elector(api, 'a', {
      ...fast,
      registry,
      events,
      onStartedLeading: (signal) => void (leadingSignal = signal),
      onStoppedLeading: () => void stopped++,
      onNewLeader: (id) => void leaders.push(id),
    });
    const gauge = async () => (await registry.getSingleMetric('leader_election_master_status')!.get()).values[0]?.value;
    expect(await gauge()).toBe(0);

    const ctl = new AbortController();
    const running = a.run(ctl.signal);
    await eventually('leadership', () => leadingSignal !== undefined, 10_000);
    expect(a.isLeader()).toBe(true);
    expect(await gauge()).toBe(1);
    expect(leaders).toEqual(['a']);
    // It keeps renewing.
    const firstRenew = api.spec()!.renewTime;
    await eventually('a renewal', () => api.spec()!.renewTime !== firstRenew, 10_000);

    ctl.abort();
    expect(await running).toBe('aborted');
    expect(stopped).toBe(1);
    expect(leadingSignal!.aborted).toBe(true);
    expect(await gauge()).toBe(0);
    expect(api.spec()).toMatchObject({ holderIdentity: '', leaseDurationSeconds: 1, leaseTransitions: 0 });
    expect(events.events.map((e) => `${e.kind} ${e.name} ${e.reason}: ${e.message}`)).toEqual([
      'Lease ccm LeaderElection: a became leader',
      'Lease ccm LeaderElection: a stopped leading',
    ]);
  });

  test('without releaseOnCancel the lease stays ours on abort', async () => {
    const api = new FakeLeaseApi();
    let leading = false;
    const a = elector(api, 'a', { ...fast, releaseOnCancel: false, onStartedLeading: () => void (leading = true) });
    const ctl = new AbortController();
    const running = a.run(ctl.signal);
    await eventually('leadership', () => leading, 10_000);
    ctl.abort();
    expect(await running).toBe('aborted');
    expect(api.spec()!.holderIdentity).toBe('a');
  });

  test('renewals failing for the renew deadline lose leadership', async () => {
    const api = new FakeLeaseApi();
    let leadingSignal: AbortSignal | undefined;
    let stopped = 0;
    const a = elector(api, 'a', { ...fast, onStartedLeading: (s) => void (leadingSignal = s), onStoppedLeading: () => void stopped++ });
    const ctl = new AbortController();
    const running = a.run(ctl.signal);
    await eventually('leadership', () => leadingSignal !== undefined, 10_000);
    api.unreachable = true;
    expect(await running).toBe('lost');
    expect(stopped).toBe(1);
    expect(leadingSignal!.aborted).toBe(true);
    expect(ctl.signal.aborted).toBe(false);
  });

  test('a lost lease is not released (a write of the term may still land), and run() campaigns again with the same identity', async () => {
    const api = new FakeLeaseApi();
    let lost = false;
    const afterLoss: string[] = [];
    // Every attempt, answered or not: the fake records only the answered ones.
    const transport: KubeTransport = {
      server: api.server,
      request: (req) => {
        if (lost) afterLoss.push(req.method);
        return api.request(req);
      },
      watch: () => api.watch(),
    };
    let terms = 0;
    const a = elector(transport, 'a', {
      ...fast,
      onStartedLeading: (s) => {
        terms++;
        s.addEventListener('abort', () => void (lost = true), { once: true });
      },
    });
    const ctl = new AbortController();
    const first = a.run(ctl.signal);
    await eventually('leadership', () => terms === 1, 10_000);
    api.unreachable = true;
    expect(await first).toBe('lost');
    expect(afterLoss).toEqual([]);

    // The API server answers again: the lease still names us, so the next campaign leads at once.
    api.unreachable = false;
    lost = false;
    const second = a.run(ctl.signal);
    await eventually('leading again', () => terms === 2, 10_000);
    expect(api.spec()).toMatchObject({ holderIdentity: 'a', leaseTransitions: 0 });
    ctl.abort();
    expect(await second).toBe('aborted');
  });

  test('a standby waits its jittered retry period through retryWait, which the API server\'s return cuts short', async () => {
    const api = new FakeLeaseApi();
    api.unreachable = true;
    const waits: number[] = [];
    const ctl = new AbortController();
    const b = elector(api, 'b', {
      ...fast,
      retryWait: {
        wait: async (ms) => {
          waits.push(ms);
          if (waits.length === 3) ctl.abort();
          return 'back';
        },
      },
    });
    expect(await b.run(ctl.signal)).toBe('aborted');
    expect(waits).toHaveLength(3);
    for (const ms of waits) {
      expect(ms).toBeGreaterThanOrEqual(fast.retryPeriodMs);
      expect(ms).toBeLessThanOrEqual(fast.retryPeriodMs * 2.2);
    }
  });

  test('a standby whose attempts are answered (the lease is held) waits plainly: retryWait, and so the API probe, only after an attempt without an answer', async () => {
    const api = new FakeLeaseApi();
    await elector(api, 'holder', { leaseDurationMs: 60_000, renewDeadlineMs: 40_000 }).tryAcquireOrRenew();
    let waits = 0;
    const ctl = new AbortController();
    const b = elector(api, 'b', {
      ...fast,
      retryWait: {
        wait: async () => {
          waits++;
          await Bun.sleep(1);
          return 'elapsed';
        },
      },
    });
    const running = b.run(ctl.signal);
    await eventually('two answered attempts', () => api.requests.filter((r) => r.startsWith('GET')).length >= 3, 10_000);
    expect(waits).toBe(0);
    api.unreachable = true;
    await eventually('a wait after an unanswered attempt', () => waits > 0, 10_000);
    ctl.abort();
    expect(await running).toBe('aborted');
  });

  test('a standby waits while the leader renews, then takes over after a release', async () => {
    const api = new FakeLeaseApi();
    const started: string[] = [];
    const a = elector(api, 'a', { ...fast, onStartedLeading: () => void started.push('a') });
    const b = elector(api, 'b', { ...fast, onStartedLeading: () => void started.push('b') });
    const ctlA = new AbortController();
    const ctlB = new AbortController();
    const runA = a.run(ctlA.signal);
    await eventually('the first term', () => started.length === 1, 10_000);
    const runB = b.run(ctlB.signal);
    // Several lease durations pass with a renewing: b must stay standby.
    await Bun.sleep(4_500);
    expect(started).toEqual(['a']);
    expect(b.leader()).toBe('a');
    ctlA.abort();
    await runA;
    await eventually('the second term', () => started.length === 2, 10_000);
    expect(started).toEqual(['a', 'b']);
    expect(api.spec()).toMatchObject({ holderIdentity: 'b', leaseTransitions: 1 });
    ctlB.abort();
    expect(await runB).toBe('aborted');
  });

  test('aborted before acquiring: resolves and still calls onStoppedLeading, as upstream', async () => {
    const api = new FakeLeaseApi();
    const holder = elector(api, 'holder');
    await holder.tryAcquireOrRenew();
    api.requests.length = 0;
    let stopped = 0;
    let started = 0;
    const b = elector(api, 'b', { ...fast, onStartedLeading: () => void started++, onStoppedLeading: () => void stopped++ });
    const ctl = new AbortController();
    const running = b.run(ctl.signal);
    await eventually('a second attempt', () => api.requests.length >= 2, 10_000); // it has tried, waited and tried again
    ctl.abort();
    expect(await running).toBe('aborted');
    expect(started).toBe(0);
    expect(stopped).toBe(1);
    expect(api.spec()!.holderIdentity).toBe('holder');
  });
});
