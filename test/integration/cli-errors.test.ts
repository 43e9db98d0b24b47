import { expect, test } from 'bun:test';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CcmProcess, tempDir } from '../harness/ccm-process.ts';

/** Contract section 1 and 5: bad provider input stops the process at once with exit code 2. */
async function run(p: CcmProcess): Promise<{ code: number; output: string }> {
  const timer = setTimeout(() => void p.stop('SIGKILL'), 30_000);
  const code = await p.exited();
  clearTimeout(timer);
  return { code, output: p.logs() };
}

test('an unknown --cloud-provider exits 2 naming the known ones', async () => {
  const { code, output } = await run(CcmProcess.binary(['--cloud-provider=nimbus', '--kubeconfig=/nonexistent']));
  expect(code).toBe(2);
  expect(output).toContain('--cloud-provider: unknown cloud provider "nimbus" (known: proxmox, static)');
});

test('an unreadable --cloud-config exits 2 naming the file', async () => {
  const { code, output } = await run(CcmProcess.binary(['--cloud-provider=static', '--cloud-config=/nonexistent/inventory.yaml']));
  expect(code).toBe(2);
  expect(output).toContain('--cloud-config: cannot read /nonexistent/inventory.yaml');
});

test('an invalid static inventory exits 2 with every problem and its line', async () => {
  const dir = tempDir('edge-ccm-cli-errors-');
  writeFileSync(join(dir, 'bad.yaml'), 'inventory:\n  authoritative: yes\n');
  const { code, output } = await run(CcmProcess.binary(['--cloud-provider=static', `--cloud-config=${join(dir, 'bad.yaml')}`]));
  expect(code).toBe(2);
  expect(output).toContain(`${join(dir, 'bad.yaml')}:2: inventory.authoritative`);
});

test('routes configured with a bad or missing --cluster-cidr exit 2', async () => {
  const dir = tempDir('edge-ccm-cli-errors-');
  writeFileSync(join(dir, 'fake.json'), '{}');
  const bad = await run(CcmProcess.fake(['--cloud-provider=fake', `--cloud-config=${join(dir, 'fake.json')}`, '--cluster-cidr=10.0.0.0/33,fd00::/64']));
  expect(bad.code).toBe(2);
  expect(bad.output).toContain('--cluster-cidr');
  const none = await run(CcmProcess.fake(['--cloud-provider=fake', `--cloud-config=${join(dir, 'fake.json')}`]));
  expect(none.code).toBe(2);
  expect(none.output).toContain('--cluster-cidr: required when routes are configured');
});
