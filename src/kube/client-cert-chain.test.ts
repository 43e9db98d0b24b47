import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { createCertificateAuthority, issueCertificate, type CertificateAuthority, type IssuedCertificate } from '../../test/harness/certs.ts';
import { tempDir } from '../../test/harness/ccm-process.ts';
import { eventually } from '../../test/harness/eventually.ts';
import { transportFor, writeKubeconfig } from '../../test/harness/kubeconfig.ts';
import { freeLoopbackPorts } from '../../test/harness/ports.ts';
import { ownPid } from '../../test/harness/processes.ts';
import { clientCertificateChain } from './client-cert-chain.ts';

/**
 * What the transport's TLS puts in its Certificate message, read by a real TLS server that
 * requires a client certificate and traces the handshake (openssl s_server -trace): the
 * operator's certificate, never the cluster CA that Bun would otherwise add from `ca`.
 */

let dir: string;
let ca: CertificateAuthority;
let server: IssuedCertificate;
let client: IssuedCertificate;
let intermediate: CertificateAuthority;
let viaIntermediate: IssuedCertificate;

beforeAll(async () => {
  dir = tempDir('edge-ccm-client-chain-');
  ca = await createCertificateAuthority(dir, 'ca', 'chain-test-ca');
  server = await issueCertificate(ca, dir, 'server', { commonName: 'localhost', usage: 'server', dnsNames: ['localhost'], ipAddresses: ['127.0.0.1'] });
  client = await issueCertificate(ca, dir, 'client', { commonName: 'chain-test-client', usage: 'client' });
  // A second CA stands in for an intermediate: the client file then carries its own chain.
  intermediate = await createCertificateAuthority(dir, 'intermediate', 'chain-test-intermediate');
  viaIntermediate = await issueCertificate(intermediate, dir, 'client2', { commonName: 'chain-test-client-2', usage: 'client' });
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('clientCertificateChain', () => {
  test('a single certificate with a CA configured: the certificate twice (an explicit chain Bun will not complete)', () => {
    const chain = clientCertificateChain(client.certPem, true);
    expect(chain.match(/BEGIN CERTIFICATE/g)).toHaveLength(2);
    expect(chain.split(client.certPem.trim()).length - 1).toBe(2);
  });

  test('without a CA, or with a chain of its own, the file is passed as it is', () => {
    expect(clientCertificateChain(client.certPem, false)).toBe(client.certPem);
    const bundle = `${viaIntermediate.certPem}${intermediate.certPem}`;
    expect(clientCertificateChain(bundle, true)).toBe(bundle);
  });
});

/** The subjects of the certificates the client sent, from s_server's handshake trace. */
function clientCertificateSubjects(trace: string): string[] {
  const subjects: string[] = [];
  for (const record of trace.split(/^(?=Received Record|Sent Record)/m)) {
    if (!record.startsWith('Received Record') || !/^\s+Certificate, Length=/m.test(record)) continue;
    for (const m of record.matchAll(/^\s+Subject: (.+)$/gm)) subjects.push((m[1] as string).trim());
  }
  return subjects;
}

async function sentBy(certPem: string, keyPem: string, trustedClientCa: string): Promise<string[]> {
  const [port] = (await freeLoopbackPorts(1)) as [number];
  const tracePath = join(dir, `trace-${port}.txt`);
  const proc = Bun.spawn({
    cmd: ['openssl', 's_server', '-accept', `127.0.0.1:${port}`, '-cert', server.certPath, '-key', server.keyPath,
      '-CAfile', trustedClientCa, '-Verify', '3', '-trace', '-www'],
    stdin: 'ignore', stdout: Bun.file(tracePath), stderr: 'pipe',
  });
  const disown = ownPid(proc.pid);
  try {
    const path = await writeKubeconfig(join(dir, `kubeconfig-${port}.yaml`), `https://127.0.0.1:${port}`, ca.certPem, 'u', { clientCertPem: certPem, clientKeyPem: keyPem });
    const transport = transportFor(path);
    const res = await eventually('s_server answers', async () => {
      try {
        return await transport.sendRaw({ method: 'GET', path: '/' });
      } catch {
        return undefined; // not listening yet
      }
    }, 10_000);
    expect(res.status).toBe(200);
    await res.text();
    return clientCertificateSubjects(readFileSync(tracePath, 'utf8'));
  } finally {
    proc.kill();
    await proc.exited;
    disown();
  }
}

test('a client certificate file with one certificate: the CA that verifies the server is not sent with it', async () => {
  const subjects = await sentBy(client.certPem, client.keyPem, ca.certPath);
  expect(subjects.length).toBeGreaterThan(0);
  expect(subjects.every((s) => s.includes('chain-test-client'))).toBe(true);
  expect(subjects.some((s) => s.includes('chain-test-ca'))).toBe(false);
});

test('a client certificate file with its own chain: sent as it is', async () => {
  const bundle = `${viaIntermediate.certPem}${intermediate.certPem}`;
  const subjects = await sentBy(bundle, viaIntermediate.keyPem, intermediate.certPath);
  expect(subjects.map((s) => s.includes('chain-test-intermediate'))).toEqual([false, true]);
});
