import { afterEach, beforeAll, expect, test } from 'bun:test';
import { join } from 'node:path';
import { writeFileSync } from 'node:fs';
import type { V1Node } from '@kubernetes/client-node';
import { sharedControlPlane, type ControlPlane } from '../harness/control-plane.ts';
import { CcmProcess, tempDir } from '../harness/ccm-process.ts';
import { transportFor } from '../harness/kubeconfig.ts';
import { NODES, ResourceClient } from '../../src/kube/resources.ts';
import { UNINITIALIZED } from '../harness/nodes.ts';
import { takeOverLease } from '../harness/leases.ts';

/** Two replicas on one Lease: only the leader acts; SIGKILL of the leader hands over. */
const LEASE = `handover-${process.pid}`;
let cp: ControlPlane;

beforeAll(async () => {
  cp = await sharedControlPlane();
}, 240_000);
afterEach(() => CcmProcess.stopAll());

function replica(dir: string, lease = LEASE, leaseDuration = '3s', extra: string[] = []): CcmProcess {
  return CcmProcess.fake([
    '--cloud-provider=fake', `--cloud-config=${join(dir, 'fake.json')}`, `--kubeconfig=${cp.adminKubeconfig}`,
    '--secure-port=0', '--controllers=cloud-node', `--leader-elect-resource-name=${lease}`,
    `--leader-elect-lease-duration=${leaseDuration}`, '--leader-elect-renew-deadline=2s', '--leader-elect-retry-period=500ms',
    ...extra,
  ]);
}

test('only the leader initialises nodes, and a standby takes over after SIGKILL', async () => {
  const dir = tempDir('edge-ccm-handover-');
  writeFileSync(join(dir, 'fake.json'), JSON.stringify({ autoMetadata: { instanceType: 't', zone: 'z', region: 'r' } }));
  const a = replica(dir);
  await a.waitForLog('successfully acquired lease');
  const b = replica(dir);
  await b.waitForLog('attempting to acquire leader lease');

  const nodes = new ResourceClient<V1Node>(transportFor(cp.adminKubeconfig), NODES);
  const name = `handover-${process.pid}-1`;
  await nodes.create({ metadata: { name }, spec: { taints: [UNINITIALIZED] } });
  await a.waitForLog(`node=${name}`);
  expect(b.logs()).not.toContain('successfully acquired lease');
  expect(b.logs()).not.toContain(`node=${name}`);

  const killedAt = performance.now();
  a.proc.kill('SIGKILL');
  await b.waitForLog('successfully acquired lease', 15_000);
  const takeoverMs = performance.now() - killedAt;
  console.log(`standby took over ${takeoverMs.toFixed(0)}ms after SIGKILL (lease 3s + retry 0.5s)`);

  const second = `handover-${process.pid}-2`;
  await nodes.create({ metadata: { name: second }, spec: { taints: [UNINITIALIZED] } });
  await b.waitForLog(`node=${second}`);
  for (const n of [name, second]) await nodes.delete(n);
}, 90_000);

test('SIGTERM releases the lease so a standby takes over at once', async () => {
  const dir = tempDir('edge-ccm-release-');
  writeFileSync(join(dir, 'fake.json'), JSON.stringify({}));
  // A 60s lease: without the release the standby would wait a minute.
  const lease = `release-${process.pid}`;
  const a = replica(dir, lease, '60s');
  await a.waitForLog('successfully acquired lease');
  const b = replica(dir, lease, '60s');
  await b.waitForLog('attempting to acquire leader lease');
  const stoppedAt = performance.now();
  expect(await a.stop('SIGTERM')).toBe(0);
  expect(a.logs()).toContain('released lease');
  // Without the release the standby could only take over once the 60s lease expired; it must
  // not have to wait for that (the wait below gives up long before).
  await b.waitForLog('successfully acquired lease', 15_000);
  console.log(`standby took over ${(performance.now() - stoppedAt).toFixed(0)}ms after SIGTERM`);
}, 90_000);

test('with --exit-on-lease-loss, a leader that loses its lease exits non-zero at once, as upstream', async () => {
  const dir = tempDir('edge-ccm-lost-');
  writeFileSync(join(dir, 'fake.json'), JSON.stringify({}));
  const lease = `lost-${process.pid}`;
  const a = replica(dir, lease, '3s', ['--exit-on-lease-loss']);
  await a.waitForLog('successfully acquired lease');
  // Someone else takes the Lease over (as an operator or a split brain would).
  await takeOverLease(transportFor(cp.adminKubeconfig), 'kube-system', lease);
  expect(await a.exited()).not.toBe(0);
  expect(a.logs()).toContain('leader election lost');
}, 60_000);

test('SIGTERM while the term is starting, with a provider start that finishes anyway: no controller starts, a clean stop (exit 0, lease released)', async () => {
  const dir = tempDir('edge-ccm-late-start-');
  writeFileSync(join(dir, 'fake.json'), JSON.stringify({ initializeOutlivesCancel: true }));
  const a = replica(dir, `late-start-${process.pid}`, '60s');
  await a.waitForLog('successfully acquired lease');
  // The provider's start returns once the stop is signalled: the term must not go on to start
  // controllers and informers on an already-cancelled signal (they would never end).
  expect(await a.stop('SIGTERM'), a.logs()).toBe(0);
  expect(a.logs()).toContain('released lease');
  expect(a.logs()).not.toContain('started controller');
}, 60_000);

test('SIGTERM while the provider is still starting is a clean stop: exit 0, lease released', async () => {
  const dir = tempDir('edge-ccm-slow-start-');
  writeFileSync(join(dir, 'fake.json'), JSON.stringify({ initializeHangs: true }));
  const a = replica(dir, `slow-start-${process.pid}`, '60s');
  await a.waitForLog('successfully acquired lease');
  // The controllers wait for the provider's start, which waits for the cancel: stop now.
  expect(await a.stop('SIGTERM'), a.logs()).toBe(0);
  expect(a.logs()).toContain('released lease');
  expect(a.logs()).not.toContain('controllers failed');
}, 60_000);
