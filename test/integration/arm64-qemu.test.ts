import { afterAll, beforeAll, expect, test } from 'bun:test';
import { existsSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { V1Node } from '@kubernetes/client-node';
import pkg from '../../package.json' with { type: 'json' };
import { NODES, ResourceClient } from '../../src/kube/resources.ts';
import { CcmProcess, tempDir } from '../harness/ccm-process.ts';
import { type ControlPlane, sharedControlPlane } from '../harness/control-plane.ts';
import { eventually } from '../harness/eventually.ts';
import { transportFor } from '../harness/kubeconfig.ts';
import { UNINITIALIZED } from '../harness/nodes.ts';
import { runToEnd } from '../harness/run-to-end.ts';

/**
 * dist/edge-ccm-linux-arm64, cross-compiled on this amd64 machine, run for real under
 * qemu-aarch64-static (user-mode emulation) with Debian's arm64 loader and libc (libc6:arm64):
 * --version, validate, the client self-test against the real API server, and the daemon
 * initialising a node. (The arm64 image's files run the same way in podman-image.test.ts.)
 */
const ROOT = resolve(import.meta.dir, '../..');
const BINARY = join(ROOT, 'dist/edge-ccm-linux-arm64');
const LOADER = '/lib/ld-linux-aarch64.so.1';
const INSTALL = 'run scripts/install-test-deps.sh (Debian qemu-user-static and libc6:arm64 after `dpkg --add-architecture arm64`)';
// Emulated, the JIT and start-up run several times slower than native.
const WAIT_MS = 180_000;

let qemu: string;
let cp: ControlPlane;

beforeAll(async () => {
  qemu = Bun.which('qemu-aarch64-static') ?? '';
  if (!qemu) throw new Error(`qemu-aarch64-static is missing: ${INSTALL}`);
  if (!existsSync(LOADER)) throw new Error(`the arm64 loader ${LOADER} is missing: ${INSTALL}`);
  if (!existsSync(BINARY)) throw new Error(`${BINARY} is missing: run \`bun run build\` first`);
  cp = await sharedControlPlane();
}, 240_000);

afterAll(async () => {
  await CcmProcess.stopAll('SIGKILL');
});

/** The arm64 binary under qemu, to its end. */
const run = (args: string[]) => runToEnd([qemu, BINARY, ...args], { timeoutMs: WAIT_MS });

test('the binary is arm64 (not silently the host\'s) and prints its version under qemu', async () => {
  const elf = Buffer.from(await Bun.file(BINARY).slice(0, 20).arrayBuffer());
  expect(elf.readUInt16LE(18)).toBe(183); // e_machine EM_AARCH64
  const { exitCode, output } = await run(['--version']);
  expect({ exitCode, output: output.trim() }).toMatchObject({ exitCode: 0, output: expect.stringMatching(new RegExp(`^edge-ccm ${pkg.version.replaceAll('.', '\\.')} \\(commit [0-9a-f]{7,40}(-dirty)?, bun `)) });
}, WAIT_MS);

test('validate: a good inventory passes, a bad one exits 2 with the line', async () => {
  const dir = tempDir('edge-ccm-arm64-');
  const good = join(dir, 'good.yaml');
  writeFileSync(good, 'inventory:\n  machines:\n    - { id: arm-a, addresses: [{ type: InternalIP, address: 10.4.0.1 }] }\n');
  expect(await run(['validate', '--cloud-provider', 'static', '--cloud-config', good])).toMatchObject({ exitCode: 0, output: `${good}: valid static configuration\n` });
  const bad = join(dir, 'bad.yaml');
  writeFileSync(bad, 'inventory:\n  machines:\n    - { id: arm-a, addresses: [{ type: InternalIP, address: not-an-ip }] }\n');
  const rejected = await run(['validate', '--cloud-provider', 'static', '--cloud-config', bad]);
  expect(rejected.exitCode).toBe(2);
  expect(rejected.output).toContain(`${bad}:3:`);
}, WAIT_MS * 2);

test('selftest passes every client check against the real API server', async () => {
  const kubeconfig = await cp.clientCertKubeconfig('arm64-selftest', ['system:masters']);
  const { exitCode, output } = await run(['selftest', '--kubeconfig', kubeconfig]);
  expect({ exitCode, output }).toMatchObject({ exitCode: 0 });
  expect(output).toContain('selftest passed');
}, WAIT_MS);

test('the daemon under qemu takes the lease and initialises a node', async () => {
  const dir = tempDir('edge-ccm-arm64-');
  const node = `arm64-${process.pid}`;
  const inventory = join(dir, 'inventory.yaml');
  writeFileSync(inventory, `inventory:\n  defaults: { instanceType: arm-metal }\n  machines:\n    - { id: ${node}, addresses: [{ type: InternalIP, address: 10.4.0.2 }] }\n`);
  const ccm = CcmProcess.binary([
    BINARY, '--cloud-provider=static', `--cloud-config=${inventory}`, `--kubeconfig=${cp.adminKubeconfig}`, '--secure-port=0',
    `--leader-elect-resource-name=arm64-${process.pid}`, '--leader-elect-retry-period=500ms', '--controllers=cloud-node',
  ], {}, qemu);
  await ccm.waitForLog('successfully acquired lease', WAIT_MS);
  const nodes = new ResourceClient<V1Node>(transportFor(cp.adminKubeconfig), NODES);
  await nodes.create({ metadata: { name: node }, spec: { taints: [UNINITIALIZED] } });
  try {
    const initialised = await eventually(`node ${node} initialised`, async () => {
      if (ccm.proc.exitCode !== null) throw new Error(`edge-ccm exited ${ccm.proc.exitCode}:\n${ccm.logs()}`);
      const n = await nodes.get(node);
      return n.spec?.providerID && !n.spec.taints?.some((t) => t.key === UNINITIALIZED.key) ? n : undefined;
    }, WAIT_MS);
    expect(initialised.spec?.providerID).toBe(`static://${node}`);
    expect(initialised.metadata?.labels?.['node.kubernetes.io/instance-type']).toBe('arm-metal');
    expect(await ccm.stop('SIGTERM', 60_000)).toBe(0);
  } finally {
    await nodes.delete(node).catch(() => undefined);
  }
}, WAIT_MS * 2);
