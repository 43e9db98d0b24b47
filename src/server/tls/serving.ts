import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { isIP } from 'node:net';
import { join } from 'node:path';
import { generateSelfSignedCertificate } from './self-signed-cert.ts';
import { certificateServerNames, parseNamedCertKey } from './sni-cert-keys.ts';
import { minVersionSecureOptions, opensslCipherList } from './options.ts';
import type { ServingCertificate } from '../types.ts';

/** A TLS serving option that cannot be used (a file missing, a name unknown): bad input, exit 2. */
export class ServingTlsError extends Error {}


export interface ServingTls {
  /** The default certificate first, then one per SNI name. */
  certificates: ServingCertificate[];
  cert: string;
  key: string;
  /** Set when the certificate was made here: the CA that signed it. */
  selfSignedCaPem?: string;
  /** Where the self-signed pair was written (--cert-dir), or read from when it was there already. */
  selfSignedFiles?: { cert: string; key: string; reused: boolean };
  /** Things to tell the operator (e.g. a --tls-min-version below what the library offers). */
  warnings: string[];
}

export interface ServingTlsOptions {
  bindAddress: string;
  tlsCertFile?: string;
  tlsKeyFile?: string;
  /** --cert-dir: where the self-signed pair is kept when no --tls-cert-file is given; empty: in memory. */
  certDir?: string;
  /** --tls-sni-cert-key, one entry per use. */
  sniCertKeys?: readonly string[];
  /** --tls-cipher-suites (Go names). */
  cipherSuites?: readonly string[];
  /** --tls-min-version (VersionTLS12, ...). */
  minVersion?: string;
}

/** The file names upstream's cloud-controller-manager uses in --cert-dir (PairName). */
export const SELF_SIGNED_PAIR_NAME = 'cloud-controller-manager';

/**
 * The serving certificates and TLS parameters: the given files, or (neither given) a self-signed
 * pair as upstream's MaybeDefaultWithSelfSignedCerts("localhost", 127.0.0.1): valid for localhost,
 * 127.0.0.1 and the bind address when it names one address; kept in --cert-dir when given (made
 * once, reused on restart, so clients may pin it), else in memory.
 */
export async function loadServingTls(opts: ServingTlsOptions): Promise<ServingTls> {
  const warnings: string[] = [];
  const ciphers = opensslCipherList(opts.cipherSuites ?? []);
  if (!ciphers.ok) throw new ServingTlsError(`--tls-cipher-suites: ${ciphers.error}`);
  const minVersion = minVersionSecureOptions(opts.minVersion ?? '');
  if (!minVersion.ok) throw new ServingTlsError(`--tls-min-version: ${minVersion.error}`);
  if (minVersion.value.belowFloor) warnings.push(`--tls-min-version=${opts.minVersion}: TLS 1.0 and 1.1 are never offered here; the minimum is TLS 1.2`);
  const params = {
    ...(ciphers.value ? { ciphers: ciphers.value } : {}),
    ...(minVersion.value.secureOptions ? { secureOptions: minVersion.value.secureOptions } : {}),
  };

  const base = await defaultCertificate(opts);
  const sni = await sniCertificates(opts.sniCertKeys ?? []);
  const certificates: ServingCertificate[] = [
    { cert: base.cert, key: base.key, ...params },
    ...sni.map((c) => ({ ...c, ...params })),
  ];
  return { ...base, certificates, warnings };
}

async function defaultCertificate(opts: ServingTlsOptions): Promise<Pick<ServingTls, 'cert' | 'key' | 'selfSignedCaPem' | 'selfSignedFiles'>> {
  if (opts.tlsCertFile || opts.tlsKeyFile) {
    if (!opts.tlsCertFile || !opts.tlsKeyFile) {
      throw new ServingTlsError('--tls-cert-file and --tls-private-key-file must be given together');
    }
    const [cert, key] = await Promise.all([
      readNamed('--tls-cert-file', opts.tlsCertFile),
      readNamed('--tls-private-key-file', opts.tlsKeyFile),
    ]);
    return { cert, key };
  }
  if (opts.certDir) {
    const files = { cert: join(opts.certDir, `${SELF_SIGNED_PAIR_NAME}.crt`), key: join(opts.certDir, `${SELF_SIGNED_PAIR_NAME}.key`) };
    if (existsSync(files.cert) && existsSync(files.key)) {
      const [cert, key] = await Promise.all([readNamed('--cert-dir', files.cert), readNamed('--cert-dir', files.key)]);
      return { cert, key, selfSignedFiles: { ...files, reused: true } };
    }
    const generated = selfSigned(opts.bindAddress);
    try {
      mkdirSync(opts.certDir, { recursive: true, mode: 0o755 });
      writeFileSync(files.cert, generated.certChainPem, { mode: 0o644 });
      writeFileSync(files.key, generated.keyPem, { mode: 0o600 });
    } catch (e) {
      throw new ServingTlsError(`--cert-dir: cannot write the self-signed pair to ${opts.certDir}: ${(e as Error).message}`);
    }
    return { cert: generated.certChainPem, key: generated.keyPem, selfSignedCaPem: generated.caPem, selfSignedFiles: { ...files, reused: false } };
  }
  const generated = selfSigned(opts.bindAddress);
  return { cert: generated.certChainPem, key: generated.keyPem, selfSignedCaPem: generated.caPem };
}

function selfSigned(bindAddress: string) {
  const alternateIPs = ['127.0.0.1'];
  const alternateDNS = ['localhost'];
  const bind = bindAddress.replace(/^\[(.*)\]$/, '$1');
  if (isIP(bind)) {
    if (!isUnspecified(bind)) alternateIPs.push(bind);
  } else if (bind) {
    alternateDNS.push(bind);
  }
  return generateSelfSignedCertificate({ host: 'localhost', alternateIPs, alternateDNS });
}

/** One certificate entry per server name; a name given twice keeps its first pair (upstream: earlier flags win). */
async function sniCertificates(entries: readonly string[]): Promise<ServingCertificate[]> {
  const out: ServingCertificate[] = [];
  const taken = new Set<string>();
  for (const entry of entries) {
    const parsed = parseNamedCertKey(entry);
    if (!parsed.ok) throw new ServingTlsError(`--tls-sni-cert-key: ${parsed.error}`);
    const { certFile, keyFile, names } = parsed.value;
    const [cert, key] = await Promise.all([readNamed('--tls-sni-cert-key', certFile), readNamed('--tls-sni-cert-key', keyFile)]);
    let serverNames = names;
    if (!serverNames.length) {
      try {
        serverNames = certificateServerNames(cert);
      } catch (e) {
        throw new ServingTlsError(`--tls-sni-cert-key: ${certFile} is not a PEM certificate: ${(e as Error).message}`);
      }
      if (!serverNames.length) throw new ServingTlsError(`--tls-sni-cert-key: ${certFile} names no DNS name; give the names after a colon (cert,key:name)`);
    }
    for (const serverName of serverNames) {
      if (taken.has(serverName)) continue;
      taken.add(serverName);
      out.push({ cert, key, serverName });
    }
  }
  return out;
}

async function readNamed(flag: string, path: string): Promise<string> {
  try {
    return await readFile(path, 'utf8');
  } catch (e) {
    throw new ServingTlsError(`${flag}: cannot read ${path}: ${(e as Error).message}`);
  }
}

const isUnspecified = (ip: string): boolean => ip === '0.0.0.0' || /^[0:]+$/.test(ip);
