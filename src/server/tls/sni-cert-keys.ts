/**
 * --tls-sni-cert-key: `cert,key[:name1,name2]` as component-base's NamedCertKey reads it. Without
 * names, the certificate's own names are used (its DNS subject alternative names, else a common name
 * that is a DNS name), as apiserver's SNI certificate loader does; the most specific match wins
 * (an exact name over a `*.` wildcard), and a client that sends no or an unknown server name gets
 * the default certificate (--tls-cert-file or the self-signed one).
 */
import { X509Certificate } from 'node:crypto';
import { isIP } from 'node:net';

export interface NamedCertKey {
  certFile: string;
  keyFile: string;
  /** Explicit names; empty: taken from the certificate. */
  names: string[];
}

export type NamedCertKeyResult = { ok: true; value: NamedCertKey } | { ok: false; error: string };

export function parseNamedCertKey(text: string): NamedCertKeyResult {
  const colon = text.indexOf(':');
  let names: string[] = [];
  let pair = text.trim();
  if (colon >= 0) {
    const list = text.slice(colon + 1).trim();
    if (list === '') return { ok: false, error: 'empty names list is not allowed' };
    names = list.split(',').map((n) => n.trim());
    pair = text.slice(0, colon).trim();
  }
  const files = pair.split(',');
  if (files.length !== 2) return { ok: false, error: `expected comma separated certificate and key file paths, got ${JSON.stringify(text)}` };
  return { ok: true, value: { certFile: (files[0] as string).trim(), keyFile: (files[1] as string).trim(), names } };
}

/** The server names a certificate answers for when --tls-sni-cert-key names none (IP addresses are never sent as SNI). */
export function certificateServerNames(certPem: string): string[] {
  const cert = new X509Certificate(certPem);
  const dns = (cert.subjectAltName ?? '')
    .split(', ')
    .filter((entry) => entry.startsWith('DNS:'))
    .map((entry) => entry.slice(4));
  if (dns.length) return [...new Set(dns)];
  const cn = /^CN=(.+)$/m.exec(cert.subject)?.[1]?.trim();
  return cn && !isIP(cn) && /^[*a-zA-Z0-9.-]+$/.test(cn) ? [cn] : [];
}
