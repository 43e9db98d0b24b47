import { afterEach, describe, expect, test } from 'bun:test';
import { X509Certificate, createPrivateKey } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from 'node:tls';
import { Registry } from 'prom-client';
import { silentLogger } from '../../log.ts';
import * as der from './der.ts';
import { HealthChecks } from '../health.ts';
import { generateSelfSignedCertificate, ipBytes } from './self-signed-cert.ts';
import { createServer, type CcmServer, type ServerOptions } from '../server.ts';
import { loadServingTls } from './serving.ts';

const hex = (bytes: Uint8Array): string => Buffer.from(bytes).toString('hex');

/** The subject CN of the certificate a TLS server presents. */
function servedCommonName(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port, rejectUnauthorized: false }, () => {
      const cn = socket.getPeerCertificate().subject?.CN;
      socket.end();
      resolve(String(cn));
    });
    socket.on('error', reject);
  });
}

/** Splits a PEM bundle into its certificates. */
function certificates(pem: string): X509Certificate[] {
  return (pem.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----\n/g) ?? []).map((p) => new X509Certificate(p));
}

describe('DER encoding', () => {
  test('object identifiers use base-128 arcs', () => {
    // rsaEncryption's arc prefix, the classic X.690 example
    expect(hex(der.oid('1.2.840.113549'))).toBe('06062a864886f70d');
    expect(hex(der.oid('2.5.29.17'))).toBe('0603551d11');
  });

  test('lengths of 128 bytes and more use the long form', () => {
    expect(hex(der.octetString(new Uint8Array(127))).slice(0, 4)).toBe('047f');
    expect(hex(der.octetString(new Uint8Array(128))).slice(0, 6)).toBe('048180');
    expect(hex(der.octetString(new Uint8Array(300))).slice(0, 8)).toBe('0482012c');
  });

  test('integers are minimal and never read as negative', () => {
    expect(hex(der.unsignedInteger(Uint8Array.of(0, 0, 5)))).toBe('020105');
    expect(hex(der.unsignedInteger(Uint8Array.of(0x80)))).toBe('02020080');
    expect(hex(der.unsignedInteger(Uint8Array.of(0)))).toBe('020100');
  });

  test('named bit strings drop trailing zero bits', () => {
    expect(hex(der.namedBits([0]))).toBe('03020780'); // digitalSignature
    expect(hex(der.namedBits([0, 5]))).toBe('03020284'); // digitalSignature, keyCertSign
    expect(hex(der.namedBits([8]))).toBe('0303070080'); // decipherOnly
  });

  test('times before 2050 are UTCTime, later ones GeneralizedTime', () => {
    expect(Buffer.from(der.time(new Date('2049-12-31T23:59:59Z'))).toString('latin1')).toBe('\x17\x0d491231235959Z');
    expect(Buffer.from(der.time(new Date('2050-01-01T00:00:00Z'))).toString('latin1')).toBe('\x18\x0f20500101000000Z');
  });

  test('IP addresses become network-order bytes', () => {
    expect(hex(ipBytes('192.168.1.2'))).toBe('c0a80102');
    expect(hex(ipBytes('::1'))).toBe('00000000000000000000000000000001');
    expect(hex(ipBytes('fe80::1:2'))).toBe('fe800000000000000000000000010002');
    expect(hex(ipBytes('2001:db8::'))).toBe('20010db8000000000000000000000000');
    expect(hex(ipBytes('::ffff:10.1.2.3'))).toBe('00000000000000000000ffff0a010203');
    expect(() => ipBytes('localhost')).toThrow('not an IP address');
  });
});

