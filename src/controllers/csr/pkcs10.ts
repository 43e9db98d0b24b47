import { createPublicKey, constants, verify, type KeyObject } from 'node:crypto';
import { DerError, inside, readBoolean, readInteger, readOid, readOnly, readUnsigned, readWholeBits, TAG, type Element } from '../../x509/der.ts';
import { readDirectoryString } from '../../x509/directory-string.ts';
import { decodeRequestPem, PemError } from './pem.ts';

/**
 * Reads what the approver needs from a PKCS#10 certificate request (RFC 2986) as a kubelet makes
 * one, and only such a request: the subject's CN and O, the subjectAltName's DNS names and IP
 * addresses, and the public key. The API server and the kubernetes.io/kubelet-serving signer read
 * the same bytes with Go's crypto/x509, which skips what it does not understand (a field after the
 * last it expects, an attribute that does not parse, a subject value that is not a string); so
 * every request here must have exactly one reading: strict PEM (pem.ts), strict DER (src/x509/der.ts),
 * each structure with exactly its fields, one extensionRequest, no extension twice, CN and O of
 * string types Go reads to the same text (src/x509/directory-string.ts), the signature algorithm
 * of the key's own type.
 * Anything else throws a CsrParseError naming what is wrong and where, and is denied as Malformed.
 *
 * Why not an ASN.1 library: what makes a request safe here is the shape checks above, which a
 * schema library leaves to its caller as well (most accept fields a schema does not name, BER
 * lengths and non-string subject values), and this reader has no dependency; the differential test
 * against Go (test/integration/csr-differential.test.ts) is what shows it reads as Go does.
 */

export class CsrParseError extends Error {}

export interface ParsedCsr {
  commonName?: string;
  organizations: string[];
  dnsNames: string[];
  /** IP SANs in their usual text form (IPv6 compressed, lower case). */
  ipAddresses: string[];
  /** SANs of other kinds (email, URI, ...), by their GeneralName kind: an approver refuses them. */
  otherSanKinds: string[];
  publicKey: KeyObject;
  /** The request's self-signature verifies with its own key (proof of possession; the signer checks it too). */
  signatureValid: boolean;
}

const OID_CN = '2.5.4.3';
const OID_O = '2.5.4.10';
const OID_EXTENSION_REQUEST = '1.2.840.113549.1.9.14';
const OID_SUBJECT_ALT_NAME = '2.5.29.17';
const OID_RSA = '1.2.840.113549.1.1.1';
const OID_EC = '1.2.840.10045.2.1';
const OID_ED25519 = '1.3.101.112';
const OID_RSA_PSS = '1.2.840.113549.1.1.10';

/** A PEM "CERTIFICATE REQUEST" (as in a CSR's spec.request, once base64-decoded) to its fields. */
export function parseCsrPem(pem: string): ParsedCsr {
  let der: Uint8Array;
  try {
    der = decodeRequestPem(pem);
  } catch (error) {
    if (error instanceof PemError) throw new CsrParseError(`PEM: ${error.message}`);
    throw error;
  }
  return parseCsrDer(der);
}

export function parseCsrDer(der: Uint8Array): ParsedCsr {
  try {
    return readRequest(der);
  } catch (error) {
    if (error instanceof DerError) throw new CsrParseError(error.message);
    throw error;
  }
}

function readRequest(der: Uint8Array): ParsedCsr {
  const request = inside(readOnly(der, TAG.sequence, 'CertificationRequest'), 'CertificationRequest');
  const info = request.read(TAG.sequence, 'CertificationRequestInfo');
  const algorithm = request.read(TAG.sequence, 'signatureAlgorithm');
  const signature = readWholeBits(request.read(TAG.bitString, 'signature'), 'signature');
  request.end();
  const fields = inside(info, 'CertificationRequestInfo');
  if (readInteger(fields.read(TAG.integer, 'version'), 'version') !== 0n) throw new CsrParseError('version: not INTEGER 0 (v1)');
  const subject = fields.read(TAG.sequence, 'subject');
  const spki = fields.read(TAG.sequence, 'subjectPublicKeyInfo');
  const attributes = fields.read(0xa0, 'attributes');
  fields.end();

  const key = readPublicKey(spki);
  const parsed: ParsedCsr = { organizations: [], dnsNames: [], ipAddresses: [], otherSanKinds: [], publicKey: key.object, signatureValid: false };
  readSubject(subject, parsed);
  readAttributes(attributes, parsed);
  parsed.signatureValid = signatureVerifies(info.raw, algorithm, signature, key);
  return parsed;
}

