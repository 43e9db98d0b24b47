import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { sharedControlPlane, type ControlPlane } from '../harness/control-plane.ts';
import { CcmProcess, tempDir } from '../harness/ccm-process.ts';
import { createCertificateAuthority, issueCertificate, type IssuedCertificate } from '../harness/certs.ts';
import { freeLoopbackPorts } from '../harness/ports.ts';
import { kubeconfigToken } from '../harness/kubeconfig.ts';

/**
 * --client-ca-file (x509 client certificates) and --requestheader-* (front-proxy authentication)
 * through the process, with curl as the client: who a certificate or a front proxy's headers name
 * is what the delegated authorization then judges (system:masters is allowed without a
 * SubjectAccessReview; anyone else is asked about, and an unknown user is refused with their name).
 */
let cp: ControlPlane;
let dir: string;
let port: number;
let ccm: CcmProcess;
let adminToken: string;
let alice: IssuedCertificate; // client CA, O=system:masters
let nobody: IssuedCertificate; // client CA, no group
let stranger: IssuedCertificate; // another CA
let proxy: IssuedCertificate; // front-proxy CA, allowed name
let otherProxy: IssuedCertificate; // front-proxy CA, name not allowed
let serverOnly: IssuedCertificate; // client CA, but a serving certificate (extended key usage serverAuth)

beforeAll(async () => {
  cp = await sharedControlPlane();
  dir = tempDir('edge-ccm-client-cert-');
  adminToken = kubeconfigToken(cp.tokenKubeconfig('admin'));
  const clientCA = await createCertificateAuthority(dir, 'client-ca', 'client-ca');
  const proxyCA = await createCertificateAuthority(dir, 'proxy-ca', 'front-proxy-ca');
  const otherCA = await createCertificateAuthority(dir, 'other-ca', 'other-ca');
  alice = await issueCertificate(clientCA, dir, 'alice', { commonName: 'alice', organizations: ['system:masters'], usage: 'client' });
  nobody = await issueCertificate(clientCA, dir, 'nobody', { commonName: 'nobody-in-particular', usage: 'client' });
  stranger = await issueCertificate(otherCA, dir, 'stranger', { commonName: 'mallory', organizations: ['system:masters'], usage: 'client' });
  proxy = await issueCertificate(proxyCA, dir, 'proxy', { commonName: 'front-proxy-client', usage: 'client' });
  otherProxy = await issueCertificate(proxyCA, dir, 'other-proxy', { commonName: 'someone-else', usage: 'client' });
  serverOnly = await issueCertificate(clientCA, dir, 'server-only', { commonName: 'alice', organizations: ['system:masters'], usage: 'server' });
  writeFileSync(join(dir, 'fake.json'), JSON.stringify({ autoMetadata: { instanceType: 't', zone: 'z', region: 'r' } }));
  [port] = (await freeLoopbackPorts(1)) as [number];
  ccm = CcmProcess.fake([
    '--cloud-provider=fake', `--cloud-config=${join(dir, 'fake.json')}`, `--kubeconfig=${cp.adminKubeconfig}`,
    '--bind-address=127.0.0.1', `--secure-port=${port}`, '--leader-elect=false', '--controllers=-route',
    `--client-ca-file=${clientCA.certPath}`, `--requestheader-client-ca-file=${proxyCA.certPath}`,
    '--requestheader-allowed-names=front-proxy-client', '--requestheader-username-headers=X-Remote-User',
    '--requestheader-group-headers=X-Remote-Group', '--requestheader-extra-headers-prefix=X-Remote-Extra-',
    '--tls-min-version=VersionTLS13',
  ]);
  await ccm.waitForLog('serving securely');
}, 240_000);

afterAll(async () => {
  await ccm?.stop();
});

/** GET path with curl; returns the status and body. */
async function curl(path: string, args: string[] = []): Promise<{ status: number; body: string }> {
  const proc = Bun.spawn(['curl', '-sk', '-w', '\n%{http_code}', ...args, `https://127.0.0.1:${port}${path}`], { stdout: 'pipe', stderr: 'pipe' });
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  if (code !== 0) throw new Error(`curl exited ${code}: ${err}`);
  const i = out.lastIndexOf('\n');
  return { status: Number(out.slice(i + 1)), body: out.slice(0, i) };
}
const cert = (c: IssuedCertificate) => ['--cert', c.certPath, '--key', c.keyPath];

describe('--client-ca-file: a client certificate is a user (CN) in groups (O)', () => {
  test('a certificate signed by the client CA authenticates; its system:masters group is allowed', async () => {
    expect((await curl('/metrics', cert(alice))).status).toBe(200);
  }, 30_000);

  test('no certificate, or one from another CA: 401 (a bearer token still works)', async () => {
    expect((await curl('/metrics')).status).toBe(401);
    expect((await curl('/metrics', cert(stranger))).status).toBe(401);
    expect((await curl('/metrics', ['-H', `Authorization: Bearer ${adminToken}`])).status).toBe(200);
  }, 30_000);

  test('a certificate without client-authentication usage authenticates nobody', async () => {
    expect((await curl('/metrics', cert(serverOnly))).status).toBe(401);
  }, 30_000);

  test('an authenticated user outside system:masters is authorized by a SubjectAccessReview, under its certificate name', async () => {
    const res = await curl('/metrics', cert(nobody));
    expect(res.status).toBe(403);
    expect(res.body).toContain('nobody-in-particular');
  }, 30_000);
});

describe('--requestheader-*: a front proxy names the user in headers', () => {
  test('the proxy\'s certificate and X-Remote-User / X-Remote-Group authenticate that user', async () => {
    expect((await curl('/metrics', [...cert(proxy), '-H', 'X-Remote-User: bob', '-H', 'X-Remote-Group: system:masters'])).status).toBe(200);
    const asked = await curl('/metrics', [...cert(proxy), '-H', 'X-Remote-User: carol', '-H', 'X-Remote-Extra-Scopes: a']);
    expect(asked.status).toBe(403);
    expect(asked.body).toContain('carol');
  }, 30_000);

  test('headers without a proxy certificate, or from a proxy not in --requestheader-allowed-names, are ignored', async () => {
    expect((await curl('/metrics', ['-H', 'X-Remote-User: bob', '-H', 'X-Remote-Group: system:masters'])).status).toBe(401);
    expect((await curl('/metrics', [...cert(otherProxy), '-H', 'X-Remote-User: bob', '-H', 'X-Remote-Group: system:masters'])).status).toBe(401);
    // A client certificate does not make its holder a front proxy: alice stays alice.
    const res = await curl('/metrics', [...cert(nobody), '-H', 'X-Remote-User: bob', '-H', 'X-Remote-Group: system:masters']);
    expect(res.status).toBe(403);
    expect(res.body).toContain('nobody-in-particular');
  }, 30_000);

  test('a proxy certificate without a username header authenticates nobody', async () => {
    expect((await curl('/metrics', cert(proxy))).status).toBe(401);
  }, 30_000);
});

describe('the TLS flags hold on this listener too', () => {
  test('--tls-min-version=VersionTLS13: TLS 1.2 refused', async () => {
    const proc = Bun.spawn(['openssl', 's_client', '-tls1_2', '-connect', `127.0.0.1:${port}`], { stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' });
    const [out, err] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    expect(out + err).toMatch(/alert protocol version|no protocols available|wrong version/);
    expect((await curl('/healthz', ['--tlsv1.3'])).status).toBe(200);
  }, 30_000);
});
