import { afterAll, describe, expect, test } from 'bun:test';
import { chmodSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { CoreV1Event } from '@kubernetes/client-node';
import { EVENTS, ResourceClient } from '../../src/kube/resources.ts';
import { aliasBomb } from '../harness/alias-bomb.ts';
import { CcmProcess, ccmBinaryCommand, tempDir } from '../harness/ccm-process.ts';
import { sharedControlPlane } from '../harness/control-plane.ts';
import { eventually } from '../harness/eventually.ts';
import { giveToForeignGroup, replaceFile } from '../harness/files.ts';
import { kubeconfigToken, transportFor } from '../harness/kubeconfig.ts';
import { freeLoopbackPorts } from '../harness/ports.ts';
import { runToEnd } from '../harness/run-to-end.ts';

/**
 * Issue 11 (items 3, 4 and 5) through the compiled binary: no secret in any line `validate` or
 * the daemon prints, nor in any event it records; a URL with user:password@ refused; the YAML
 * alias bomb, /dev/zero and a FIFO are config errors (no stack trace, no hang); a secret file
 * others can read is warned about in the log and as an InsecureSecretFile event.
 */

const SECRET = '80211942';
const FILE_SECRET = 'hunter2-in-a-file';

afterAll(() => CcmProcess.stopAll());

/** The binary to its end; still running after a minute, it is killed (a hang, shown with its output). */
const run = (args: string[]) => runToEnd(ccmBinaryCommand(args), { timeoutMs: 60_000 });

function file(dir: string, name: string, text: string, mode = 0o600): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  chmodSync(path, mode);
  return path;
}

const validate = (provider: string, path: string) => run(['validate', '--cloud-provider', provider, '--cloud-config', path]);