/** An AlgorithmIdentifier: its OID and its parameters when present. */
function readAlgorithm(algorithm: Element, what: string): { oid: string; params?: Element } {
  const r = inside(algorithm, what);
  const oid = readOid(r.read(TAG.oid, what), what);
  const params = r.empty ? undefined : r.read();
  r.end();
  return { oid, params };
}

// --- the public key -------------------------------------------------------------------------

interface PublicKey {
  object: KeyObject;
  type: 'rsa' | 'ec' | 'ed25519';
  /** RSA: the modulus's length in bytes (a signature is exactly that long). */
  modulusBytes?: number;
}

/** The curves Go's crypto/x509 reads that the approver may allow, with their coordinate size. */
const EC_CURVES: Record<string, number> = { '1.2.840.10045.3.1.7': 32, '1.3.132.0.34': 48, '1.3.132.0.35': 66 };
const MAX_RSA_EXPONENT = 0x7fffffff;
const MAX_RSA_MODULUS_BYTES = 16384 / 8;

function readPublicKey(spki: Element): PublicKey {
  const r = inside(spki, 'subjectPublicKeyInfo');
  const { oid, params } = readAlgorithm(r.read(TAG.sequence, 'public key algorithm'), 'public key algorithm');
  const key = readWholeBits(r.read(TAG.bitString, 'subjectPublicKey'), 'subjectPublicKey');
  r.end();
  let result: Omit<PublicKey, 'object'>;
  if (oid === OID_RSA) {
    // RFC 3279 2.3.1: NULL parameters (Go refuses a key without them).
    if (!params || params.raw.length !== 2 || params.tag !== 0x05) throw new CsrParseError('RSA public key: parameters are not NULL');
    const rsa = inside(readOnly(key, TAG.sequence, 'RSAPublicKey'), 'RSAPublicKey');
    const n = readUnsigned(rsa.read(TAG.integer, 'RSA modulus'), 'RSA modulus');
    const e = readUnsigned(rsa.read(TAG.integer, 'RSA exponent'), 'RSA exponent');
    rsa.end();
    if (n.length > MAX_RSA_MODULUS_BYTES || (n[n.length - 1]! & 1) === 0) throw new CsrParseError('RSA modulus: even or above 16384 bits');
    // Go refuses exponents above 2^31-1 and even ones (crypto/internal/fips140/rsa checkPublicKey).
    const value = e.length > 4 ? Infinity : e.reduce((acc, byte) => acc * 256 + byte, 0);
    if (value < 3 || value > MAX_RSA_EXPONENT || value % 2 === 0) throw new CsrParseError(`RSA exponent: not an odd number from 3 to 2^31-1`);
    result = { type: 'rsa', modulusBytes: n.length };
  } else if (oid === OID_EC) {
    const curve = params?.tag === TAG.oid ? readOid(params, 'EC curve') : '';
    const size = EC_CURVES[curve];
    if (!size) throw new CsrParseError(`EC public key: curve ${curve || '(none)'} is not P-256, P-384 or P-521 by name`);
    // Go reads uncompressed points only.
    if (key.length !== 1 + 2 * size || key[0] !== 0x04) throw new CsrParseError('EC public key: not an uncompressed point of its curve');
    result = { type: 'ec' };
  } else if (oid === OID_ED25519) {
    // RFC 8410 section 3: parameters absent.
    if (params) throw new CsrParseError('Ed25519 public key: parameters present');
    if (key.length !== 32) throw new CsrParseError('Ed25519 public key: not 32 bytes');
    result = { type: 'ed25519' };
  } else {
    throw new CsrParseError(`public key algorithm ${oid}: not RSA, ECDSA or Ed25519`);
  }
  try {
    return { ...result, object: createPublicKey({ key: Buffer.from(spki.raw), format: 'der', type: 'spki' }) };
  } catch (error) {
    throw new CsrParseError(`subjectPublicKeyInfo: ${(error as Error).message}`);
  }
}

// --- the signature ---------------------------------------------------------------------------

interface SignatureAlgorithm {
  key: PublicKey['type'];
  /** null: Ed25519, which has its own. */
  hash: string | null;
  /** The parameters' exact bytes; undefined when absent. */
  params?: string;
  pssSaltLength?: number;
}

