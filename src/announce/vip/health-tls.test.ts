import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { TLSSocket } from 'node:tls';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createCertificateAuthority, issueCertificate, type CertificateAuthority, type IssuedCertificate } from '../../../test/harness/certs.ts';
import type { HealthCheckFiles } from './health-check-config.ts';
import { describeHealthRequest, readHealthCredentials } from './health-credentials.ts';
import type { HealthRequest } from './health-connection.ts';
import { checkStatus, closeHealthChecks } from '../../../test/harness/health-check.ts';
import { ApiServerHealth, failureHint } from './health.ts';

/**
 * The health check against a TLS server that behaves as a kube-apiserver run with
 * --anonymous-auth=false (k3s, RKE2, Talos): it asks for a client certificate without requiring
 * one, answers 200 to a request authenticated by a certificate of its client CA or by its bearer
 * token, and 401 to an anonymous one. node:https, not Bun.serve: only it tells the handler whether
 * the client presented a verified certificate, which is what the API server decides 401 on.
 */

const TOKEN = 'vip-health-test-token-0123456789';

let dir: string;
let ca: CertificateAuthority;
let otherCa: CertificateAuthority;
let client: IssuedCertificate;
const servers: Server[] = [];
/** Serves with a certificate naming 127.0.0.1 and `kubernetes`. */
let apiserver: string;
/** Serves with a certificate naming only `kubernetes` (as kubeadm's names no loopback address). */
let namedOnly: string;

function serve(cert: IssuedCertificate): Promise<string> {
  const server = createServer({ key: cert.keyPem, cert: cert.certPem, ca: ca.certPem, requestCert: true, rejectUnauthorized: false }, (req, res) => {
    const authenticated = (req.socket as TLSSocket).authorized || req.headers.authorization === `Bearer ${TOKEN}`;
    res.writeHead(authenticated ? 200 : 401).end(authenticated ? 'ok' : 'Unauthorized');
  });
  servers.push(server);
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(`https://127.0.0.1:${(server.address() as { port: number }).port}/readyz`)));
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'edge-ccm-vip-health-'));
  [ca, otherCa] = await Promise.all([createCertificateAuthority(dir, 'ca', 'test-cluster-ca'), createCertificateAuthority(dir, 'other-ca', 'another-ca')]);
  const [serving, servingNamedOnly] = await Promise.all([
    issueCertificate(ca, dir, 'apiserver', { commonName: 'kube-apiserver', usage: 'server', dnsNames: ['kubernetes'], ipAddresses: ['127.0.0.1'] }),
    issueCertificate(ca, dir, 'apiserver-named', { commonName: 'kube-apiserver', usage: 'server', dnsNames: ['kubernetes'] }),
  ]);
  // No group: any authenticated identity may read /readyz.
  client = await issueCertificate(ca, dir, 'vip-client', { commonName: 'edge-ccm-vip', usage: 'client' });
  writeFileSync(join(dir, 'token'), `${TOKEN}\n`);
  [apiserver, namedOnly] = await Promise.all([serve(serving), serve(servingNamedOnly)]);
});

