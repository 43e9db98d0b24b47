/**
 * One X.509 certificate read for client authentication, the way Go's crypto/x509 ParseCertificate
 * reads it (parser.go) or stricter: what Go would refuse to parse (its TLS server then drops the
 * connection) is refused here too, and so is what this reader does not handle: a certificate has
 * one reading or none. Refused beyond Go, on purpose (documented in docs/migrating.md):
 * non-DER encodings Go tolerates (BER lengths, explicit defaults, data after a known extension's
 * value or an attribute's value), times other than `YYMMDDHHMMSSZ` / `YYYYMMDDHHMMSSZ`,
 * name values with two readings (src/x509/directory-string.ts: a non-ASCII T61String, a BMPString
 * ending in NUL), v2 certificates and unique identifiers, keys other than RSA (1024 bits or more, exponent 65537),
 * P-256/P-384/P-521 and Ed25519, signatures other than RSA PKCS#1 v1.5, ECDSA (SHA-256/384/512)
 * and Ed25519, URI names in the subjectAltName, and the extensions whose checks are not
 * implemented here: name constraints, certificate policies, policy mappings and constraints,
 * inhibitAnyPolicy, CRL distribution points, authority information access.
 */
import { X509Certificate, type KeyObject } from 'node:crypto';
import { DerError, DerReader, TAG, equalBytes, inside, readBitString, readBoolean, readInteger, readOid, readOnly, readWholeBits, type Element } from '../../../x509/der.ts';
import { readName, type NameFields } from './name.ts';

export type KeyType = 'rsa' | 'ec' | 'ed25519';

export interface BasicConstraints {
  isCA: boolean;
  /** -1: no limit (Go's MaxPathLen). */
  maxPathLen: number;
}

export interface ReadCertificate {
  der: Uint8Array;
  tbs: Uint8Array;
  /** 1 or 3, one-based as Go's Certificate.Version. */
  version: 1 | 3;
  /** The signature algorithm this certificate was signed with, and the key type it needs. */
  signedWith: KeyType;
  signature: Uint8Array;
  rawIssuer: Uint8Array;
  rawSubject: Uint8Array;
  rawSpki: Uint8Array;
  subject: NameFields;
  notBefore: Date;
  notAfter: Date;
  keyType: KeyType;
  publicKey: KeyObject;
  basicConstraints?: BasicConstraints;
  /** Go's KeyUsage bits (bit i = named bit i of the BIT STRING, i < 9); 0 when absent. */
  keyUsage: number;
  /** The extended key usage OIDs; undefined without the extension. */
  extKeyUsage?: string[];
  subjectKeyId: Uint8Array;
  authorityKeyId: Uint8Array;
  /** The subjectAltName extension's value (Go compares it in alreadyInChain). */
  subjectAltName?: Uint8Array;
  /** Critical extensions Go does not handle: such a certificate never verifies. */
  unhandledCritical: string[];
}

export const KEY_CERT_SIGN = 1 << 5;

const OID = {
  rsa: '1.2.840.113549.1.1.1',
  ec: '1.2.840.10045.2.1',
  ed25519: '1.3.101.112',
  basicConstraints: '2.5.29.19',
  keyUsage: '2.5.29.15',
  extKeyUsage: '2.5.29.37',
  subjectKeyId: '2.5.29.14',
  authorityKeyId: '2.5.29.35',
  subjectAltName: '2.5.29.17',
} as const;

const SIGNATURE_ALGORITHMS: Record<string, { key: KeyType; nullParams: boolean }> = {
  '1.2.840.113549.1.1.11': { key: 'rsa', nullParams: true }, // sha256WithRSAEncryption
  '1.2.840.113549.1.1.12': { key: 'rsa', nullParams: true }, // sha384WithRSAEncryption
  '1.2.840.113549.1.1.13': { key: 'rsa', nullParams: true }, // sha512WithRSAEncryption
  '1.2.840.10045.4.3.2': { key: 'ec', nullParams: false }, // ecdsa-with-SHA256
  '1.2.840.10045.4.3.3': { key: 'ec', nullParams: false }, // ecdsa-with-SHA384
  '1.2.840.10045.4.3.4': { key: 'ec', nullParams: false }, // ecdsa-with-SHA512
  '1.3.101.112': { key: 'ed25519', nullParams: false }, // Ed25519
};