const NULL = '0500';
/** RSASSA-PSS parameters as Go writes and reads them: MGF1 with the same hash, salt as long as the hash, trailer 1. */
const pss = (hashOidLastByte: string, salt: string) => `3034a00f300d06096086480165030402${hashOidLastByte}0500a11c301a06092a864886f70d010108300d06096086480165030402${hashOidLastByte}0500a2030201${salt}`;

/** Each signature algorithm, by OID (and for RSASSA-PSS by parameters), tied to the one key type it belongs to. SHA-1 and MD5 are not allowed. */
const SIGNATURE_ALGORITHMS: Record<string, SignatureAlgorithm[]> = {
  '1.2.840.10045.4.3.2': [{ key: 'ec', hash: 'sha256' }],
  '1.2.840.10045.4.3.3': [{ key: 'ec', hash: 'sha384' }],
  '1.2.840.10045.4.3.4': [{ key: 'ec', hash: 'sha512' }],
  '1.2.840.113549.1.1.11': [{ key: 'rsa', hash: 'sha256', params: NULL }],
  '1.2.840.113549.1.1.12': [{ key: 'rsa', hash: 'sha384', params: NULL }],
  '1.2.840.113549.1.1.13': [{ key: 'rsa', hash: 'sha512', params: NULL }],
  [OID_ED25519]: [{ key: 'ed25519', hash: null }],
  [OID_RSA_PSS]: [
    { key: 'rsa', hash: 'sha256', params: pss('01', '20'), pssSaltLength: 32 },
    { key: 'rsa', hash: 'sha384', params: pss('02', '30'), pssSaltLength: 48 },
    { key: 'rsa', hash: 'sha512', params: pss('03', '40'), pssSaltLength: 64 },
  ],
};

function signatureVerifies(signed: Uint8Array, algorithm: Element, signature: Uint8Array, key: PublicKey): boolean {
  const { oid, params } = readAlgorithm(algorithm, 'signature algorithm');
  const paramsHex = params ? Buffer.from(params.raw).toString('hex') : undefined;
  const match = SIGNATURE_ALGORITHMS[oid]?.find((a) => a.params === paramsHex);
  if (!match) throw new CsrParseError(`signature algorithm ${oid}${params ? ' with these parameters' : ' without parameters'}: not one a kubelet's key signs with`);
  if (match.key !== key.type) throw new CsrParseError(`signature algorithm ${oid} is not one of a ${key.type.toUpperCase()} key`);
  if (key.type === 'ec') checkEcdsaSignature(signature);
  if (key.type === 'rsa' && signature.length !== key.modulusBytes) throw new CsrParseError('RSA signature: not as long as the modulus');
  try {
    const padding = match.pssSaltLength ? { padding: constants.RSA_PKCS1_PSS_PADDING, saltLength: match.pssSaltLength } : {};
    return verify(match.hash, signed, { key: key.object, ...padding }, signature);
  } catch {
    return false;
  }
}

/** ECDSA-Sig-Value, SEQUENCE { r INTEGER, s INTEGER }, in DER as Go's VerifyASN1 requires. */
function checkEcdsaSignature(signature: Uint8Array): void {
  const value = inside(readOnly(signature, TAG.sequence, 'ECDSA signature'), 'ECDSA signature');
  readUnsigned(value.read(TAG.integer, 'ECDSA signature r'), 'ECDSA signature r');
  readUnsigned(value.read(TAG.integer, 'ECDSA signature s'), 'ECDSA signature s');
  value.end();
}

// --- the subject ------------------------------------------------------------------------------

/** One attribute per RDN, CN (once) and O only, each a string type Go reads as the same text. */
function readSubject(subject: Element, out: ParsedCsr): void {
  let commonNames = 0;
  const rdns = inside(subject, 'subject');
  while (!rdns.empty) {
    const rdn = rdns.enter(TAG.set, 'subject RDN (multi-valued RDNs are not used by kubelets)');
    const atv = rdn.enter(TAG.sequence, 'subject attribute');
    rdn.end();
    const oid = readOid(atv.read(TAG.oid, 'subject attribute type'), 'subject attribute type');
    const value = atv.read(undefined, 'subject attribute value');
    atv.end();
    if (oid !== OID_CN && oid !== OID_O) throw new CsrParseError(`subject attribute ${oid}: a kubelet's subject has CN and O only`);
    const name = oid === OID_CN ? 'CN' : 'O';
    const text = readDirectoryString(value, `subject ${name}`);
    if (oid === OID_CN) {
      if (++commonNames > 1) throw new CsrParseError('subject: more than one CN');
      out.commonName = text;
    } else {
      out.organizations.push(text);
    }
  }
}

