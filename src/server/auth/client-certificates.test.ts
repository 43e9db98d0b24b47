import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { clientCertificateAuthenticator, parseBundle, readChain, verifies } from './client-certificates.ts';

/** A root CA, an intermediate CA it signs, and client certificates under each, made with the openssl CLI. */
let dir: string;
const pem: Record<string, string> = {};
const cert = (name: string) => new X509Certificate(pem[name]!);
/** Certificates as the verifier takes them: read as Go reads them. */
const read = (...names: string[]) => readChain(names.map(cert))!;

function openssl(args: string[]): void {
  const run = Bun.spawnSync(['openssl', ...args], { stdout: 'pipe', stderr: 'pipe' });
  if (run.exitCode !== 0) throw new Error(`openssl ${args.join(' ')}: ${run.stderr.toString()} (install: apt-get install openssl)`);
}

function issue(name: string, subject: string, extensions: string[], issuer?: string): void {
  const ext = join(dir, `${name}.ext`);
  writeFileSync(ext, ['[req]', 'distinguished_name = dn', 'prompt = no', '[dn]', '[ext]', ...extensions, ''].join('\n'));
  const key = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-noenc', '-keyout', join(dir, `${name}.key`)];
  const signer = issuer ? ['-CA', join(dir, `${issuer}.crt`), '-CAkey', join(dir, `${issuer}.key`)] : [];
  openssl(['req', '-x509', ...signer, ...key, '-out', join(dir, `${name}.crt`), '-days', '2', '-subj', subject, '-config', ext, '-extensions', 'ext']);
  pem[name] = readFileSync(join(dir, `${name}.crt`), 'utf8');
}

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'edge-ccm-client-certs-'));
  const ca = ['basicConstraints = critical,CA:TRUE', 'keyUsage = critical,keyCertSign,cRLSign'];
  issue('root', '/CN=root', ca);
  issue('intermediate', '/CN=intermediate', ca, 'root');
  issue('leaf', '/O=team-a/O=team-b/CN=dora', ['basicConstraints = CA:FALSE', 'extendedKeyUsage = clientAuth'], 'intermediate');
  issue('direct', '/CN=erin', ['basicConstraints = CA:FALSE'], 'root'); // no extended key usage: any use, as Go
  issue('server', '/CN=frank', ['basicConstraints = CA:FALSE', 'extendedKeyUsage = serverAuth'], 'root');
  issue('other-root', '/CN=other', ca);
  issue('enterprise-root', '/CN=enterprise', [...ca, 'crlDistributionPoints = URI:http://crl.example/root.crl']);
});

afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('verifies (Go x509.Verify for client certificates)', () => {
  const now = () => new Date();

  test('a leaf under an intermediate the client sends along verifies; without the intermediate it does not', () => {
    expect(verifies(read('leaf', 'intermediate'), read('root'), now())).toBe(true);
    expect(verifies(read('leaf'), read('root'), now())).toBe(false);
    // The intermediate itself as the trusted bundle is enough.
    expect(verifies(read('leaf'), read('intermediate'), now())).toBe(true);
  });

  test('another root, an expired chain, or a server-only certificate do not verify', () => {
    expect(verifies(read('leaf', 'intermediate'), read('other-root'), now())).toBe(false);
    const inThreeDays = new Date(Date.now() + 3 * 24 * 3600_000);
    expect(verifies(read('direct'), read('root'), inThreeDays)).toBe(false);
    expect(verifies(read('direct'), read('root'), now())).toBe(true);
    expect(verifies(read('server'), read('root'), now())).toBe(false);
  });
});

describe('clientCertificateAuthenticator', () => {
  test('x509: the user is the common name, the groups the organizations', () => {
    const auth = clientCertificateAuthenticator({ clientCaPem: pem.root });
    expect(auth.authenticate([cert('leaf'), cert('intermediate')], new Headers())).toEqual({
      user: { username: 'dora', groups: ['team-a', 'team-b'] },
      via: 'x509',
    });
  });

  test('front proxy: first username header, every group, uid, extra keys decoded and lower-cased', () => {
    const auth = clientCertificateAuthenticator({
      requestHeader: {
        caBundlePem: pem.root!, allowedNames: ['erin'], usernameHeaders: ['X-Remote-User', 'X-User'], uidHeaders: ['X-Remote-Uid'],
        groupHeaders: ['X-Remote-Group'], extraHeaderPrefixes: ['X-Remote-Extra-'],
      },
    });
    const headers = new Headers([['X-User', 'second'], ['X-Remote-User', 'gina'], ['X-Remote-Group', 'g1'], ['X-Remote-Group', 'g2'],
      ['X-Remote-Uid', 'u-1'], ['X-Remote-Extra-Acme.com%2Fproject', 'p1']]);
    expect(auth.authenticate([cert('direct')], headers)).toEqual({
      user: { username: 'gina', groups: ['g1', 'g2'], uid: 'u-1', extra: { 'acme.com/project': ['p1'] } },
      via: 'front-proxy',
    });
    // A proxy certificate not in the allowed names, or no username header: nobody.
    expect(auth.authenticate([cert('leaf'), cert('intermediate')], headers)).toBeUndefined();
    expect(auth.authenticate([cert('direct')], new Headers())).toBeUndefined();
  });
});

describe('CA bundles', () => {
  test('a well-formed CA with an extension the reader does not check is left out and named; the rest of the bundle works', () => {
    const leftOut: string[] = [];
    const read = parseBundle(`${pem['enterprise-root']}${pem.root}`, leftOut);
    expect(read).toHaveLength(1);
    expect(leftOut).toEqual(['certificate 1 (CN=enterprise): extension CRL distribution points (2.5.29.31): not handled here']);
    const auth = clientCertificateAuthenticator({ clientCaPem: `${pem['enterprise-root']}${pem.root}` });
    expect(auth.leftOut).toEqual(leftOut);
    expect(auth.authenticate([cert('direct')], new Headers())?.user.username).toBe('erin');
  });

  test('a bundle of such CAs only, or a malformed certificate, is refused naming it', () => {
    expect(() => parseBundle(pem['enterprise-root']!)).toThrow('none of its certificates can be used: certificate 1 (CN=enterprise): extension CRL distribution points');
    expect(() => parseBundle('-----BEGIN CERTIFICATE-----\nMIIBAA==\n-----END CERTIFICATE-----\n')).toThrow(/^certificate 1: /);
  });
});
