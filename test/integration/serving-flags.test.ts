import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { X509Certificate } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { sharedControlPlane, type ControlPlane } from '../harness/control-plane.ts';
import { CcmProcess, fakeProviderConfig, tempDir } from '../harness/ccm-process.ts';
import { createCertificateAuthority, issueCertificate } from '../harness/certs.ts';
import { freeLoopbackPorts } from '../harness/ports.ts';
import { kubeconfigToken } from '../harness/kubeconfig.ts';

/**
 * The secure-serving, profiling and /configz flags through the process, checked with real clients:
 * openssl s_client for TLS versions, suites and SNI, fetch with a bearer token for the endpoints.
 */
let cp: ControlPlane;
let dir: string;
let fakeConfig: string;
let adminToken: string;
const running: CcmProcess[] = [];

beforeAll(async () => {
  cp = await sharedControlPlane();
  dir = tempDir('edge-ccm-serving-flags-');
  fakeConfig = fakeProviderConfig('edge-ccm-serving-flags-fake-');
  adminToken = kubeconfigToken(cp.tokenKubeconfig('admin'));
}, 240_000);

afterAll(async () => {
  await Promise.all(running.map((p) => p.stop()));
});

/** Starts the process serving on a free loopback port with these extra flags; resolves once it serves. */
async function serve(extra: string[]): Promise<{ port: number; ccm: CcmProcess }> {
  const [port] = await freeLoopbackPorts(1);
  const ccm = CcmProcess.fake([
    '--cloud-provider=fake', `--cloud-config=${fakeConfig}`, `--kubeconfig=${cp.adminKubeconfig}`,
    '--bind-address=127.0.0.1', `--secure-port=${port}`, '--leader-elect=false', '--controllers=-route', ...extra,
  ]);
  running.push(ccm);
  await ccm.waitForLog('serving securely');
  return { port: port!, ccm };
}

interface Handshake {
  ok: boolean;
  protocol?: string;
  cipher?: string;
  subject?: string;
  output: string;
}