// --- the extensionRequest ---------------------------------------------------------------------

/** Exactly one attribute, the extensionRequest, with one value; each extension once; the SANs read from subjectAltName. */
function readAttributes(attributes: Element, out: ParsedCsr): void {
  const list = inside(attributes, 'attributes (exactly the extensionRequest)');
  const attribute = list.enter(TAG.sequence, 'attribute');
  list.end();
  const oid = readOid(attribute.read(TAG.oid, 'attribute type'), 'attribute type');
  if (oid !== OID_EXTENSION_REQUEST) throw new CsrParseError(`attribute ${oid}: only the extensionRequest is allowed`);
  const values = attribute.enter(TAG.set, 'extensionRequest values');
  attribute.end();
  const extensions = values.enter(TAG.sequence, 'extensions');
  values.end();
  const seen = new Set<string>();
  while (!extensions.empty) {
    const extension = extensions.enter(TAG.sequence, 'extension');
    const id = readOid(extension.read(TAG.oid, 'extension id'), 'extension id');
    if (seen.has(id)) throw new CsrParseError(`extension ${id} appears twice`);
    seen.add(id);
    const critical = extension.optional(TAG.boolean, `extension ${id} critical`);
    // DER: critical is DEFAULT FALSE, so present only as TRUE, which is 0xff.
    if (critical && !readBoolean(critical, `extension ${id} critical`)) throw new CsrParseError(`extension ${id}: critical is not the DER TRUE (0xff)`);
    const value = extension.read(TAG.octetString, `extension ${id} value`);
    extension.end();
    if (id === OID_SUBJECT_ALT_NAME) readSubjectAltNames(readOnly(value.content, TAG.sequence, 'subjectAltName'), out);
  }
}

const GENERAL_NAME_KINDS: Record<number, string> = { 0: 'otherName', 1: 'email', 2: 'DNS', 3: 'x400Address', 4: 'directoryName', 5: 'ediPartyName', 6: 'URI', 7: 'IP', 8: 'registeredID' };

function readSubjectAltNames(names: Element, out: ParsedCsr): void {
  const r = inside(names, 'subjectAltName');
  while (!r.empty) {
    const name = r.read(undefined, 'subjectAltName');
    if (name.tag === 0x82) out.dnsNames.push(readIa5(name.content, 'DNS SAN'));
    else if (name.tag === 0x87) out.ipAddresses.push(formatIp(name.content));
    else if ((name.tag & 0xc0) === 0x80) out.otherSanKinds.push(`${GENERAL_NAME_KINDS[name.tag & 0x1f] ?? `[${name.tag & 0x1f}]`}${name.tag & 0x20 ? ' (constructed)' : ''}`);
    else out.otherSanKinds.push(`tag 0x${name.tag.toString(16)}`);
  }
}

function readIa5(bytes: Uint8Array, what: string): string {
  if (bytes.some((b) => b >= 0x80)) throw new CsrParseError(`${what}: a byte above 0x7f (not IA5)`);
  return String.fromCharCode(...bytes);
}

function formatIp(bytes: Uint8Array): string {
  if (bytes.length === 4) return Array.from(bytes).join('.');
  if (bytes.length !== 16) throw new CsrParseError(`an IP SAN of ${bytes.length} bytes`);
  // Go prints (and signs as) the IPv4 address inside an IPv4-mapped one: two readings of one SAN.
  if (bytes.subarray(0, 10).every((b) => b === 0) && bytes[10] === 0xff && bytes[11] === 0xff) throw new CsrParseError('an IPv4-mapped IPv6 SAN');
  const groups: number[] = [];
  for (let i = 0; i < 16; i += 2) groups.push((bytes[i]! << 8) | bytes[i + 1]!);
  // RFC 5952: the longest run (of two or more) of zero groups becomes "::".
  let best = -1;
  let bestLength = 1;
  for (let i = 0; i < 8;) {
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLength) [best, bestLength] = [i, j - i];
    i = j === i ? i + 1 : j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (best < 0) return hex.join(':');
  return `${hex.slice(0, best).join(':')}::${hex.slice(best + bestLength).join(':')}`;
}
