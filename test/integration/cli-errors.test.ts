import { expect, test } from 'bun:test';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ccmBinaryCommand, fakeCcmCommand, tempDir } from '../harness/ccm-process.ts';
import { runToEnd } from '../harness/run-to-end.ts';

/** Contract section 1 and 5: bad provider input stops the process at once with exit code 2. */
// A bound, not a wait: a process that does not stop is killed and fails with its output.
const run = (cmd: string[], env?: Record<string, string | undefined>) => runToEnd(cmd, { timeoutMs: 30_000, env });

test('an unknown --cloud-provider exits 2 naming the known ones', async () => {
  const { exitCode, output } = await run(ccmBinaryCommand(['--cloud-provider=nimbus', '--kubeconfig=/nonexistent']));
  expect(exitCode).toBe(2);
  expect(output).toContain('--cloud-provider: unknown cloud provider "nimbus" (known: lxd, proxmox, static)');
});

test('a misspelt flag alone: one line, with the flag it is near (not also "--cloud-provider: is required")', async () => {
  const { exitCode, output } = await run(ccmBinaryCommand(['--cloud-provder=static', '--kubeconfig=/nonexistent']));
  expect(exitCode).toBe(2);
  const problems = output.split('\n').filter((line) => /^\s*--/.test(line) || line.includes(': unknown flag') || line.includes('is required'));
  expect(problems.map((line) => line.replace(/^.*?(--)/, '$1'))).toEqual(['--cloud-provder: unknown flag (did you mean --cloud-provider?)']);
});

test('an unreadable --cloud-config exits 2 naming the file', async () => {
  const { exitCode, output } = await run(ccmBinaryCommand(['--cloud-provider=static', '--cloud-config=/nonexistent/inventory.yaml']));
  expect(exitCode).toBe(2);
  expect(output).toContain('--cloud-config: cannot read /nonexistent/inventory.yaml');
});

test('an invalid static inventory exits 2 with every problem and its line', async () => {
  const dir = tempDir('edge-ccm-cli-errors-');
  writeFileSync(join(dir, 'bad.yaml'), 'inventory:\n  authoritative: yes\n');
  const { exitCode, output } = await run(ccmBinaryCommand(['--cloud-provider=static', `--cloud-config=${join(dir, 'bad.yaml')}`]));
  expect(exitCode).toBe(2);
  expect(output).toContain(`${join(dir, 'bad.yaml')}:2: inventory.authoritative`);
});

test('routes configured with a bad or missing --cluster-cidr exit 2', async () => {
  const dir = tempDir('edge-ccm-cli-errors-');
  writeFileSync(join(dir, 'fake.json'), '{}');
  const bad = await run(fakeCcmCommand(['--cloud-provider=fake', `--cloud-config=${join(dir, 'fake.json')}`, '--cluster-cidr=10.0.0.0/33,fd00::/64']));
  expect(bad.exitCode).toBe(2);
  expect(bad.output).toContain('--cluster-cidr');
  const none = await run(fakeCcmCommand(['--cloud-provider=fake', `--cloud-config=${join(dir, 'fake.json')}`]));
  expect(none.exitCode).toBe(2);
  expect(none.output).toContain('--cluster-cidr: required when routes are configured');
});

test('validate and the daemon exit 2 on the same invalid file, as --help states', async () => {
  const dir = tempDir('edge-ccm-cli-errors-');
  const file = join(dir, 'bad.yaml');
  writeFileSync(file, 'inventory:\n  machines:\n    - id: a\n      region: "eu west"\n');
  const validate = await run(ccmBinaryCommand(['validate', '--cloud-provider', 'static', '--cloud-config', file]));
  const daemon = await run(ccmBinaryCommand(['--cloud-provider=static', `--cloud-config=${file}`, '--kubeconfig=/nonexistent']));
  expect(validate.exitCode).toBe(2);
  expect(daemon.exitCode).toBe(2);
  for (const { output } of [validate, daemon]) expect(output).toContain(`${file}:4: inventory.machines[0].region:`);
  const help = await run(ccmBinaryCommand(['--help']));
  expect(help.output).toContain('Exit codes:');
  // --help wraps at 80 columns when not a terminal: an exit code's meaning continues on lines indented to its text.
  const exitCodes = help.output.slice(help.output.indexOf('Exit codes:')).replace(/\n {6}(?=\S)/g, ' ');
  expect(exitCodes).toMatch(/^\s+2\s+.*invalid --cloud-config.*(validate|edge-ccm validate)/m);
});