/** One TLS handshake by openssl s_client (stdin closed: it connects, prints the session and quits). */
async function sClient(port: number, args: string[]): Promise<Handshake> {
  const proc = Bun.spawn(['openssl', 's_client', '-connect', `127.0.0.1:${port}`, ...args], { stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' });
  const [out, err] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  const output = out + err;
  // "New, TLSv1.3, Cipher is TLS_AES_256_GCM_SHA384" (the session block may not come before s_client quits)
  const session = /^New, (\S+), Cipher is (\S+)/m.exec(output);
  const protocol = session?.[1]?.replace(/,$/, '');
  const cipher = session?.[2];
  const subject = /^subject=(.*)$/m.exec(output)?.[1]?.replaceAll(' ', '');
  return { ok: cipher !== undefined && cipher !== '(NONE)', protocol, cipher, subject, output };
}

describe('TLS flags, proven with openssl s_client', () => {
  test('--tls-min-version=VersionTLS13 refuses TLS 1.2 and serves TLS 1.3', async () => {
    const { port } = await serve(['--tls-min-version=VersionTLS13']);
    const v12 = await sClient(port, ['-tls1_2']);
    expect(v12.ok).toBe(false);
    expect(v12.output).toContain('alert protocol version');
    const v13 = await sClient(port, ['-tls1_3']);
    expect([v13.ok, v13.protocol]).toEqual([true, 'TLSv1.3']);
  }, 60_000);

  test('without --tls-min-version TLS 1.2 is the floor, as Go\'s server default (TLS 1.1 refused)', async () => {
    const { port } = await serve([]);
    expect((await sClient(port, ['-tls1_2'])).protocol).toBe('TLSv1.2');
    const v11 = await sClient(port, ['-tls1_1', '-cipher', 'DEFAULT@SECLEVEL=0']);
    expect(v11.ok).toBe(false);
  }, 60_000);

  test('--tls-cipher-suites (Go names) limits TLS 1.2 to those suites; TLS 1.3 keeps its own', async () => {
    // The self-signed certificate is ECDSA: the ECDSA suites are the ones that can be negotiated.
    const { port } = await serve(['--tls-cipher-suites=TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305']);
    for (const [suite, expected] of [
      ['ECDHE-ECDSA-AES256-GCM-SHA384', true],
      ['ECDHE-ECDSA-CHACHA20-POLY1305', true],
      ['ECDHE-ECDSA-AES128-GCM-SHA256', false],
      ['ECDHE-ECDSA-AES128-SHA', false],
    ] as const) {
      const h = await sClient(port, ['-tls1_2', '-cipher', suite]);
      expect({ suite, ok: h.ok, cipher: h.ok ? h.cipher : undefined }).toEqual({ suite, ok: expected, cipher: expected ? suite : undefined });
    }
    expect((await sClient(port, ['-tls1_3'])).protocol).toBe('TLSv1.3');
  }, 60_000);

  test('an unknown suite, or one the TLS library does not have, exits 2 naming it', async () => {
    for (const [suite, message] of [
      ['TLS_NO_SUCH_SUITE', 'Cipher suite TLS_NO_SUCH_SUITE not supported or doesn\'t exist'],
      ['TLS_RSA_WITH_RC4_128_SHA', 'cipher suite TLS_RSA_WITH_RC4_128_SHA is not offered by edge-ccm\'s TLS library'],
    ] as const) {
      const p = CcmProcess.fake(['--cloud-provider=fake', `--tls-cipher-suites=${suite}`]);
      running.push(p);
      expect(await p.exited()).toBe(2);
      expect(p.logs()).toContain(`--tls-cipher-suites: ${message}`);
    }
  }, 60_000);

  test('--tls-sni-cert-key serves its certificate to clients naming it, the default one to others', async () => {
    const ca = await createCertificateAuthority(dir, 'sni-ca', 'sni-ca');
    const named = await issueCertificate(ca, dir, 'sni-named', { commonName: 'named', usage: 'server', dnsNames: ['sni.example', 'other.example'] });
    const wildcard = await issueCertificate(ca, dir, 'sni-wild', { commonName: 'wild', usage: 'server', dnsNames: ['ignored.example'] });
    const { port } = await serve([
      `--tls-sni-cert-key=${named.certPath},${named.keyPath}`,
      `--tls-sni-cert-key=${wildcard.certPath},${wildcard.keyPath}:*.wild.example`,
    ]);
    expect((await sClient(port, ['-servername', 'sni.example'])).subject).toContain('CN=named');
    expect((await sClient(port, ['-servername', 'other.example'])).subject).toContain('CN=named');
    expect((await sClient(port, ['-servername', 'a.wild.example'])).subject).toContain('CN=wild');
    // Explicit names replace the certificate's own.
    expect((await sClient(port, ['-servername', 'ignored.example'])).subject).toContain('CN=localhost@');
    expect((await sClient(port, ['-noservername'])).subject).toContain('CN=localhost@');
  }, 60_000);

  test('--cert-dir: the self-signed pair is written there (key 0600) and served again after a restart', async () => {
    const certDir = join(dir, 'certs');
    const first = await serve([`--cert-dir=${certDir}`]);
    const crt = join(certDir, 'cloud-controller-manager.crt');
    const key = join(certDir, 'cloud-controller-manager.key');
    expect(statSync(key).mode & 0o777).toBe(0o600);
    const written = new X509Certificate(readFileSync(crt, 'utf8')).fingerprint256;
    const servedFirst = await sClient(first.port, []);
    await first.ccm.stop();
    const second = await serve([`--cert-dir=${certDir}`]);
    expect(second.ccm.logs()).toContain('serving with the self-signed pair in --cert-dir');
    const servedSecond = await sClient(second.port, []);
    expect(servedSecond.subject).toBe(servedFirst.subject!);
    expect(new X509Certificate(readFileSync(crt, 'utf8')).fingerprint256).toBe(written);
  }, 60_000);
});

describe('socket sharing', () => {
  test('--permit-port-sharing lets two processes listen on the same port (SO_REUSEPORT); without it the second cannot', async () => {
    const first = await serve(['--permit-port-sharing']);
    const second = CcmProcess.fake([
      '--cloud-provider=fake', `--cloud-config=${fakeConfig}`, `--kubeconfig=${cp.adminKubeconfig}`,
      '--bind-address=127.0.0.1', `--secure-port=${first.port}`, '--leader-elect=false', '--controllers=-route', '--permit-port-sharing',
    ]);
    running.push(second);
    await second.waitForLog('serving securely');
    const alone = CcmProcess.fake([
      '--cloud-provider=fake', `--cloud-config=${fakeConfig}`, `--kubeconfig=${cp.adminKubeconfig}`,
      '--bind-address=127.0.0.1', `--secure-port=${first.port}`, '--leader-elect=false', '--controllers=-route',
    ]);
    running.push(alone);
    expect(await alone.exited()).not.toBe(0);
    expect(alone.logs()).not.toContain('serving securely');
  }, 60_000);
});

describe('/configz and profiling, behind authentication and authorization', () => {
  const tls = { rejectUnauthorized: false };
  const auth = () => ({ authorization: `Bearer ${adminToken}` });

  test('/configz serves the versioned CloudControllerManagerConfiguration; a token is needed', async () => {
    const { port } = await serve(['--concurrent-node-syncs=3', '--feature-gates=CloudControllerManagerWatchBasedRoutesReconciliation=true']);
    const base = `https://127.0.0.1:${port}`;
    expect((await fetch(`${base}/configz`, { tls })).status).toBe(401);
    const res = await fetch(`${base}/configz`, { tls, headers: auth() });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/json');
    const body = (await res.json()) as Record<string, { kind: string; apiVersion: string; NodeController: { ConcurrentNodeSyncs: number; ConcurrentNodeStatusUpdates: number } }>;
    const config = body['cloudcontrollermanager.config.k8s.io']!;
    expect([config.kind, config.apiVersion]).toEqual(['CloudControllerManagerConfiguration', 'cloudcontrollermanager.config.k8s.io/v1alpha1']);
    expect(config.NodeController).toEqual({ ConcurrentNodeSyncs: 3, ConcurrentNodeStatusUpdates: 3 });
  }, 60_000);

  test('--profiling (default): a heap snapshot and a CPU profile; --contention-profiling: event-loop blocking; --profiling=false: none', async () => {
    const { port } = await serve(['--contention-profiling']);
    const base = `https://127.0.0.1:${port}`;
    expect((await fetch(`${base}/debug/pprof/heap`, { tls })).status).toBe(401);
    const heap = await fetch(`${base}/debug/pprof/heap`, { tls, headers: auth() });
    expect(heap.status).toBe(200);
    const snapshot = (await heap.json()) as { snapshot: { meta: { node_fields: string[] } }; nodes: number[] };
    expect(snapshot.snapshot.meta.node_fields).toContain('self_size');
    expect(snapshot.nodes.length).toBeGreaterThan(0);
    const profile = (await (await fetch(`${base}/debug/pprof/profile?seconds=1`, { tls, headers: auth() })).json()) as { nodes: unknown[]; samples: unknown[] };
    expect(profile.nodes.length).toBeGreaterThan(0);
    expect((await fetch(`${base}/debug/pprof/profile?seconds=0`, { tls, headers: auth() })).status).toBe(400);
    const block = (await (await fetch(`${base}/debug/pprof/block`, { tls, headers: auth() })).json()) as { samples: number; maxMs: number };
    expect(block.samples).toBeGreaterThan(0);

    const off = await serve(['--profiling=false']);
    expect((await fetch(`https://127.0.0.1:${off.port}/debug/pprof/heap`, { tls, headers: auth() })).status).toBe(404);
    expect((await fetch(`https://127.0.0.1:${off.port}/configz`, { tls, headers: auth() })).status).toBe(200);
  }, 60_000);
});
