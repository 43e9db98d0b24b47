import { afterEach, beforeAll, expect, test } from 'bun:test';
import type { V1Node } from '@kubernetes/client-node';
import { NODES, ResourceClient } from '../../src/kube/resources.ts';
import { auditTime } from '../soak/audit-tail.ts';
import { settledAuditLog } from '../harness/audit.ts';
import { CcmProcess, fakeProviderConfig } from '../harness/ccm-process.ts';
import { sharedControlPlane, type ControlPlane } from '../harness/control-plane.ts';
import { eventually } from '../harness/eventually.ts';
import { transportFor } from '../harness/kubeconfig.ts';
import { UNINITIALIZED } from '../harness/nodes.ts';

/**
 * A leader paused (SIGSTOP) past its lease must not write when it wakes up before it has renewed
 * the lease: found by the fault soak (scripts/soak --seed 2 --profile ci), where a woken leader
 * patched a node 3.8 s after its lease had expired, before its renewal loop noticed.
 */
let cp: ControlPlane;

beforeAll(async () => {
  cp = await sharedControlPlane();
}, 240_000);
afterEach(() => CcmProcess.stopAll());

test('a leader woken after its lease expired writes nothing until it has renewed the lease', async () => {
  const user = `paused-leader-${process.pid}`;
  const lease = `paused-${process.pid}`;
  const kubeconfig = await cp.clientCertKubeconfig(user, ['system:masters']);
  const fakeConfig = fakeProviderConfig('edge-ccm-paused-');
  const leader = CcmProcess.fake([
    '--cloud-provider=fake', `--cloud-config=${fakeConfig}`, `--kubeconfig=${kubeconfig}`,
    '--secure-port=0', '--controllers=cloud-node', `--leader-elect-resource-name=${lease}`,
    '--leader-elect-lease-duration=3s', '--leader-elect-renew-deadline=2s', '--leader-elect-retry-period=500ms',
  ]);
  await leader.waitForLog('successfully acquired lease');

  const nodes = new ResourceClient<V1Node>(transportFor(cp.adminKubeconfig), NODES);
  const name = `paused-${process.pid}`;
  leader.proc.kill('SIGSTOP');
  // Paused past the lease (3 s) with work waiting for it: a node to initialise. The pause is the
  // fault itself, a fixed time on purpose (longer than the lease from any renewal before SIGSTOP).
  await nodes.create({ metadata: { name }, spec: { taints: [UNINITIALIZED] } });
  await Bun.sleep(4_500);
  const wokenAt = Date.now();
  leader.proc.kill('SIGCONT');
  // Nobody else took the lease: the leader renews it and then does the work.
  await eventually(`node ${name} initialised`, async () => !(await nodes.get(name)).spec?.taints?.some((t) => t.key === UNINITIALIZED.key), 30_000);

  const ours = (await settledAuditLog(cp.auditLogPath)).filter((e) => e.user?.username === user && ['create', 'update', 'patch', 'delete'].includes(e.verb));
  const after = ours.filter((e) => auditTime(e.requestReceivedTimestamp) >= wokenAt - 1000);
  const firstRenewal = after.find((e) => e.objectRef?.resource === 'leases' && e.objectRef.name === lease && (e.responseStatus?.code ?? 0) < 300);
  expect(firstRenewal, 'the woken leader renewed its lease').toBeDefined();
  const early = after.filter((e) => e.objectRef?.resource === 'nodes' && auditTime(e.requestReceivedTimestamp) < auditTime(firstRenewal!.requestReceivedTimestamp));
  expect(early.map((e) => `${e.verb} nodes/${e.objectRef?.name} at ${e.requestReceivedTimestamp} (renewed at ${firstRenewal!.requestReceivedTimestamp})`)).toEqual([]);
  await nodes.delete(name);
}, 90_000);
