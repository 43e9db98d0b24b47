import { beforeAll, expect, test } from 'bun:test';
import { chmodSync, existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { loadKubeConfig } from '../../src/app/kubeconfig.ts';
import { BunKubeTransport } from '../../src/kube/transport.ts';
import { tempDir } from '../harness/ccm-process.ts';
import { sharedControlPlane, type ControlPlane } from '../harness/control-plane.ts';
import { kubeconfigToken } from '../harness/kubeconfig.ts';

/**
 * Ways a kubeconfig authenticates that the harness's own tests do not cover: exec credential
 * plugins and --master; and the compiled binary ignoring a .env in its working directory.
 */
let cp: ControlPlane;
let dir: string;
let adminToken: string;

beforeAll(async () => {
  cp = await sharedControlPlane();
  dir = tempDir('edge-ccm-client-auth-');
  adminToken = kubeconfigToken(cp.tokenKubeconfig('admin'));
}, 240_000);

function kubeconfig(name: string, server: string, user: Record<string, unknown>): string {
  const path = join(dir, `${name}.yaml`);
  writeFileSync(path, stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'c', cluster: { server, 'certificate-authority-data': Buffer.from(cp.caPem).toString('base64') } }],
    users: [{ name: 'u', user }],
    contexts: [{ name: 'x', context: { cluster: 'c', user: 'u' } }],
    'current-context': 'x',
  }));
  return path;
}

test('an exec credential plugin provides the token', async () => {
  const plugin = join(dir, 'credential-plugin.sh');
  writeFileSync(plugin, `#!/bin/sh\necho '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"${adminToken}"}}'\n`);
  chmodSync(plugin, 0o755);
  const path = kubeconfig('exec', cp.server, { exec: { apiVersion: 'client.authentication.k8s.io/v1', command: plugin, interactiveMode: 'Never' } });
  const t = new BunKubeTransport(loadKubeConfig({ kubeconfig: path }), { qps: 0 });
  const review = await t.request<{ status: { userInfo: { username: string } } }>({
    method: 'POST', path: '/apis/authentication.k8s.io/v1/selfsubjectreviews', body: { apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' },
  });
  expect(review.status.userInfo.username).toBe('token-user');
});

test('--master overrides the kubeconfig server', async () => {
  const path = kubeconfig('wrong-server', 'https://127.0.0.1:1', { token: adminToken });
  const t = new BunKubeTransport(loadKubeConfig({ kubeconfig: path, master: cp.server }), { qps: 0 });
  expect(t.server).toBe(cp.server);
  const version = await t.request<{ major: string }>({ method: 'GET', path: '/version' });
  expect(version.major).toBe('1');
});

test('a kubeconfig that does not exist is named in the error', () => {
  expect(() => loadKubeConfig({ kubeconfig: join(dir, 'missing.yaml') })).toThrow('--kubeconfig: file');
});

test('the compiled binary does not load a .env from its working directory', async () => {
  // A .env that would send every request through a dead proxy, if it were read.
  const work = tempDir('edge-ccm-dotenv-');
  writeFileSync(join(work, '.env'), 'HTTPS_PROXY=http://127.0.0.1:9\nhttps_proxy=http://127.0.0.1:9\nNO_PROXY=\n');
  const path = kubeconfig('dotenv', cp.server, { token: adminToken });
  const binary = join(import.meta.dir, '../../dist/edge-ccm');
  if (!existsSync(binary)) throw new Error(`${binary} is missing: build it first (bun run build)`);
  const run = async (env: Record<string, string>) => {
    // A clean environment and another working directory, so not CcmProcess; killed if it hangs.
    const p = Bun.spawn([binary, 'selftest', `--kubeconfig=${path}`], {
      cwd: work, env: { PATH: process.env.PATH ?? '', ...env }, stdout: 'pipe', stderr: 'pipe', timeout: 60_000, killSignal: 'SIGKILL',
    });
    const [out, , code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
    return { code, out };
  };
  const clean = await run({});
  expect(clean.code, clean.out).toBe(0);
  // The same variables in the real environment do break it: the check above can fail.
  const proxied = await run({ HTTPS_PROXY: 'http://127.0.0.1:9', NO_PROXY: '' });
  expect(proxied.code).not.toBe(0);
});
