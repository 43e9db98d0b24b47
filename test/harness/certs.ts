import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

/**
 * Test PKI made with the openssl CLI: certificate authorities, serving and client certificates,
 * and the service-account signing key. EC P-256 keys throughout: fast to generate on a small
 * machine and accepted by Go (kube-apiserver, etcd) and by Bun's TLS.
 */

export interface CertificateAuthority {
  certPath: string;
  keyPath: string;
  certPem: string;
}

export interface IssuedCertificate {
  certPath: string;
  keyPath: string;
  certPem: string;
  keyPem: string;
}

export interface CertificateRequest {
  commonName: string;
  /** Each becomes one O= entry; Kubernetes reads them as the user's groups. */
  organizations?: string[];
  usage: 'server' | 'client';
  dnsNames?: string[];
  ipAddresses?: string[];
}

const VALID_DAYS = '7';

async function openssl(args: string[]): Promise<void> {
  const proc = Bun.spawn({ cmd: ['openssl', ...args], stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' });
  const [code, stderr] = await Promise.all([proc.exited, new Response(proc.stderr).text()]);
  if (code !== 0) throw new Error(`openssl ${args[0]} failed (exit ${code}): ${stderr.trim()}`);
}

/** A -subj value; openssl treats '/' as the separator and '+' as a multi-valued RDN, so both are escaped. */
function subject(commonName: string, organizations: string[] = []): string {
  const escape = (v: string) => v.replace(/[\\/+]/g, (c) => `\\${c}`);
  return organizations.map((o) => `/O=${escape(o)}`).join('') + `/CN=${escape(commonName)}`;
}

/** A config file whose only job is to carry the extensions; the subject comes from -subj. */
async function writeExtensionConfig(path: string, extensions: string[]): Promise<void> {
  await writeFile(path, ['[req]', 'distinguished_name = dn', 'prompt = no', '[dn]', '[ext]', ...extensions, ''].join('\n'));
}

const EC_KEY = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-noenc'];

export async function createCertificateAuthority(dir: string, name: string, commonName: string): Promise<CertificateAuthority> {
  const certPath = join(dir, `${name}.crt`);
  const keyPath = join(dir, `${name}.key`);
  const configPath = join(dir, `${name}.cnf`);
  await writeExtensionConfig(configPath, [
    'basicConstraints = critical,CA:TRUE',
    'keyUsage = critical,digitalSignature,keyCertSign,cRLSign',
    'subjectKeyIdentifier = hash',
  ]);
  await openssl(['req', '-x509', ...EC_KEY, '-keyout', keyPath, '-out', certPath, '-days', VALID_DAYS,
    '-subj', subject(commonName), '-config', configPath, '-extensions', 'ext']);
  return { certPath, keyPath, certPem: await readFile(certPath, 'utf8') };
}

export async function issueCertificate(ca: CertificateAuthority, dir: string, name: string, req: CertificateRequest): Promise<IssuedCertificate> {
  const certPath = join(dir, `${name}.crt`);
  const keyPath = join(dir, `${name}.key`);
  const configPath = join(dir, `${name}.cnf`);
  const altNames = [...(req.dnsNames ?? []).map((d) => `DNS:${d}`), ...(req.ipAddresses ?? []).map((ip) => `IP:${ip}`)];
  await writeExtensionConfig(configPath, [
    'basicConstraints = critical,CA:FALSE',
    'keyUsage = critical,digitalSignature',
    `extendedKeyUsage = ${req.usage === 'server' ? 'serverAuth' : 'clientAuth'}`,
    'authorityKeyIdentifier = keyid',
    ...(altNames.length ? [`subjectAltName = ${altNames.join(',')}`] : []),
  ]);
  await openssl(['req', '-x509', '-CA', ca.certPath, '-CAkey', ca.keyPath, ...EC_KEY, '-keyout', keyPath, '-out', certPath,
    '-days', VALID_DAYS, '-subj', subject(req.commonName, req.organizations), '-config', configPath, '-extensions', 'ext']);
  const [certPem, keyPem] = await Promise.all([readFile(certPath, 'utf8'), readFile(keyPath, 'utf8')]);
  return { certPath, keyPath, certPem, keyPem };
}

/** The key pair kube-apiserver signs and verifies service-account tokens with. */
export async function createSigningKeyPair(dir: string, name: string): Promise<{ privateKeyPath: string; publicKeyPath: string }> {
  const privateKeyPath = join(dir, `${name}.key`);
  const publicKeyPath = join(dir, `${name}.pub`);
  await openssl(['genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', privateKeyPath]);
  await openssl(['pkey', '-in', privateKeyPath, '-pubout', '-out', publicKeyPath]);
  return { privateKeyPath, publicKeyPath };
}

export interface SigningRequest {
  commonName: string;
  organizations?: string[];
  dnsNames?: string[];
  ipAddresses?: string[];
  emails?: string[];
  /** openssl -newkey value; P-256 (what a kubelet generates) unless told. */
  key?: 'ec-p256' | 'ec-p384' | 'rsa-1024' | 'rsa-2048' | 'ed25519';
}

const NEW_KEY: Record<NonNullable<SigningRequest['key']>, string[]> = {
  'ec-p256': EC_KEY,
  'ec-p384': ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:secp384r1', '-noenc'],
  'rsa-1024': ['-newkey', 'rsa:1024', '-noenc'],
  'rsa-2048': ['-newkey', 'rsa:2048', '-noenc'],
  ed25519: ['-newkey', 'ed25519', '-noenc'],
};

/** A PKCS#10 request (PEM) as a kubelet's certificate manager makes one: subject, SANs as the extensionRequest. */
export async function createSigningRequest(dir: string, name: string, req: SigningRequest): Promise<{ csrPem: string; keyPem: string }> {
  const csrPath = join(dir, `${name}.csr`);
  const keyPath = join(dir, `${name}.key`);
  const configPath = join(dir, `${name}.cnf`);
  const altNames = [...(req.dnsNames ?? []).map((d) => `DNS:${d}`), ...(req.ipAddresses ?? []).map((ip) => `IP:${ip}`), ...(req.emails ?? []).map((e) => `email:${e}`)];
  await writeExtensionConfig(configPath, altNames.length ? [`subjectAltName = ${altNames.join(',')}`] : []);
  await openssl(['req', '-new', ...NEW_KEY[req.key ?? 'ec-p256'], '-keyout', keyPath, '-out', csrPath,
    '-subj', subject(req.commonName, req.organizations), '-config', configPath, ...(altNames.length ? ['-reqexts', 'ext'] : [])]);
  const [csrPem, keyPem] = await Promise.all([readFile(csrPath, 'utf8'), readFile(keyPath, 'utf8')]);
  return { csrPem, keyPem };
}
