/**
 * Go's x509.Verify with KeyUsages [ClientAuth] (crypto/x509 verify.go, go1.26), over certificates
 * read by certificate.ts: the same search for chains (roots first, then intermediates, candidates
 * by raw issuer name in key-identifier order, at most 100 signature checks, no certificate twice),
 * the same checks on each (CheckSignatureFrom's basic constraints and keyCertSign, isValid's
 * validity, CA flag, path length and unhandled critical extensions), and a chain is good when its
 * extended key usages, nested from the root down, still allow client authentication. Signatures
 * are checked by the runtime (node:crypto X509Certificate.verify); which algorithms may sign is
 * decided when reading (SHA-1 and MD5, refused by Go, are never read).
 */
import { X509Certificate } from 'node:crypto';
import { KEY_CERT_SIGN, type ReadCertificate } from './certificate.ts';
import { equalBytes } from '../../../x509/der.ts';

const CLIENT_AUTH = '1.3.6.1.5.5.7.3.2';
const ANY_EXTENDED_KEY_USAGE = '2.5.29.37.0';
const MAX_SIGNATURE_CHECKS = 100;

export type Verdict = { ok: true; chain: ReadCertificate[] } | { ok: false; reason: string };

/** `leaf` verified against `roots` with `intermediates` as Go does; the first good chain, or why none. */
export function verifyClientChain(
  leaf: ReadCertificate,
  intermediates: readonly ReadCertificate[],
  roots: readonly ReadCertificate[],
  now: Date,
): Verdict {
  const rootPool = dedupe(roots);
  const intermediatePool = dedupe(intermediates);
  const leafProblem = isValid(leaf, 'leaf', [], now);
  if (leafProblem) return { ok: false, reason: leafProblem };
  const candidates = rootPool.some((r) => equalBytes(r.der, leaf.der))
    ? [[leaf]]
    : buildChains([leaf], { count: 0 }, rootPool, intermediatePool, now);
  if (candidates.length === 0) return { ok: false, reason: 'no chain to a trusted CA' };
  const good = candidates.find(allowsClientAuth);
  return good ? { ok: true, chain: good } : { ok: false, reason: 'extended key usage does not allow client authentication' };
}

function dedupe(certs: readonly ReadCertificate[]): ReadCertificate[] {
  const out: ReadCertificate[] = [];
  for (const c of certs) if (!out.some((o) => equalBytes(o.der, c.der))) out.push(c);
  return out;
}

type Kind = 'leaf' | 'intermediate' | 'root';

function buildChains(
  chain: ReadCertificate[],
  checks: { count: number },
  roots: ReadCertificate[],
  intermediates: ReadCertificate[],
  now: Date,
): ReadCertificate[][] {
  const child = chain[chain.length - 1]!;
  const chains: ReadCertificate[][] = [];
  for (const [kind, pool] of [['root', roots], ['intermediate', intermediates]] as const) {
    for (const parent of potentialParents(child, pool)) {
      if (++checks.count > MAX_SIGNATURE_CHECKS) return chains;
      if (alreadyInChain(parent, chain)) continue;
      if (!signedBy(child, parent)) continue;
      if (isValid(parent, kind, chain, now)) continue;
      if (kind === 'root') chains.push([...chain, parent]);
      else chains.push(...buildChains([...chain, parent], checks, roots, intermediates, now));
      if (checks.count > MAX_SIGNATURE_CHECKS) return chains;
    }
  }
  return chains;
}

/** CertPool.findPotentialParents: same raw name; matching key ids first, then one missing, then different. */
function potentialParents(child: ReadCertificate, pool: ReadCertificate[]): ReadCertificate[] {
  const named = pool.filter((c) => equalBytes(c.rawSubject, child.rawIssuer));
  const rank = (c: ReadCertificate): number => {
    if (equalBytes(c.subjectKeyId, child.authorityKeyId)) return 0;
    if ((c.subjectKeyId.length === 0) !== (child.authorityKeyId.length === 0)) return 1;
    return 2;
  };
  return [0, 1, 2].flatMap((r) => named.filter((c) => rank(c) === r));
}

/** Same subject, key and subjectAltName as a certificate already in the chain (Go's alreadyInChain). */
function alreadyInChain(candidate: ReadCertificate, chain: ReadCertificate[]): boolean {
  return chain.some((c) => equalBytes(c.rawSubject, candidate.rawSubject) && equalBytes(c.rawSpki, candidate.rawSpki) &&
    (c.subjectAltName === undefined || candidate.subjectAltName === undefined
      ? c.subjectAltName === candidate.subjectAltName
      : equalBytes(c.subjectAltName, candidate.subjectAltName)));
}

/** Go's CheckSignatureFrom: the parent may sign certificates, and its key verifies the signature. */
function signedBy(child: ReadCertificate, parent: ReadCertificate): boolean {
  const bc = parent.basicConstraints;
  if ((parent.version === 3 && !bc) || (bc && !bc.isCA)) return false;
  if (parent.keyUsage !== 0 && (parent.keyUsage & KEY_CERT_SIGN) === 0) return false;
  if (child.signedWith !== parent.keyType) return false;
  try {
    return new X509Certificate(child.der).verify(parent.publicKey);
  } catch {
    return false;
  }
}

/** Go's isValid; undefined when valid, else why not. */
function isValid(cert: ReadCertificate, kind: Kind, chain: ReadCertificate[], now: Date): string | undefined {
  if (cert.unhandledCritical.length) return `unhandled critical extension ${cert.unhandledCritical.join(', ')}`;
  if (now < cert.notBefore) return 'not yet valid';
  if (now > cert.notAfter) return 'expired';
  const bc = cert.basicConstraints;
  if (kind === 'intermediate' && !bc?.isCA) return 'an intermediate that is not a CA';
  if (bc && bc.maxPathLen >= 0 && chain.length - 1 > bc.maxPathLen) return 'too many intermediates';
  return undefined;
}

/** Go's checkChainForKeyUsage for [ClientAuth]: every certificate with extended key usages lists clientAuth or any. */
function allowsClientAuth(chain: ReadCertificate[]): boolean {
  return chain.every((c) => !c.extKeyUsage || c.extKeyUsage.length === 0 ||
    c.extKeyUsage.includes(ANY_EXTENDED_KEY_USAGE) || c.extKeyUsage.includes(CLIENT_AUTH));
}
