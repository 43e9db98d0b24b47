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
 * Verification is Go's x509.Verify with ExtKeyUsageClientAuth: a chain of unexpired certificates,
 * each signed by the next, ending at one in the bundle; the leaf's extended key usage, if it has one,
 * includes client authentication.
 */
import { X509Certificate } from 'node:crypto';
import type { MiddlewareHandler } from 'hono';
import type { Logger } from '../../log.ts';
import type { PeerChain, ServerEnv, UserInfo } from '../types.ts';

const CLIENT_AUTH = '1.3.6.1.5.5.7.3.2';
const ANY_EXTENDED_KEY_USAGE = '2.5.29.37.0';

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
}

export function clientCertificateAuthenticator(opts: ClientCertificateOptions): ClientCertificateAuthenticator {
  const clientCAs = opts.clientCaPem ? parseBundle(opts.clientCaPem) : [];
  const proxyCAs = opts.requestHeader ? parseBundle(opts.requestHeader.caBundlePem) : [];
  return {
    acceptedCaPem: [...clientCAs, ...proxyCAs].map((c) => c.toString()),
    authenticate(chain, headers, now = new Date()) {
      if (chain.length === 0) return undefined;
      const rh = opts.requestHeader;
      if (rh && verifies(chain, proxyCAs, now)) {
        const cn = commonName(chain[0]!);
        const allowed = rh.allowedNames.length === 0 || rh.allowedNames.includes(cn ?? '');
        const user = allowed ? userFromHeaders(rh, headers) : undefined;
        if (user) return { user, via: 'front-proxy' };
      }
      if (clientCAs.length && verifies(chain, clientCAs, now)) {
        const leaf = chain[0]!;
        const username = commonName(leaf);
        if (username) return { user: { username, groups: organizations(leaf) }, via: 'x509' };
      }
      return undefined;
    },
  };
}

/** The certificates of a PEM bundle; throws naming what is wrong. */
export function parseBundle(pem: string): X509Certificate[] {
  const blocks = pem.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
  if (blocks.length === 0) throw new Error('no PEM certificate in it');
  return blocks.map((b) => new X509Certificate(b));
}

/** Go's Verify for client certificates, against `roots`, with the chain's other certificates as intermediates. */
export function verifies(chain: PeerChain, roots: readonly X509Certificate[], now: Date): boolean {
  if (roots.length === 0) return false;
  const leaf = chain[0]!;
  const eku = leaf.keyUsage; // node: the extended key usage OIDs, undefined when the extension is absent
  if (eku && !eku.includes(CLIENT_AUTH) && !eku.includes(ANY_EXTENDED_KEY_USAGE)) return false;
  const intermediates = chain.slice(1);
  let current = leaf;
  for (let depth = 0; depth <= intermediates.length; depth++) {
    if (!valid(current, now)) return false;
    const root = roots.find((r) => signedBy(current, r));
    if (root) return valid(root, now);
    const next = intermediates.find((i) => i !== current && i.ca && signedBy(current, i));
    if (!next) return false;
    current = next;
  }
  return false;
}

function signedBy(cert: X509Certificate, issuer: X509Certificate): boolean {
  try {
    return cert.checkIssued(issuer) && cert.verify(issuer.publicKey);
  } catch {
    return false;
  }
}

function valid(cert: X509Certificate, now: Date): boolean {
  return new Date(cert.validFrom) <= now && now <= new Date(cert.validTo);
}

/** The subject attribute values of a type (node prints the subject as `TYPE=value` lines). */
function subjectValues(cert: X509Certificate, type: string): string[] {
  return cert.subject.split('\n').filter((line) => line.startsWith(`${type}=`)).map((line) => line.slice(type.length + 1));
}

const commonName = (cert: X509Certificate): string | undefined => subjectValues(cert, 'CN')[0];
const organizations = (cert: X509Certificate): string[] => subjectValues(cert, 'O');

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