/** The EC curves accepted, with the length of an uncompressed point. */
const CURVES: Record<string, number> = {
  '1.2.840.10045.3.1.7': 65, // P-256
  '1.3.132.0.34': 97, // P-384
  '1.3.132.0.35': 133, // P-521
};

/** Extensions Go parses whose checks this reader does not implement: a certificate with one is refused. */
const REFUSED_EXTENSIONS: Record<string, string> = {
  '2.5.29.30': 'name constraints',
  '2.5.29.32': 'certificate policies',
  '2.5.29.33': 'policy mappings',
  '2.5.29.36': 'policy constraints',
  '2.5.29.54': 'inhibitAnyPolicy',
  '2.5.29.31': 'CRL distribution points',
  '1.3.6.1.5.5.7.1.1': 'authority information access',
};

const NULL_PARAMS = Uint8Array.of(0x05, 0x00);

/** A well-formed certificate with an extension this reader does not implement (REFUSED_EXTENSIONS). */
export class UnhandledExtensionError extends DerError {}

/** Reads a DER certificate; throws a DerError saying what is wrong. */
export function readCertificate(der: Uint8Array): ReadCertificate {
  const top = new DerReader(der, 'certificate');
  const cert = top.enter(TAG.sequence, 'certificate');
  top.end();
  const tbsElement = cert.read(TAG.sequence);
  const outerAlgorithm = cert.read(TAG.sequence);
  const signature = readWholeBits(cert.read(TAG.bitString), 'certificate signature');
  cert.end();

  const tbs = new DerReader(tbsElement.content, 'tbsCertificate');
  const versionElement = tbs.optional(0xa0);
  let version: 1 | 3 = 1;
  if (versionElement) {
    const v = inside(versionElement, 'version');
    const n = readInteger(v.read(TAG.integer), 'version');
    v.end();
    if (n !== 2n) throw new DerError(`version: ${n + 1n} (only v1, without the field, and v3 are read)`);
    version = 3;
  }
  if (readInteger(tbs.read(TAG.integer), 'serial number') < 0n) throw new DerError('serial number: negative');
  const innerAlgorithm = tbs.read(TAG.sequence);
  if (!equalBytes(innerAlgorithm.raw, outerAlgorithm.raw)) throw new DerError('signature algorithm: inner and outer identifiers differ');
  const signedWith = signatureAlgorithm(innerAlgorithm);
  const issuer = tbs.read(TAG.sequence);
  readName(issuer.raw, 'issuer');
  const validity = tbs.enter(TAG.sequence, 'validity');
  const notBefore = readTime(validity.read(), 'notBefore');
  const notAfter = readTime(validity.read(), 'notAfter');
  validity.end();
  const subjectElement = tbs.read(TAG.sequence);
  const subject = readName(subjectElement.raw, 'subject');
  const spki = tbs.read(TAG.sequence);
  const keyType = readPublicKeyInfo(spki);

  const out: ReadCertificate = {
    der, tbs: tbsElement.raw, version, signedWith, signature,
    rawIssuer: issuer.raw, rawSubject: subjectElement.raw, rawSpki: spki.raw, subject, notBefore, notAfter,
    keyType, publicKey: undefined as unknown as KeyObject,
    keyUsage: 0, subjectKeyId: new Uint8Array(), authorityKeyId: new Uint8Array(), unhandledCritical: [],
  };
  if (version === 3) {
    const extensions = tbs.optional(0xa3);
    if (extensions) readExtensions(extensions, out);
  }
  tbs.end();

  // The runtime parses it too (and holds the key the signatures are checked with).
  let x509: X509Certificate;
  try {
    x509 = new X509Certificate(der);
  } catch (e) {
    throw new DerError(`certificate: the runtime cannot read it (${(e as Error).message})`);
  }
  out.publicKey = x509.publicKey;
  checkKey(out);
  return out;
}

function signatureAlgorithm(ai: Element): KeyType {
  const r = new DerReader(ai.content, 'signature algorithm');
  const oid = readOid(r.read(TAG.oid), 'signature algorithm');
  const known = SIGNATURE_ALGORITHMS[oid];
  if (!known) throw new DerError(`signature algorithm ${oid}: not accepted (RSA PKCS#1 v1.5, ECDSA with SHA-256/384/512, or Ed25519)`);
  if (known.nullParams) {
    const params = r.read(TAG.null);
    if (params.content.length) throw new DerError('signature algorithm: NULL with content');
  }
  r.end();
  return known.key;
}