describe('self-signed certificate', () => {
  const now = new Date('2030-06-01T12:00:00Z');
  const generated = generateSelfSignedCertificate({
    host: 'localhost', alternateIPs: ['127.0.0.1', '::1'], alternateDNS: ['localhost', 'ccm.example'], now,
  });
  const [serving, caInChain, ...rest] = certificates(generated.certChainPem);
  const ca = new X509Certificate(generated.caPem);

  test('is a serving certificate followed by the CA that signed it', () => {
    expect(rest).toHaveLength(0);
    expect(caInChain?.fingerprint256).toBe(ca.fingerprint256);
    expect(serving!.verify(ca.publicKey)).toBe(true);
    expect(ca.verify(ca.publicKey)).toBe(true);
    expect(serving!.checkIssued(ca)).toBe(true);
    expect(ca.ca).toBe(true);
    expect(serving!.ca).toBe(false);
  });

  test('names follow upstream: HOST@UNIXTIME signed by HOST-ca@UNIXTIME', () => {
    const unix = Math.floor(now.getTime() / 1000);
    expect(serving!.subject).toBe(`CN=localhost@${unix}`);
    expect(serving!.issuer).toBe(`CN=localhost-ca@${unix}`);
    expect(ca.subject).toBe(`CN=localhost-ca@${unix}`);
  });

  test('is valid from an hour ago for a year', () => {
    expect(new Date(serving!.validFrom).toISOString()).toBe('2030-06-01T11:00:00.000Z');
    expect(new Date(serving!.validTo).toISOString()).toBe('2031-06-01T11:00:00.000Z');
  });

  test('names every host and address, each once', () => {
    expect(serving!.subjectAltName).toBe('DNS:localhost, DNS:ccm.example, IP Address:127.0.0.1, IP Address:0:0:0:0:0:0:0:1');
    expect(serving!.checkHost('ccm.example')).toBe('ccm.example');
    expect(serving!.checkIP('::1')).toBe('::1');
    expect(serving!.checkHost('other.example')).toBeUndefined();
  });

  test('the key is the serving certificate\'s', () => {
    expect(serving!.checkPrivateKey(createPrivateKey(generated.keyPem))).toBe(true);
  });

  test('an IP host is an IP SAN, not a DNS one', () => {
    const byIp = generateSelfSignedCertificate({ host: '10.0.0.7' });
    const [cert] = certificates(byIp.certChainPem);
    expect(cert!.subjectAltName).toBe('IP Address:10.0.0.7');
  });
});

describe('serving TLS material', () => {
  test('self-signed: localhost, 127.0.0.1 and a specific bind address', async () => {
    const tls = await loadServingTls({ bindAddress: '10.1.2.3' });
    const [cert] = certificates(tls.cert);
    expect(cert!.subjectAltName).toBe('DNS:localhost, IP Address:127.0.0.1, IP Address:10.1.2.3');
    expect(tls.selfSignedCaPem).toContain('BEGIN CERTIFICATE');
  });

  test('self-signed: an unspecified bind address adds nothing', async () => {
    for (const bindAddress of ['0.0.0.0', '::', '[::]']) {
      const [cert] = certificates((await loadServingTls({ bindAddress })).cert);
      expect(cert!.subjectAltName).toBe('DNS:localhost, IP Address:127.0.0.1');
    }
  });

  test('a bind host name becomes a DNS name', async () => {
    const [cert] = certificates((await loadServingTls({ bindAddress: 'ccm.internal' })).cert);
    expect(cert!.subjectAltName).toBe('DNS:localhost, DNS:ccm.internal, IP Address:127.0.0.1');
  });

  test('a certificate file needs its key file', async () => {
    await expect(loadServingTls({ bindAddress: '127.0.0.1', tlsCertFile: '/nonexistent/tls.crt' })).rejects.toThrow(
      '--tls-cert-file and --tls-private-key-file must be given together',
    );
  });
});