test('a missing kubeconfig exits 2 naming the flag that gave it', async () => {
  const dir = tempDir('edge-ccm-cli-errors-');
  // A kubeconfig that parses; nothing connects before the missing file is refused.
  const kubeconfig = join(dir, 'kubeconfig');
  writeFileSync(kubeconfig, [
    'apiVersion: v1', 'kind: Config', 'current-context: c',
    'clusters: [{ name: c, cluster: { server: "https://127.0.0.1:9" } }]',
    'users: [{ name: u, user: { token: t } }]',
    'contexts: [{ name: c, context: { cluster: c, user: u } }]', '',
  ].join('\n'));
  const main = await run(ccmBinaryCommand(['--cloud-provider=static', `--kubeconfig=${join(dir, 'missing')}`]));
  expect(main.exitCode).toBe(2);
  expect(main.output).toContain(`error: --kubeconfig: file ${join(dir, 'missing')} does not exist`);
  const auth = await run(ccmBinaryCommand(['--cloud-provider=static', `--kubeconfig=${kubeconfig}`, `--authentication-kubeconfig=${join(dir, 'missing-authn')}`]));
  expect(auth.exitCode).toBe(2);
  expect(auth.output).toContain(`error: --authentication-kubeconfig: file ${join(dir, 'missing-authn')} does not exist`);
  // A file that is there but is no kubeconfig: named by its flag too.
  writeFileSync(join(dir, 'broken'), 'not: [a kubeconfig\n');
  const broken = await run(ccmBinaryCommand(['--cloud-provider=static', `--kubeconfig=${join(dir, 'broken')}`]));
  expect(broken.exitCode).toBe(2);
  expect(broken.output).toContain(`error: --kubeconfig: cannot load ${join(dir, 'broken')}:`);
  const brokenAuthz = await run(ccmBinaryCommand(['--cloud-provider=static', `--kubeconfig=${kubeconfig}`, `--authorization-kubeconfig=${join(dir, 'broken')}`]));
  expect(brokenAuthz.exitCode).toBe(2);
  expect(brokenAuthz.output).toContain(`error: --authorization-kubeconfig: cannot load ${join(dir, 'broken')}:`);
  const selftest = await run(ccmBinaryCommand(['selftest', '--kubeconfig', join(dir, 'missing')]));
  expect(selftest).toMatchObject({ exitCode: 2, output: `error: --kubeconfig: file ${join(dir, 'missing')} does not exist\n` });
});

test('a bad --authorization-always-allow-paths and a bad --cluster-cidr exit 2 naming the flag, routes or not', async () => {
  const paths = await run(ccmBinaryCommand(['--cloud-provider=static', '--authorization-always-allow-paths=/a*b', '--kubeconfig=/nonexistent']));
  expect(paths.exitCode).toBe(2);
  expect(paths.output).toContain('error: --authorization-always-allow-paths: only a trailing * is allowed in always-allow path "/a*b"');
  // The static provider has no routes: the flag is still checked.
  const cidr = await run(ccmBinaryCommand(['--cloud-provider=static', '--cluster-cidr=10.0.0.0/33', '--kubeconfig=/nonexistent']));
  expect(cidr.exitCode).toBe(2);
  expect(cidr.output).toContain('error: --cluster-cidr: invalid CIDR "10.0.0.0/33"');
});

test('no kubeconfig anywhere and not in a cluster: exit 2 with one line saying what was looked for, before serving', async () => {
  const home = tempDir('edge-ccm-no-kubeconfig-');
  const env = { HOME: home, KUBECONFIG: undefined, KUBERNETES_SERVICE_HOST: undefined, KUBERNETES_SERVICE_PORT: undefined };
  const none = await run(ccmBinaryCommand(['--cloud-provider=static', '--secure-port=0']), env);
  expect(none.exitCode).toBe(2);
  const errors = none.output.split('\n').filter((l) => l.startsWith('error:'));
  expect(errors).toEqual([
    `error: no Kubernetes API server to talk to: --kubeconfig and --master not given, KUBECONFIG not set, ${join(home, '.kube/config')} not found, and not in a cluster (KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT not set)`,
  ]);
  expect(none.output).not.toContain('serving');
  // KUBECONFIG naming only files that are not there: named as such.
  const gone = await run(ccmBinaryCommand(['--cloud-provider=static']), { ...env, KUBECONFIG: `${join(home, 'a')}:${join(home, 'b')}` });
  expect(gone.exitCode).toBe(2);
  expect(gone.output).toContain(`error: KUBECONFIG: none of its files exists (${join(home, 'a')}:${join(home, 'b')})`);
});

test('edge-ccm vip whose metrics port is taken (a restart while the old process still shuts down): exit 1, one line naming the flag, no stack', async () => {
  const dir = tempDir('edge-ccm-cli-errors-');
  writeFileSync(join(dir, 'vip.yaml'), 'controlPlaneEndpoint:\n  addresses: [203.0.113.80]\n  announce: l2\n  interfaces: [lo]\n  hosts: [{name: cp1, address: 127.0.0.1}]\n');
  writeFileSync(join(dir, 'key'), 'k'.repeat(48), { mode: 0o600 });
  const taken = Bun.listen({ hostname: '127.0.0.1', port: 0, socket: { data() {} } });
  try {
    const { exitCode, output } = await run(ccmBinaryCommand(['vip', `--cloud-config=${join(dir, 'vip.yaml')}`, `--liveness-key-file=${join(dir, 'key')}`, '--node-name=cp1', `--metrics-bind-address=127.0.0.1:${taken.port}`]));
    expect({ exitCode, output: output.trim() }).toEqual({ exitCode: 1, output: expect.stringMatching(new RegExp(`^error: vip: --metrics-bind-address=127\\.0\\.0\\.1:${taken.port}: cannot listen: .+$`)) });
  } finally {
    taken.stop(true);
  }
});

test('edge-ccm speaker for a file with announce: l2 pools and no --liveness-key-file: exit 2 naming the flag and the pools', async () => {
  const dir = tempDir('edge-ccm-cli-errors-');
  writeFileSync(join(dir, 'lb.yaml'), 'loadBalancer:\n  pools:\n    - { name: lan, addresses: [198.51.100.240/29], announce: l2 }\n    - { name: routed, addresses: [198.51.100.248/29], announce: bgp }\n');
  const { exitCode, output } = await run(ccmBinaryCommand(['speaker', `--cloud-config=${join(dir, 'lb.yaml')}`, '--node-name=n1', '--kubeconfig=/nonexistent']));
  expect({ exitCode, output: output.trim() }).toEqual({ exitCode: 2, output: `error: speaker: --liveness-key-file: required: ${join(dir, 'lb.yaml')} has announce: l2 pools (lan), whose answering speakers elect by signed heartbeats` });
});
