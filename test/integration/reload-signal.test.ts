import { afterAll, expect, test } from 'bun:test';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { V1Node } from '@kubernetes/client-node';
import { NODES, ResourceClient } from '../../src/kube/resources.ts';
import { CcmProcess, tempDir } from '../harness/ccm-process.ts';
import { sharedControlPlane } from '../harness/control-plane.ts';
import { eventually } from '../harness/eventually.ts';
import { transportFor } from '../harness/kubeconfig.ts';
import { UNINITIALIZED } from '../harness/nodes.ts';

/**
 * SIGHUP, which `systemctl reload edge-ccm` sends (ExecReload= in deploy/systemd/edge-ccm.service):
 * the compiled binary reads its cloud config again at once and keeps running (without a handler
 * the signal would end it); a rejected text leaves the last good one in force, as any reload.
 */
afterAll(async () => {
  await CcmProcess.stopAll('SIGKILL');
});

test('SIGHUP reads the cloud config again now, good or bad, and the process runs on', async () => {
  const cp = await sharedControlPlane();
  const dir = tempDir('edge-ccm-sighup-');
  const config = join(dir, 'inventory.yaml');
  const inventory = (id: string) => `inventory:\n  machines:\n    - { id: ${id}, addresses: [{ type: InternalIP, address: 10.6.0.1 }] }\n`;
  writeFileSync(config, inventory(`hup-a-${process.pid}`));
  const ccm = CcmProcess.binary([
    '--cloud-provider=static', `--cloud-config=${config}`, `--kubeconfig=${cp.adminKubeconfig}`, '--secure-port=0',
    `--leader-elect-resource-name=sighup-${process.pid}`, '--leader-elect-retry-period=500ms', '--controllers=cloud-node',
  ]);
  await ccm.waitForLog('successfully acquired lease', 60_000);

  const hups = () => ccm.logs().split('SIGHUP: reading the cloud config again').length - 1;
  ccm.proc.kill('SIGHUP');
  await ccm.waitForLog('SIGHUP: cloud config unchanged', 30_000);
  expect(hups()).toBe(1);

  writeFileSync(config, 'inventory: [not, a, mapping]\n');
  ccm.proc.kill('SIGHUP');
  await ccm.waitForLog('static provider configuration rejected; the last good configuration stays in force', 30_000);
  // The file watcher may have seen the edit first: then the signal finds the text already read.
  await ccm.waitForLog(/SIGHUP: cloud config (rejected|unchanged)/, 30_000);

  const node = `hup-b-${process.pid}`;
  writeFileSync(config, inventory(node));
  ccm.proc.kill('SIGHUP');
  // Its outcome: the third one logged (reloaded, or unchanged when the watcher was first).
  await ccm.waitForLog(/(SIGHUP: cloud config (?:unchanged|rejected|reloaded)[\s\S]*){3}/, 30_000);
  expect(ccm.logs()).toMatch(/SIGHUP: cloud config (reloaded|unchanged)(?![\s\S]*SIGHUP: cloud config)/);
  expect(hups()).toBe(3);
  expect(ccm.proc.exitCode).toBeNull();
  // The edit is in force: a node of the new machine is initialised.
  const nodes = new ResourceClient<V1Node>(transportFor(cp.adminKubeconfig), NODES);
  await nodes.create({ metadata: { name: node }, spec: { taints: [UNINITIALIZED] } });
  try {
    const initialised = await eventually(`node ${node} initialised`, async () => (await nodes.get(node)).spec?.providerID, 60_000);
    expect(initialised).toBe(`static://${node}`);
  } finally {
    await nodes.delete(node).catch(() => undefined);
  }
  expect(await ccm.stop('SIGTERM')).toBe(0);
}, 120_000);
