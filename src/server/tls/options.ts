/**
 * --tls-min-version and --tls-cipher-suites as the TLS library under Bun.serve (BoringSSL) takes
 * them: Go's suite names (what upstream's flags accept) mapped to OpenSSL names for `ciphers`, and
 * the minimum version as SSL_OP_NO_* bits for `secureOptions`. As in Go, the suites list governs
 * TLS 1.2 only: TLS 1.3 always offers its own three AEAD suites, which cannot be chosen.
 */
import { constants } from 'node:crypto';
import { UPSTREAM_TLS_CIPHER_SUITES, UPSTREAM_TLS_VERSIONS } from './upstream-tls-names.ts';

/** Go name -> OpenSSL name, for every suite BoringSSL can negotiate in TLS 1.2. */
const OPENSSL_NAMES: Readonly<Record<string, string>> = {
  TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256: 'ECDHE-ECDSA-AES128-GCM-SHA256',
  TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384: 'ECDHE-ECDSA-AES256-GCM-SHA384',
  TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256: 'ECDHE-RSA-AES128-GCM-SHA256',
  TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384: 'ECDHE-RSA-AES256-GCM-SHA384',
  TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305: 'ECDHE-ECDSA-CHACHA20-POLY1305',
  TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256: 'ECDHE-ECDSA-CHACHA20-POLY1305',
  TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305: 'ECDHE-RSA-CHACHA20-POLY1305',
  TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256: 'ECDHE-RSA-CHACHA20-POLY1305',
  TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA: 'ECDHE-ECDSA-AES128-SHA',
  TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA: 'ECDHE-ECDSA-AES256-SHA',
  TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA: 'ECDHE-RSA-AES128-SHA',
  TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA: 'ECDHE-RSA-AES256-SHA',
  TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256: 'ECDHE-ECDSA-AES128-SHA256',
  TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256: 'ECDHE-RSA-AES128-SHA256',
  TLS_RSA_WITH_AES_128_GCM_SHA256: 'AES128-GCM-SHA256',
  TLS_RSA_WITH_AES_256_GCM_SHA384: 'AES256-GCM-SHA384',
  TLS_RSA_WITH_AES_128_CBC_SHA: 'AES128-SHA',
  TLS_RSA_WITH_AES_256_CBC_SHA: 'AES256-SHA',
  TLS_RSA_WITH_3DES_EDE_CBC_SHA: 'DES-CBC3-SHA',
};

/** TLS 1.3 suites: Go accepts the names and ignores them (TLS 1.3 suites are not configurable); so do we. */
const TLS13_SUITES = new Set(['TLS_AES_128_GCM_SHA256', 'TLS_AES_256_GCM_SHA384', 'TLS_CHACHA20_POLY1305_SHA256']);

/** Go knows these, BoringSSL does not have them (RC4, 3DES with ECDHE, RSA key exchange with SHA-256 CBC). */
export const SUITES_NOT_OFFERED = UPSTREAM_TLS_CIPHER_SUITES.filter((name) => !(name in OPENSSL_NAMES) && !TLS13_SUITES.has(name));

export type TlsOptionResult<T> = { ok: true; value: T } | { ok: false; error: string };

/**
 * The `ciphers` string for Go suite names; undefined when none is given (the library's defaults,
 * which like Go's offer only ECDHE AEAD and CBC suites). Unknown names are refused with upstream's
 * message, names the library cannot negotiate with one that says so.
 */
export function opensslCipherList(goNames: readonly string[]): TlsOptionResult<string | undefined> {
  if (goNames.length === 0) return { ok: true, value: undefined };
  const out: string[] = [];
  for (const name of goNames) {
    if (!UPSTREAM_TLS_CIPHER_SUITES.includes(name)) return { ok: false, error: `Cipher suite ${name} not supported or doesn't exist` };
    if (TLS13_SUITES.has(name)) continue;
    const openssl = OPENSSL_NAMES[name];
    if (!openssl) return { ok: false, error: `cipher suite ${name} is not offered by edge-ccm's TLS library (BoringSSL); remove it` };
    if (!out.includes(openssl)) out.push(openssl);
  }
  // Only TLS 1.3 names: as Go, the TLS 1.2 suites stay at their defaults.
  return { ok: true, value: out.length ? out.join(':') : undefined };
}

/** Go's tls.VersionTLS1x names -> the SSL_OP_NO_* bits that leave that version as the lowest. */
export function minVersionSecureOptions(name: string): TlsOptionResult<{ secureOptions: number; belowFloor: boolean }> {
  if (name !== '' && !UPSTREAM_TLS_VERSIONS.includes(name)) {
    return { ok: false, error: `unknown tls version ${JSON.stringify(name)} (one of ${UPSTREAM_TLS_VERSIONS.join(', ')})` };
  }
  // BoringSSL in Bun never negotiates below TLS 1.2, which is also Go's default minimum for servers.
  const belowFloor = name === 'VersionTLS10' || name === 'VersionTLS11';
  const secureOptions = name === 'VersionTLS13' ? constants.SSL_OP_NO_TLSv1_2 | constants.SSL_OP_NO_TLSv1_1 | constants.SSL_OP_NO_TLSv1 : 0;
  return { ok: true, value: { secureOptions, belowFloor } };
}
