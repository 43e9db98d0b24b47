/**
 * Authentication by TLS client certificate, as apiserver's delegating authenticator does it for
 * controller managers (the two authenticators before the bearer token):
 * - front proxy (--requestheader-*): a certificate that verifies against --requestheader-client-ca-file
 *   (and whose common name is in --requestheader-allowed-names, when that is given) lets the request
 *   name its user in headers: the first username header present, every group header value, uid
 *   headers, and extra keys from the prefixed headers (percent-decoded, lower-cased). Without a
 *   username header it authenticates nobody;
 * - x509 (--client-ca-file): a certificate that verifies against it is the user CN, groups O.
 * A certificate that verifies against neither authenticates nobody (the bearer token still may).
 * Verification is Go's x509.Verify with ExtKeyUsageClientAuth (x509/verify.ts) over certificates
 * read as Go's ParseCertificate reads them, or stricter (x509/certificate.ts): a presented
 * certificate that cannot be read authenticates nobody, as Go's TLS server would drop the
 * connection. The user and groups are read from the subject's DER as Go reads them (x509/name.ts).
 */
import { X509Certificate } from 'node:crypto';
import type { MiddlewareHandler } from 'hono';
import type { Logger } from '../../log.ts';
import type { PeerChain, ServerEnv, UserInfo } from '../types.ts';
import { readCertificate, UnhandledExtensionError, type ReadCertificate } from './x509/certificate.ts';
import { verifyClientChain } from './x509/verify.ts';

export interface RequestHeaderOptions {
  caBundlePem: string;
  allowedNames: readonly string[];
  usernameHeaders: readonly string[];
  uidHeaders: readonly string[];
  groupHeaders: readonly string[];
  extraHeaderPrefixes: readonly string[];
}

export interface ClientCertificateOptions {
  /** --client-ca-file's bundle. */
  clientCaPem?: string;
  requestHeader?: RequestHeaderOptions;
}


export interface ClientCertificateAuthenticator {
  /** The user the certificate (and, for a front proxy, the headers) name; undefined: none. */
  authenticate(chain: PeerChain, headers: Headers, now?: Date): { user: UserInfo; via: 'front-proxy' | 'x509' } | undefined;
  /** Every CA a client certificate may verify against: what the TLS layer asks clients for. */
  readonly acceptedCaPem: string[];
  /** The CA certificates left out of the bundles, each with its reason (logged at start). */
  readonly leftOut: string[];
}

export function clientCertificateAuthenticator(opts: ClientCertificateOptions): ClientCertificateAuthenticator {
  const leftOut: string[] = [];
  const clientCAs = opts.clientCaPem ? parseBundle(opts.clientCaPem, leftOut) : [];
  const proxyCAs = opts.requestHeader ? parseBundle(opts.requestHeader.caBundlePem, leftOut) : [];
  return {
    leftOut,
    acceptedCaPem: [...clientCAs, ...proxyCAs].map((c) => new X509Certificate(c.der).toString()),
    authenticate(chain, headers, now = new Date()) {
      const presented = readChain(chain);
      if (!presented) return undefined;
      const rh = opts.requestHeader;
      if (rh && verifies(presented, proxyCAs, now)) {
        const cn = presented[0]!.subject.commonName;
        const allowed = rh.allowedNames.length === 0 || rh.allowedNames.includes(cn);
        const user = allowed ? userFromHeaders(rh, headers) : undefined;
        if (user) return { user, via: 'front-proxy' };
      }
      if (clientCAs.length && verifies(presented, clientCAs, now)) {
        // k8s.io/apiserver's CommonNameUserConversion: no common name, no user.
        const { commonName: username, organizations: groups } = presented[0]!.subject;
        if (username) return { user: { username, groups }, via: 'x509' };
      }
      return undefined;
    },
  };
}

/** The presented chain read, or undefined when it is empty or any certificate in it cannot be read. */
export function readChain(chain: PeerChain): ReadCertificate[] | undefined {
  if (chain.length === 0) return undefined;
  try {
    return chain.map((c) => readCertificate(new Uint8Array(c.raw)));
  } catch {
    return undefined;
  }
}

/**
 * The certificates of a PEM bundle. Throws naming which one cannot be read and why (malformed:
 * the API server refuses such a file too), or when none can be used. A well-formed one carrying
 * an extension this reader does not check (name constraints, policies, CRL distribution points,
 * AIA) is left out and named in `leftOut` (logged at start): nobody authenticates through it,
 * and the rest of the bundle still works.
 */
export function parseBundle(pem: string, leftOut: string[] = []): ReadCertificate[] {
  const blocks = pem.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
  if (blocks.length === 0) throw new Error('no PEM certificate in it');
  const out: ReadCertificate[] = [];
  blocks.forEach((b, i) => {
    try {
      out.push(readCertificate(new Uint8Array(new X509Certificate(b).raw)));
    } catch (e) {
      if (!(e instanceof UnhandledExtensionError)) throw new Error(`certificate ${i + 1}: ${(e as Error).message}`);
      leftOut.push(`certificate ${i + 1} (${new X509Certificate(b).subject.replaceAll('\n', ', ')}): ${e.message}`);
    }
  });
  if (out.length === 0) throw new Error(`none of its certificates can be used: ${leftOut.join('; ')}`);
  return out;
}

/** Go's Verify for client certificates, against `roots`, with the chain's other certificates as intermediates. */
export function verifies(chain: readonly ReadCertificate[], roots: readonly ReadCertificate[], now: Date): boolean {
  if (roots.length === 0 || chain.length === 0) return false;
  return verifyClientChain(chain[0]!, chain.slice(1), roots, now).ok;
}

function userFromHeaders(rh: RequestHeaderOptions, headers: Headers): UserInfo | undefined {
  const first = (names: readonly string[]): string | undefined => {
    for (const name of names) {
      const value = headers.get(name);
      if (value) return value;
    }
    return undefined;
  };
  const username = first(rh.usernameHeaders);
  if (!username) return undefined;
  const groups = rh.groupHeaders.flatMap((name) => allValues(headers, name));
  const uid = first(rh.uidHeaders);
  const extra: Record<string, string[]> = {};
  for (const [name, value] of headers) {
    const prefix = rh.extraHeaderPrefixes.find((p) => name.toLowerCase().startsWith(p.toLowerCase()));
    if (!prefix) continue;
    const key = decodeURIComponent(name.slice(prefix.length)).toLowerCase();
    (extra[key] ??= []).push(...value.split(',').map((v) => v.trim()));
  }
  return { username, groups, ...(uid ? { uid } : {}), ...(Object.keys(extra).length ? { extra } : {}) };
}

/** Every value of a header sent more than once (Headers joins them with ", "). */
function allValues(headers: Headers, name: string): string[] {
  const joined = headers.get(name);
  return joined ? joined.split(',').map((v) => v.trim()).filter((v) => v !== '') : [];
}

/**
 * The middleware before delegated auth: a client certificate the authenticator accepts sets the
 * request's user (delegatedAuth then only authorizes). Never refuses anything itself.
 */
export function clientCertificateAuth(
  authenticator: ClientCertificateAuthenticator | undefined,
  logger: Logger,
): MiddlewareHandler<ServerEnv> {
  return async (c, next) => {
    const chain = authenticator ? c.env?.peerChain : undefined;
    if (authenticator && chain?.length) {
      const found = authenticator.authenticate(chain, c.req.raw.headers);
      if (found) {
        c.set('user', found.user);
        logger.debug(4, 'authenticated by client certificate', { path: c.req.path, via: found.via, user: found.user.username });
      }
    }
    return next();
  };
}
