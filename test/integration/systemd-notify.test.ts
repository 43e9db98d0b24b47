import { afterEach, beforeAll, expect, test } from 'bun:test';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { sharedControlPlane, type ControlPlane } from '../harness/control-plane.ts';
import { CcmProcess, tempDir } from '../harness/ccm-process.ts';
import { eventually } from '../harness/eventually.ts';
import { NotifySocket } from '../harness/notify-socket.ts';

/**
 * The compiled binary under deploy/systemd/edge-ccm.service's Type=notify: READY=1 once it
 * serves, its state in STATUS=, STOPPING=1 when told to stop, all on the socket systemd names
 * in NOTIFY_SOCKET (played here by the test).
 */
let cp: ControlPlane;
let socket: NotifySocket | undefined;

beforeAll(async () => {
  cp = await sharedControlPlane();
}, 240_000);
afterEach(async () => {
  await CcmProcess.stopAll();
  socket?.close();
  socket = undefined;
});

test('the binary tells systemd it is ready, what it is doing, and that it is stopping', async () => {
  const dir = tempDir('edge-ccm-notify-');
  socket = new NotifySocket(dir);
  const inventory = join(dir, 'inventory.yaml');
  writeFileSync(inventory, 'inventory:\n  machines: []\n');
  const ccm = CcmProcess.binary([
    '--cloud-provider=static', `--cloud-config=${inventory}`, `--kubeconfig=${cp.adminKubeconfig}`,
    '--secure-port=0', `--leader-elect-resource-name=notify-${process.pid}`, '--leader-elect-retry-period=500ms',
  ], { NOTIFY_SOCKET: socket.path });
  const s = socket;
  await eventually('READY=1', () => s.lines().includes('READY=1'), 30_000);
  expect(s.lines().slice(0, 2)).toEqual(['READY=1', 'STATUS=standby: waiting for the leader lease']);
  await eventually('the leading status', () => s.lines().includes('STATUS=leading: running the controllers'), 30_000);
  const code = await ccm.stop('SIGTERM');
  expect(code, ccm.logs()).toBe(0);
  const lines = s.lines();
  expect(lines).toContain('STOPPING=1');
  expect(lines.indexOf('STOPPING=1')).toBeGreaterThan(lines.indexOf('STATUS=leading: running the controllers'));
  expect(lines.filter((l) => l === 'READY=1')).toHaveLength(1);
}, 90_000);