function readPublicKeyInfo(spki: Element): KeyType {
  const r = new DerReader(spki.content, 'subjectPublicKeyInfo');
  const ai = r.enter(TAG.sequence, 'public key algorithm');
  const key = readWholeBits(r.read(TAG.bitString), 'public key');
  r.end();
  const oid = readOid(ai.read(TAG.oid), 'public key algorithm');
  if (oid === OID.rsa) {
    if (!equalBytes(ai.read(TAG.null).raw, NULL_PARAMS)) throw new DerError('RSA key: parameters not NULL');
    ai.end();
    const rsa = inside(readOnly(key, TAG.sequence, 'RSA public key'), 'RSA public key');
    const n = readInteger(rsa.read(TAG.integer), 'RSA modulus');
    const e = readInteger(rsa.read(TAG.integer), 'RSA exponent');
    rsa.end();
    if (n <= 0n || n.toString(2).length < 1024) throw new DerError('RSA key: modulus under 1024 bits');
    if (e !== 65537n) throw new DerError('RSA key: exponent other than 65537');
    return 'rsa';
  }
  if (oid === OID.ec) {
    const curve = readOid(ai.read(TAG.oid), 'EC curve');
    ai.end();
    const pointLength = CURVES[curve];
    if (!pointLength) throw new DerError(`EC key: curve ${curve} not accepted (P-256, P-384, P-521)`);
    if (key.length !== pointLength || key[0] !== 0x04) throw new DerError('EC key: not an uncompressed point');
    return 'ec';
  }
  if (oid === OID.ed25519) {
    ai.end();
    if (key.length !== 32) throw new DerError('Ed25519 key: not 32 bytes');
    return 'ed25519';
  }
  throw new DerError(`public key algorithm ${oid}: not accepted (RSA, EC, Ed25519)`);
}

/** The runtime's key must be the one read (it also checks an EC point is on its curve). */
function checkKey(cert: ReadCertificate): void {
  const type = cert.publicKey.asymmetricKeyType;
  const expected = { rsa: 'rsa', ec: 'ec', ed25519: 'ed25519' }[cert.keyType];
  if (type !== expected) throw new DerError(`public key: the runtime reads a ${type} key`);
}

function readTime(e: Element, what: string): Date {
  const text = String.fromCharCode(...e.content);
  let match: RegExpMatchArray | null;
  let year: number;
  if (e.tag === TAG.utcTime && (match = /^(\d\d)(\d\d)(\d\d)(\d\d)(\d\d)(\d\d)Z$/.exec(text))) {
    const yy = Number(match[1]);
    year = yy >= 50 ? 1900 + yy : 2000 + yy;
  } else if (e.tag === TAG.generalizedTime && (match = /^(\d\d\d\d)(\d\d)(\d\d)(\d\d)(\d\d)(\d\d)Z$/.exec(text))) {
    year = Number(match[1]);
  } else {
    throw new DerError(`${what}: not a UTCTime YYMMDDHHMMSSZ or GeneralizedTime YYYYMMDDHHMMSSZ`);
  }
  const [month, day, hour, minute, second] = match.slice(2).map(Number) as [number, number, number, number, number];
  const date = new Date(Date.UTC(year, month - 1, day, hour, minute, second));
  date.setUTCFullYear(year); // Date.UTC maps years 0-99 to 1900-1999
  const back = date.getUTCFullYear() === year && date.getUTCMonth() === month - 1 && date.getUTCDate() === day &&
    date.getUTCHours() === hour && date.getUTCMinutes() === minute && date.getUTCSeconds() === second;
  if (!back) throw new DerError(`${what}: not a valid date and time`);
  return date;
}