describe('HTTPS server', () => {
  let server: CcmServer | undefined;
  let tempDir: string | undefined;
  afterEach(async () => {
    await server?.stop();
    server = undefined;
    if (tempDir) await rm(tempDir, { recursive: true, force: true });
    tempDir = undefined;
  });

  function options(overrides: Partial<ServerOptions> = {}): ServerOptions {
    const checks = new HealthChecks();
    checks.add('ping', () => {});
    return {
      bindAddress: '127.0.0.1', securePort: 10258, ephemeralPortForTests: true,
      registry: new Registry(), checks, logger: silentLogger, ...overrides,
    };
  }

  test('serves over TLS with an in-memory certificate that its CA verifies, by name and by address', async () => {
    server = createServer(options());
    const { port, selfSignedCaPem } = await server.start();
    expect(port).toBeGreaterThan(0);
    for (const host of ['localhost', '127.0.0.1']) {
      const res = await fetch(`https://${host}:${port}/healthz`, { tls: { ca: selfSignedCaPem } });
      expect(res.status).toBe(200);
      expect(await res.text()).toBe('ok');
    }
    expect(await servedCommonName(port)).toMatch(/^localhost@\d+$/);
  });

  test('clients that do not trust the certificate are refused', async () => {
    server = createServer(options());
    const { port } = await server.start();
    await expect(fetch(`https://127.0.0.1:${port}/healthz`)).rejects.toThrow();
    const insecure = await fetch(`https://127.0.0.1:${port}/healthz`, { tls: { rejectUnauthorized: false } });
    expect(insecure.status).toBe(200);
  });

  test('plain HTTP is not served', async () => {
    server = createServer(options());
    const { port } = await server.start();
    const answer = await fetch(`http://127.0.0.1:${port}/healthz`).then((r) => r.status, () => 'refused');
    expect(answer).not.toBe(200);
  });

  test('serves the certificate from --tls-cert-file and --tls-private-key-file', async () => {
    tempDir = await mkdtemp(join(tmpdir(), 'edge-ccm-server-tls-'));
    const own = generateSelfSignedCertificate({ host: 'ccm.test', alternateIPs: ['127.0.0.1'] });
    const certFile = join(tempDir, 'tls.crt');
    const keyFile = join(tempDir, 'tls.key');
    await writeFile(certFile, own.certChainPem);
    await writeFile(keyFile, own.keyPem);
    server = createServer(options({ tlsCertFile: certFile, tlsKeyFile: keyFile }));
    const { port, selfSignedCaPem } = await server.start();
    expect(selfSignedCaPem).toBeUndefined();
    const res = await fetch(`https://127.0.0.1:${port}/livez`, { tls: { ca: own.caPem } });
    expect(res.status).toBe(200);
    expect(await servedCommonName(port)).toMatch(/^ccm\.test@\d+$/);
  });

  test('--secure-port=0 turns serving off', async () => {
    server = createServer(options({ securePort: 0, ephemeralPortForTests: false }));
    expect(await server.start()).toEqual({ port: 0 });
  });

  test('rejects a port out of range', () => {
    expect(() => createServer(options({ securePort: 70000 }))).toThrow('--secure-port must be between 0 and 65535');
    expect(() => createServer(options({ securePort: -1 }))).toThrow('--secure-port');
  });

  test('stop closes the port, and a second stop is harmless', async () => {
    server = createServer(options());
    const { port, selfSignedCaPem } = await server.start();
    await server.stop();
    await server.stop();
    const after = await fetch(`https://127.0.0.1:${port}/healthz`, { tls: { ca: selfSignedCaPem }, keepalive: false }).then(
      () => 'served',
      () => 'refused',
    );
    expect(after).toBe('refused');
  });

  test('stop lets a request in flight finish, and resolves after it', async () => {
    const checks = new HealthChecks();
    let entered!: () => void;
    let release!: () => void;
    const inCheck = new Promise<void>((r) => (entered = r));
    checks.add('slow', () => {
      entered();
      return new Promise<void>((r) => (release = r));
    });
    server = createServer(options({ checks }));
    const { port, selfSignedCaPem } = await server.start();
    const inFlight = fetch(`https://127.0.0.1:${port}/healthz`, { tls: { ca: selfSignedCaPem } });
    await inCheck;
    let stopped = false;
    const stopping = server.stop().then(() => (stopped = true));
    await Bun.sleep(50); // time for a stop that would not wait to finish
    expect(stopped).toBe(false);
    release();
    const res = await inFlight;
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('ok');
    await stopping;
    expect(stopped).toBe(true);
  });

  test('cannot start twice', async () => {
    server = createServer(options());
    await server.start();
    await expect(server.start()).rejects.toThrow('server already started');
  });
});
