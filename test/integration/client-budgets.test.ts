import { afterAll, beforeAll, expect, test } from 'bun:test';
import { join } from 'node:path';
import type { V1Node } from '@kubernetes/client-node';
import { sharedControlPlane, type ControlPlane } from '../harness/control-plane.ts';
import { readAuditLog } from '../harness/audit.ts';
import { CcmProcess, fakeProviderConfig } from '../harness/ccm-process.ts';
import { eventually } from '../harness/eventually.ts';
import { transportFor } from '../harness/kubeconfig.ts';
import { NODES, ResourceClient } from '../../src/kube/resources.ts';
import { UNINITIALIZED } from '../harness/nodes.ts';

/**
 * As upstream, where every controller, the leader elector and the shared informers each get a
 * client of their own (ClientBuilder.ClientOrDie(name)), each component has its own
 * --kube-api-qps/--kube-api-burst budget. The case that matters: a busy controller must never
 * make the lease renewal wait behind its queue of writes, or the leader loses its lease (and
 * exits) exactly when the cluster needs it most.
 */
let cp: ControlPlane;

beforeAll(async () => {
  cp = await sharedControlPlane();
}, 240_000);
afterAll(() => CcmProcess.stopAll());

test('a node-controller burst that saturates its budget does not starve the lease renewal', async () => {
  const fakeConfig = fakeProviderConfig('edge-ccm-budgets-');
  const lease = `budgets-${process.pid}`;
  // 40 nodes x 2 writes at 5 qps keep the node controller's budget busy for about 16 s, with up
  // to 30 writes waiting for a token (6 s of queue). A renewal queued behind them would miss the
  // 3 s renew deadline; with a budget of its own it needs at most 2 requests per 1 s period.
  const proc = CcmProcess.fake([
    '--cloud-provider=fake', `--cloud-config=${fakeConfig}`, `--kubeconfig=${cp.adminKubeconfig}`,
    '--secure-port=0', '--controllers=cloud-node', `--leader-elect-resource-name=${lease}`,
    '--leader-elect-lease-duration=4s', '--leader-elect-renew-deadline=3s', '--leader-elect-retry-period=1s',
    '--kube-api-qps=5', '--kube-api-burst=5', '--concurrent-node-syncs=30',
  ]);
  await proc.waitForLog('successfully acquired lease');

  const nodes = new ResourceClient<V1Node>(transportFor(cp.adminKubeconfig), NODES);
  const names = Array.from({ length: 40 }, (_, i) => `budgets-${process.pid}-${i}`);
  try {
    await Promise.all(names.map((name) => nodes.create({ metadata: { name }, spec: { taints: [UNINITIALIZED] } })));
    await eventually('all 40 nodes initialised', async () => {
      if (proc.proc.exitCode !== null) throw new Error(`edge-ccm exited (${proc.proc.exitCode}):\n${proc.logs().slice(-3000)}`);
      const list = await nodes.list();
      const ours = list.items.filter((n) => names.includes(n.metadata?.name ?? ''));
      return ours.length === names.length && ours.every((n) => n.spec?.providerID && !n.spec.taints?.some((t) => t.key === UNINITIALIZED.key));
    }, 90_000);
    expect(proc.proc.exitCode).toBeNull();
    expect(proc.logs()).not.toContain('leader election lost');
    expect(proc.logs()).not.toContain('failed to renew lease');
    // Each kind of request came from its component's own client (the user agent says which).
    const agents = new Map<string, Set<string>>();
    for (const e of readAuditLog(cp.auditLogPath)) {
      const name = e.objectRef?.name ?? '';
      if (name !== lease && !name.startsWith(`budgets-${process.pid}-`)) continue;
      if (!e.userAgent?.startsWith('edge-ccm/')) continue;
      const what = `${e.verb} ${e.objectRef?.resource}${e.objectRef?.subresource ? `/${e.objectRef.subresource}` : ''}`;
      agents.set(what, (agents.get(what) ?? new Set()).add(e.userAgent.split('/').slice(2).join('/')));
    }
    expect([...(agents.get('update leases') ?? [])]).toEqual(['leader-election']);
    expect([...(agents.get('patch nodes') ?? [])]).toEqual(['cloud-node-controller']);
    expect([...(agents.get('patch nodes/status') ?? [])]).toEqual(['cloud-node-controller']);
  } finally {
    await Promise.all(names.map((name) => nodes.delete(name).catch(() => undefined)));
  }
}, 120_000);