function readExtensions(element: Element, out: ReadCertificate): void {
  const list = new DerReader(element.content, 'extensions').enter(TAG.sequence, 'extensions');
  if (list.empty) throw new DerError('extensions: empty');
  const seen = new Set<string>();
  while (!list.empty) {
    const ext = list.enter(TAG.sequence, 'extension');
    const oid = readOid(ext.read(TAG.oid), 'extension');
    const criticalElement = ext.optional(TAG.boolean);
    const critical = criticalElement ? readBoolean(criticalElement, `extension ${oid} critical`) : false;
    if (criticalElement && !critical) throw new DerError(`extension ${oid}: critical FALSE encoded (DER leaves it out)`);
    const value = ext.read(TAG.octetString).content;
    ext.end();
    if (seen.has(oid)) throw new DerError(`extension ${oid}: appears twice`);
    seen.add(oid);
    const refused = REFUSED_EXTENSIONS[oid];
    if (refused) throw new UnhandledExtensionError(`extension ${refused} (${oid}): not handled here`);
    const what = `extension ${oid}`;
    switch (oid) {
      case OID.basicConstraints: {
        const bc = readOnlySequence(value, what);
        const ca = bc.optional(TAG.boolean);
        const isCA = ca ? readBoolean(ca, what) : false;
        if (ca && !isCA) throw new DerError(`${what}: cA FALSE encoded (DER leaves it out)`);
        const pathLen = bc.optional(TAG.integer);
        bc.end();
        const maxPathLen = pathLen ? readInteger(pathLen, what) : -1n;
        if (pathLen && (maxPathLen < 0n || maxPathLen > 0x7fffffffn)) throw new DerError(`${what}: pathLenConstraint out of range`);
        out.basicConstraints = { isCA, maxPathLen: Number(maxPathLen) };
        break;
      }
      case OID.keyUsage: {
        const r = new DerReader(value, what);
        const bits = readBitString(r.read(TAG.bitString), what);
        r.end();
        let usage = 0;
        for (let i = 0; i < 9; i++) if ((bits.bytes[i >> 3] ?? 0) & (0x80 >> (i & 7))) usage |= 1 << i;
        out.keyUsage = usage;
        break;
      }
      case OID.extKeyUsage: {
        const r = readOnlySequence(value, what);
        const usages: string[] = [];
        while (!r.empty) usages.push(readOid(r.read(TAG.oid), what));
        out.extKeyUsage = usages;
        break;
      }
      case OID.subjectKeyId: {
        if (critical) throw new DerError(`${what}: subject key identifier marked critical`);
        const r = new DerReader(value, what);
        out.subjectKeyId = r.read(TAG.octetString).content;
        r.end();
        break;
      }
      case OID.authorityKeyId: {
        if (critical) throw new DerError(`${what}: authority key identifier marked critical`);
        const r = readOnlySequence(value, what);
        const keyId = r.optional(0x80);
        if (keyId) out.authorityKeyId = keyId.content;
        r.optional(0xa1); // authorityCertIssuer, unused (as Go)
        r.optional(0x82); // authorityCertSerialNumber
        r.end();
        break;
      }
      case OID.subjectAltName: {
        out.subjectAltName = value;
        const names = readSubjectAltNames(value, what);
        if (critical && names === 0) out.unhandledCritical.push(oid);
        break;
      }
      default:
        if (critical) out.unhandledCritical.push(oid);
    }
  }
}

function readOnlySequence(value: Uint8Array, what: string): DerReader {
  const r = new DerReader(value, what);
  const inner = r.enter(TAG.sequence, what);
  r.end();
  return inner;
}

/** Go's parseSANExtension: the names Go reads (rfc822Name, dNSName, iPAddress) checked as Go does; returns how many. */
function readSubjectAltNames(value: Uint8Array, what: string): number {
  const r = readOnlySequence(value, what);
  let count = 0;
  while (!r.empty) {
    const name = r.read();
    const kind = name.tag & 0x1f;
    if ((name.tag & 0xc0) !== 0x80) throw new DerError(`${what}: a name that is not context-specific`);
    if (kind === 1 || kind === 2) {
      if (name.tag & 0x20 || !name.content.every((b) => b < 0x80)) throw new DerError(`${what}: malformed ${kind === 1 ? 'rfc822Name' : 'dNSName'}`);
      count++;
    } else if (kind === 6) {
      throw new DerError(`${what}: URI names are not read here`);
    } else if (kind === 7) {
      if (name.tag & 0x20 || (name.content.length !== 4 && name.content.length !== 16)) throw new DerError(`${what}: malformed iPAddress`);
      count++;
    }
    // otherName, x400Address, directoryName, ediPartyName, registeredID: Go skips them too.
  }
  return count;
}
