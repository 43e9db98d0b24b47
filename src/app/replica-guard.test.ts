import { expect, test } from 'bun:test';
import { ANOTHER_REPLICA_REASON, ReplicaGuard } from './replica-guard.ts';
import { silentLogger } from '../log.ts';
import { FakeLeaseApi } from '../../test/fakes/lease-api.ts';
import { eventually } from '../../test/harness/eventually.ts';
import { RecordingEventRecorder } from '../../test/fakes/event-recorder.ts';

/**
 * Replicas without leader election: the one holding the Lease decides (allocates), another is
 * blocked, says why once, and takes over (re-reading its memory) once the Lease is released.
 */

function guard(api: FakeLeaseApi, identity: string, extra: { releaseOnStop?: () => boolean } = {}) {
  const events = new RecordingEventRecorder();
  const acquired: AbortSignal[] = [];
  const g = new ReplicaGuard({
    transport: api,
    namespace: 'kube-system',
    name: 'ccm',
    identity,
    leaseDurationMs: 1_000,
    renewDeadlineMs: 500,
    retryPeriodMs: 100,
    logger: silentLogger,
    events,
    releaseOnStop: extra.releaseOnStop ?? (() => true),
    onAcquired: (held) => acquired.push(held),
  });
  const stop = new AbortController();
  const running = g.run(stop.signal);
  return { g, events, acquired, stop: async () => (stop.abort(), await running) };
}

test('the holder decides; another replica is blocked, says why once, and takes over when the Lease is released', async () => {
  const api = new FakeLeaseApi();
  const a = guard(api, 'a');
  await eventually('a holding the Lease', () => a.g.blockedReason() === undefined);
  expect(a.acquired).toHaveLength(1);

  const b = guard(api, 'b');
  await eventually('b noticing a', () => b.events.events.length > 0);
  expect(b.g.blockedReason()).toBe(
    'another edge-ccm (a) holds the Lease kube-system/ccm: with --leader-elect=false this replica allocates no load-balancer addresses while it does (run one replica, or turn leader election on)',
  );
  expect(b.events.events).toEqual([{
    kind: 'Lease', namespace: 'kube-system', name: 'ccm', type: 'Warning', reason: ANOTHER_REPLICA_REASON,
    message: 'edge-ccm a holds this Lease: replica b (--leader-elect=false) allocates no load-balancer addresses while it does; run one replica, or turn leader election on',
  }]);
  // a renews: b stays blocked, and says nothing more.
  await eventually('a renewal seen by b', () => api.requests.filter((r) => r === 'GET ccm').length > 3);
  expect(b.g.blockedReason()).toContain('another edge-ccm (a)');
  expect(b.events.events).toHaveLength(1);

  await a.stop();
  expect(api.spec()?.holderIdentity).not.toBe('a');
  await eventually('b holding the Lease', () => b.g.blockedReason() === undefined);
  expect(b.acquired).toHaveLength(1);
  await b.stop();
});

test('a guard told not to release leaves the Lease to expire', async () => {
  const api = new FakeLeaseApi();
  const a = guard(api, 'a', { releaseOnStop: () => false });
  await eventually('a holding the Lease', () => a.g.blockedReason() === undefined);
  await a.stop();
  expect(api.spec()?.holderIdentity).toBe('a');
  expect(a.g.blockedReason()).toContain('is not this replica\'s yet');
});
