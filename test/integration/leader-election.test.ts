import { afterEach, beforeAll, describe, expect, test } from 'bun:test';
import { type Lease, LeaderElector, type LeaderElectionOptions, makeIdentity } from '../../src/kube/leader-election.ts';
import { LEASES, ResourceClient } from '../../src/kube/resources.ts';
import type { KubeTransport } from '../../src/kube/transport.ts';
import { silentLogger } from '../../src/log.ts';
import { sharedControlPlane } from '../harness/control-plane.ts';
import { transportFor } from '../harness/kubeconfig.ts';
import { eventually } from '../harness/eventually.ts';
import { takeOverLease } from '../harness/leases.ts';

const NAMESPACE = 'kube-system';
/** Short durations, as the brief: lease 3s, renew deadline 2s, retry 500ms. */
const FAST = { leaseDurationMs: 3_000, renewDeadlineMs: 2_000, retryPeriodMs: 500 };

let api: KubeTransport;
let leases: ResourceClient<Lease>;

/** Every candidate a test starts; afterEach stops those still running, even after a failure. */
const running: { ctl: AbortController; done: Promise<unknown> }[] = [];

beforeAll(async () => {
  const cp = await sharedControlPlane();
  api = transportFor(cp.adminKubeconfig);
  leases = new ResourceClient<Lease>(api, LEASES);
}, 300_000);

afterEach(async () => {
  for (const r of running.splice(0)) {
    r.ctl.abort();
    await r.done;
  }
});

interface Candidate {
  elector: LeaderElector;
  ctl: AbortController;
  done: Promise<'lost' | 'aborted'>;
  leading: () => boolean;
  /** When (performance.now) onStartedLeading ran. */
  startedAt?: number;
}

function candidate(leaseName: string, extra: Partial<LeaderElectionOptions> = {}): Candidate {
  const ctl = new AbortController();
  let leadingSignal: AbortSignal | undefined;
  const c = {} as Candidate;
  c.elector = new LeaderElector({
    transport: api,
    namespace: NAMESPACE,
    name: leaseName,
    identity: makeIdentity(),
    logger: silentLogger,
    ...FAST,
    onStartedLeading: (signal) => {
      leadingSignal = signal;
      c.startedAt = performance.now();
    },
    onStoppedLeading: () => {},
    ...extra,
  });
  c.ctl = ctl;
  c.leading = () => leadingSignal !== undefined && !leadingSignal.aborted;
  c.done = c.elector.run(ctl.signal);
  running.push({ ctl, done: c.done });
  return c;
}


const leaseSpec = async (name: string) => (await leases.get(name, { namespace: NAMESPACE })).spec ?? {};

describe('leader election against a real API server', () => {
  test('of two candidates exactly one leads, and keeps leading while it renews', async () => {
    const name = `le-one-${crypto.randomUUID().slice(0, 8)}`;
    const a = candidate(name);
    const b = candidate(name);
    await eventually('a leader', () => a.leading() || b.leading());
    const [leader, standby] = a.leading() ? [a, b] : [b, a];
    // Several lease durations (time passes on purpose): the standby must never lead meanwhile.
    for (let i = 0; i < 24; i++) {
      expect(leader.leading()).toBe(true);
      expect(standby.leading()).toBe(false);
      await Bun.sleep(250);
    }
    expect(standby.elector.leader()).toBe(leader.elector.identity);
    const spec = await leaseSpec(name);
    expect(spec.holderIdentity).toBe(leader.elector.identity);
    expect(spec.leaseDurationSeconds).toBe(3);
    expect(spec.leaseTransitions).toBe(0);
    expect(spec.renewTime).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
  }, 120_000);

  test('a leader that releases on abort hands over at once, not after the lease duration', async () => {
    const name = `le-release-${crypto.randomUUID().slice(0, 8)}`;
    // A lease far longer than the wait below: only the release can explain a takeover in time.
    const slow = { leaseDurationMs: 120_000, renewDeadlineMs: 2_000, retryPeriodMs: 500 };
    const a = candidate(name, slow);
    await eventually('a to lead', a.leading);
    const b = candidate(name, slow);
    await eventually('b to see a as leader', () => b.elector.leader() === a.elector.identity);

    a.ctl.abort();
    expect(await a.done).toBe('aborted');
    await eventually('b to take over', b.leading, 30_000);
    const spec = await leaseSpec(name);
    expect(spec.holderIdentity).toBe(b.elector.identity);
    expect(spec.leaseTransitions).toBe(1);
    expect(a.elector.isLeader()).toBe(false);
  }, 120_000);

  test('a leader that crashes (stops renewing, no release) is replaced after the lease duration', async () => {
    const name = `le-crash-${crypto.randomUUID().slice(0, 8)}`;
    const a = candidate(name, { releaseOnCancel: false });
    await eventually('a to lead', a.leading);
    const b = candidate(name);
    await eventually('b to see a as leader', () => b.elector.leader() === a.elector.identity);

    a.ctl.abort();
    await a.done;
    const left = await leaseSpec(name);
    expect(left.holderIdentity).toBe(a.elector.identity); // not released

    await eventually('b to take over', b.leading, 60_000);
    const taken = await leaseSpec(name);
    expect(taken.holderIdentity).toBe(b.elector.identity);
    expect(taken.leaseTransitions).toBe(1);
    // b waited a whole lease duration after a's last renewal (both timestamps from this machine's clock).
    expect(Date.parse(taken.acquireTime!) - Date.parse(left.renewTime!)).toBeGreaterThanOrEqual(3_000);

    // b steps down (releasing), a fresh standby takes over: transitions count on.
    const c = candidate(name);
    b.ctl.abort();
    await eventually('c to take over', c.leading, 60_000);
    expect((await leaseSpec(name)).leaseTransitions).toBe(2);
  }, 180_000);

  test('a leader whose lease is taken away loses leadership and says so', async () => {
    const name = `le-lost-${crypto.randomUUID().slice(0, 8)}`;
    let stopped = 0;
    const a = candidate(name, { onStoppedLeading: () => void stopped++ });
    await eventually('a to lead', a.leading);
    // An administrator (or a split brain) overwrites the lease with another, long-lived holder.
    await takeOverLease(api, NAMESPACE, name);
    expect(await a.done).toBe('lost');
    expect(stopped).toBe(1);
    expect(a.leading()).toBe(false);
    expect(a.elector.isLeader()).toBe(false);
    // Losing does not clear someone else's lease.
    expect((await leaseSpec(name)).holderIdentity).toBe('intruder');
  }, 120_000);
});