afterAll(() => {
  closeHealthChecks();
  for (const s of servers) s.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** The request `files` make, read as `edge-ccm vip` reads them; fails the test on a problem. */
function request(files: HealthCheckFiles): HealthRequest {
  const problems: string[] = [];
  const r = readHealthCredentials(files, (path, message) => problems.push(`${path.join('.')}: ${message}`));
  expect(problems).toEqual([]);
  return r!;
}

describe('the health check against an API server that refuses anonymous requests', () => {
  test('anonymous (no healthCheck): 401, with the hint to give a credential', async () => {
    const outcome = await checkStatus(apiserver, 2000);
    expect(outcome).toBe('401');
    expect(failureHint(outcome)).toContain('controlPlaneEndpoint.healthCheck');
  });

  test('certificate verified against the CA, client certificate presented: 200', async () => {
    const r = request({ caFile: ca.certPath, clientCertificateFile: client.certPath, clientKeyFile: client.keyPath });
    expect(describeHealthRequest(r)).toEqual({ healthCertificate: 'verified', healthCredential: 'client certificate' });
    expect(await checkStatus(apiserver, 2000, r)).toBe('200');
  });

  // Issue 38: the check runs every 250 ms on each control-plane host; a TLS handshake per check
  // would cost the idle VIP (and the API server) far more than the request.
  test('checks reuse one TLS connection (one handshake, not one per check), with a client certificate and a CA too', async () => {
    const handshakes: string[] = [];
    servers[0]!.on('secureConnection', (socket: TLSSocket) => handshakes.push(`${socket.remotePort}`));
    const r = request({ caFile: ca.certPath, clientCertificateFile: client.certPath, clientKeyFile: client.keyPath });
    for (let i = 0; i < 5; i++) expect(await checkStatus(apiserver, 2000, r)).toBe('200');
    for (let i = 0; i < 5; i++) expect(await checkStatus(apiserver, 2000)).toBe('401');
    // At most one per TLS configuration (the pool keys a connection by it), whatever was pooled before.
    expect(handshakes.length).toBeLessThanOrEqual(2);
  });

  test('verified, no credential: 401 (the CA alone authenticates nothing)', async () => {
    expect(await checkStatus(apiserver, 2000, request({ caFile: ca.certPath }))).toBe('401');
  });

  test('a bearer token: 200; a wrong one: 401', async () => {
    const r = request({ caFile: ca.certPath, tokenFile: join(dir, 'token') });
    expect(describeHealthRequest(r).healthCredential).toBe('bearer token');
    expect(await checkStatus(apiserver, 2000, r)).toBe('200');
    const wrong = { ...r, headers: { authorization: 'Bearer wrong' } };
    expect(await checkStatus(apiserver, 2000, wrong)).toBe('401');
    expect(failureHint('401', wrong)).toContain('does not accept');
  });

  test('a server certificate from another CA is refused: refused, the reason is a certificate error', async () => {
    const outcome = await checkStatus(apiserver, 2000, request({ caFile: otherCa.certPath, clientCertificateFile: client.certPath, clientKeyFile: client.keyPath }));
    expect(outcome).not.toBe('200');
    expect(outcome).not.toBe('401');
    expect(outcome).toMatch(/CERT|SELF_SIGNED|UNABLE_TO_VERIFY/);
    expect(failureHint(outcome)).toContain('caFile');
  });

  test('the name checked is the URL host unless serverName says another', async () => {
    const files = { caFile: ca.certPath, clientCertificateFile: client.certPath, clientKeyFile: client.keyPath };
    const byHost = await checkStatus(namedOnly, 2000, request(files));
    expect(byHost).toContain('ERR_TLS_CERT_ALTNAME_INVALID');
    // One line, naming what was not in the certificate, without the URL (fetch's errors appended it).
    expect(byHost).toContain('IP: 127.0.0.1 is not in the cert');
    expect(byHost).not.toContain('https://');
    expect(byHost).not.toContain('\n');
    expect(await checkStatus(namedOnly, 2000, request({ ...files, serverName: 'kubernetes' }))).toBe('200');
    expect(await checkStatus(namedOnly, 2000, request({ ...files, serverName: 'not-kubernetes' }))).toContain('ALTNAME');
  });

  test('ApiServerHealth: a check refused from the start keeps it unhealthy and tells the reason once', async () => {
    const failures: string[] = [];
    const changes: boolean[] = [];
    const health = new ApiServerHealth({
      url: apiserver, intervalMs: 20, timeoutMs: 2000, unhealthyAfter: 1, healthyAfter: 1,
      request: request({ caFile: otherCa.certPath }),
      onChange: (healthy) => changes.push(healthy),
      onNewFailure: (why) => failures.push(why),
    });
    health.start();
    while (health.last === 'not checked yet') await Bun.sleep(10);
    await Bun.sleep(100); // several more checks, the same outcome
    health.stop();
    expect(health.healthy).toBe(false);
    expect(changes).toEqual([]);
    expect(failures).toHaveLength(1);
    expect(failures[0]).toMatch(/CERT|SELF_SIGNED|UNABLE_TO_VERIFY/);
  });

  test('ApiServerHealth with a client certificate: healthy', async () => {
    const changes: [boolean, string][] = [];
    const health = new ApiServerHealth({
      url: apiserver, intervalMs: 20, timeoutMs: 2000, unhealthyAfter: 1, healthyAfter: 1,
      request: request({ caFile: ca.certPath, clientCertificateFile: client.certPath, clientKeyFile: client.keyPath }),
      onChange: (healthy, why) => changes.push([healthy, why]),
    });
    health.start();
    while (changes.length === 0) await Bun.sleep(10);
    health.stop();
    expect(changes).toEqual([[true, '200']]);
  });
});