/** No trace of a crash: no JavaScript stack frame, no Bun crash banner. */
function expectNoCrash(output: string): void {
  expect(output).not.toMatch(/^\s+at .+[:(]\d+/m);
  expect(output).not.toContain('Bun v');
}

const machine = (id: string, redfish: string) => `    - id: ${id}\n      redfish: ${redfish}\n`;

describe('validate', () => {
  test('a secret of the wrong type, or in an endpoint URL, is reported without being printed (static and proxmox)', async () => {
    const dir = tempDir('edge-ccm-hardening-');
    const inventory = file(dir, 'inventory.yaml', `inventory:\n  machines:\n${machine('m1', `{ endpoint: "https://198.51.100.10", username: admin, password: ${SECRET} }`)}${machine('m2', `{ endpoint: "https://admin:${SECRET}@198.51.100.11", username: admin, passwordEnv: BMC }`)}`);
    const s = await validate('static', inventory);
    expect(s.exitCode).not.toBe(0);
    expect(s.output).toContain(`${inventory}:4: inventory.machines[0].redfish.password: wrong type`);
    expect(s.output).toContain(`${inventory}:6: inventory.machines[1].redfish.endpoint: must not contain a user or password`);
    expect(s.output).not.toContain(SECRET);

    const proxmox = file(dir, 'proxmox.yaml', ['clusters:', '  - region: fra1', `    url: https://root:${SECRET}@pve1.example.com:8006`, '    tokenId: ccm@pve!edge-ccm', `    tokenSecret: ${SECRET}`, ''].join('\n'));
    const p = await validate('proxmox', proxmox);
    expect(p.exitCode).not.toBe(0);
    expect(p.output).toContain(`${proxmox}:5: clusters[0].tokenSecret: wrong type`);
    expect(p.output).toContain(`${proxmox}:3: clusters[0].url: must not contain a user or password`);
    expect(p.output).not.toContain(SECRET);
  }, 120_000);

  test('a YAML alias bomb is one config error, not a crash', async () => {
    const path = file(tempDir('edge-ccm-hardening-'), 'bomb.yaml', aliasBomb());
    for (const provider of ['static', 'proxmox']) {
      const { exitCode, output } = await validate(provider, path);
      expect(exitCode).not.toBe(0);
      expect(output).toContain(`${path}:1: : too many YAML aliases`);
      expectNoCrash(output);
    }
  }, 120_000);

  test('passwordFile /dev/zero or a FIFO is a config error naming it, and validate ends', async () => {
    const dir = tempDir('edge-ccm-hardening-');
    const fifo = join(dir, 'fifo');
    expect(Bun.spawnSync(['mkfifo', fifo]).exitCode).toBe(0);
    const path = file(dir, 'inventory.yaml', `inventory:\n  machines:\n${machine('m1', '{ endpoint: "https://198.51.100.10", username: admin, passwordFile: /dev/zero }')}${machine('m2', `{ endpoint: "https://198.51.100.11", username: admin, passwordFile: ${fifo} }`)}`);
    const { exitCode, output } = await validate('static', path);
    expect(exitCode).not.toBe(0);
    expect(output).toContain('cannot read passwordFile /dev/zero: /dev/zero is a character device, not a regular file');
    expect(output).toContain(`cannot read passwordFile ${fifo}: ${fifo} is a FIFO, not a regular file`);
    expectNoCrash(output);
  }, 120_000);

  test('a --cloud-config that is a FIFO or over 4 MiB is refused before reading', async () => {
    const dir = tempDir('edge-ccm-hardening-');
    const fifo = join(dir, 'config-fifo');
    expect(Bun.spawnSync(['mkfifo', fifo]).exitCode).toBe(0);
    const fromFifo = await validate('static', fifo);
    expect(fromFifo.exitCode).toBe(2);
    expect(fromFifo.output).toContain(`--cloud-config: cannot read ${fifo}: ${fifo} is a FIFO, not a regular file`);
    const big = file(dir, 'big.yaml', `# ${'x'.repeat(4 * 1024 * 1024)}\n`);
    const fromBig = await validate('static', big);
    expect(fromBig.exitCode).toBe(2);
    expect(fromBig.output).toContain(`more than the limit of ${4 * 1024 * 1024} bytes`);
  }, 120_000);

  test('a secret file its group or others can read: a warning naming file and mode, exit 0, the secret not printed', async () => {
    const dir = tempDir('edge-ccm-hardening-');
    const secret = file(dir, 'bmc-password', `${FILE_SECRET}\n`, 0o644);
    giveToForeignGroup(secret); // its group read is an exposure only when edge-ccm is not in it
    const path = file(dir, 'inventory.yaml', `inventory:\n  machines:\n${machine('m1', `{ endpoint: "https://198.51.100.10", username: admin, passwordFile: ${secret} }`)}`);
    const { exitCode, output } = await validate('static', path);
    expect(exitCode).toBe(0);
    expect(output).toContain(`${path}:4: inventory.machines[0].redfish: warning: passwordFile ${secret} is readable by its group and others (mode 0644)`);
    expect(output).not.toContain(FILE_SECRET);
  }, 120_000);
});

describe('the daemon', () => {
  test('started on a file with a secret of the wrong type, or an alias bomb, exits 2 printing no secret and no stack', async () => {
    const dir = tempDir('edge-ccm-hardening-');
    const bad = file(dir, 'inventory.yaml', `inventory:\n  machines:\n${machine('m1', `{ endpoint: "https://admin:${SECRET}@198.51.100.10", username: admin, password: ${SECRET} }`)}`);
    const secretRun = await run(['--cloud-provider=static', `--cloud-config=${bad}`, '--kubeconfig=/nonexistent']);
    expect(secretRun.exitCode).toBe(2);
    expect(secretRun.output).toContain('inventory.machines[0].redfish.password: wrong type');
    expect(secretRun.output).not.toContain(SECRET);
    const bomb = await run(['--cloud-provider=static', `--cloud-config=${file(dir, 'bomb.yaml', aliasBomb())}`, '--kubeconfig=/nonexistent']);
    expect(bomb.exitCode).toBe(2);
    expect(bomb.output).toContain('too many YAML aliases');
    expectNoCrash(bomb.output);
  }, 120_000);

  test('against the API server: InsecureSecretFile at start; a reload with a mistyped secret or an alias bomb is rejected, counted and recorded; no line or event holds a secret', async () => {
    const cp = await sharedControlPlane();
    const admin = transportFor(cp.adminKubeconfig);
    const adminToken = kubeconfigToken(cp.tokenKubeconfig('admin'));
    const lease = `hardening-${process.pid}`;
    const dir = tempDir('edge-ccm-hardening-');
    const secretFile = file(dir, 'bmc-password', `${FILE_SECRET}\n`, 0o640);
    giveToForeignGroup(secretFile);
    const inventory = join(dir, 'inventory.yaml');
    const good = `inventory:\n  machines:\n${machine(`${lease}-m1`, `{ endpoint: "https://198.51.100.10", username: admin, passwordFile: ${secretFile} }`)}`;
    writeFileSync(inventory, good);
    const [port] = await freeLoopbackPorts(1);
    const ccm = CcmProcess.binary([
      '--cloud-provider=static', `--cloud-config=${inventory}`, `--kubeconfig=${cp.adminKubeconfig}`,
      '--bind-address=127.0.0.1', `--secure-port=${port}`, `--leader-elect-resource-name=${lease}`,
      '--leader-elect-lease-duration=3s', '--leader-elect-renew-deadline=2s', '--leader-elect-retry-period=500ms',
      '--controllers=cloud-node,cloud-node-lifecycle',
    ]);
    const events = new ResourceClient<CoreV1Event>(admin, EVENTS);
    const leaseEvents = async (reason: string) => (await events.list({
      namespace: 'kube-system', query: { fieldSelector: `involvedObject.kind=Lease,involvedObject.name=${lease},reason=${reason}` },
    })).items;

    await ccm.waitForLog('successfully acquired lease', 60_000);
    expect(ccm.logs()).toContain(`passwordFile ${secretFile} is readable by its group (mode 0640)`);
    const insecure = await eventually('the InsecureSecretFile event', async () => (await leaseEvents('InsecureSecretFile')).find((e) => e.type === 'Warning'));
    expect(insecure.message).toContain(`${inventory}:4: inventory.machines[0].redfish: passwordFile ${secretFile} is readable by its group`);

    replaceFile(inventory, `inventory:\n  machines:\n${machine(`${lease}-m1`, `{ endpoint: "https://admin:${SECRET}@198.51.100.10", username: admin, password: ${SECRET} }`)}`);
    await eventually('the mistyped secret rejected', async () => (await leaseEvents('CloudConfigRejected')).find((e) => e.message?.includes('redfish.password: wrong type')));
    replaceFile(inventory, aliasBomb());
    await eventually('the alias bomb rejected', async () => (await leaseEvents('CloudConfigRejected')).find((e) => e.message?.includes('too many YAML aliases')));

    const metrics = await (await fetch(`https://127.0.0.1:${port}/metrics`, { headers: { authorization: `Bearer ${adminToken}` }, tls: { rejectUnauthorized: false } })).text();
    expect(metrics).toMatch(/^edge_ccm_static_config_reload_errors_total 2$/m);

    replaceFile(inventory, good);
    await ccm.stop();
    const ours = (await events.list({ namespace: 'kube-system', query: { fieldSelector: `involvedObject.kind=Lease,involvedObject.name=${lease}` } })).items;
    expect(ours.length).toBeGreaterThanOrEqual(3);
    for (const text of [ccm.logs(), ...ours.map((e) => JSON.stringify(e))]) {
      expect(text).not.toContain(SECRET);
      expect(text).not.toContain(FILE_SECRET);
    }
    expectNoCrash(ccm.logs());
  }, 240_000);
});
