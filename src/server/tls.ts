import { readFile } from 'node:fs/promises';
import { isIP } from 'node:net';
import { generateSelfSignedCertificate } from './self-signed-cert.ts';

export interface ServingTls {
  cert: string;
  key: string;
  /** Set when the certificate was made here: the CA that signed it. */
  selfSignedCaPem?: string;
}

export interface ServingTlsOptions {
  bindAddress: string;
  tlsCertFile?: string;
  tlsKeyFile?: string;
}

/**
 * The serving certificate: the given files, or (neither given) a self-signed one made in
 * memory as upstream's MaybeDefaultWithSelfSignedCerts("localhost", 127.0.0.1): valid for
 * localhost, 127.0.0.1, and the bind address when it names one address.
 */
export async function loadServingTls(opts: ServingTlsOptions): Promise<ServingTls> {
  if (opts.tlsCertFile || opts.tlsKeyFile) {
    if (!opts.tlsCertFile || !opts.tlsKeyFile) {
      throw new Error('--tls-cert-file and --tls-private-key-file must be given together');
    }
    const [cert, key] = await Promise.all([readFile(opts.tlsCertFile, 'utf8'), readFile(opts.tlsKeyFile, 'utf8')]);
    return { cert, key };
  }
  const alternateIPs = ['127.0.0.1'];
  const alternateDNS = ['localhost'];
  const bind = opts.bindAddress.replace(/^\[(.*)\]$/, '$1');
  if (isIP(bind)) {
    if (!isUnspecified(bind)) alternateIPs.push(bind);
  } else if (bind) {
    alternateDNS.push(bind);
  }
  const generated = generateSelfSignedCertificate({ host: 'localhost', alternateIPs, alternateDNS });
  return { cert: generated.certChainPem, key: generated.keyPem, selfSignedCaPem: generated.caPem };
}

const isUnspecified = (ip: string): boolean => ip === '0.0.0.0' || /^[0:]+$/.test(ip);
