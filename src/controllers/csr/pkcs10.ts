import { createPublicKey, verify, type KeyObject } from 'node:crypto';

/**
 * Reads what the approver needs from a PKCS#10 certificate request (RFC 2986): the subject's CN
 * and O, the subjectAltName's DNS names and IP addresses, and the public key. node:crypto parses
 * certificates and keys but not requests, and a full ASN.1 library would be a new dependency for
 * five fields, so this is a small DER reader; the key itself is handed to node:crypto
 * (createPublicKey on the SubjectPublicKeyInfo), which reports its type, size and curve.
 * Throws a CsrParseError naming what is malformed.
 */

export class CsrParseError extends Error {}

export interface ParsedCsr {
  commonName?: string;
  organizations: string[];
  dnsNames: string[];
  /** IP SANs in their usual text form (IPv6 compressed, lower case). */
  ipAddresses: string[];
  /** SANs of other kinds (email, URI, ...), by their GeneralName tag: an approver refuses them. */
  otherSanKinds: string[];
  publicKey: KeyObject;
  /** The request's self-signature verifies with its own key (proof of possession; the signer checks it too). */
  signatureValid: boolean;
}

interface Tlv {
  tag: number;
  /** The content octets. */
  value: Uint8Array;
  /** The whole element, header included. */
  raw: Uint8Array;
}

const OID_CN = '2.5.4.3';
const OID_O = '2.5.4.10';
const OID_EXTENSION_REQUEST = '1.2.840.113549.1.9.14';
const OID_SUBJECT_ALT_NAME = '2.5.29.17';

/** A PEM "CERTIFICATE REQUEST" (as in a CSR's spec.request, once base64-decoded) to its fields. */
export function parseCsrPem(pem: string): ParsedCsr {
  const match = /-----BEGIN (NEW )?CERTIFICATE REQUEST-----([\s\S]*?)-----END (NEW )?CERTIFICATE REQUEST-----/.exec(pem);
  if (!match) throw new CsrParseError('no PEM "CERTIFICATE REQUEST" block');
  return parseCsrDer(new Uint8Array(Buffer.from(match[2]!.replace(/\s+/g, ''), 'base64')));
}

export function parseCsrDer(der: Uint8Array): ParsedCsr {
  const request = expect(readOne(der, 0, 'CertificationRequest'), 0x30, 'CertificationRequest');
  const [info, algorithm, signature] = children(request.value, 'CertificationRequest');
  const infoFields = children(expect(info, 0x30, 'CertificationRequestInfo').value, 'CertificationRequestInfo');
  const [, subject, spki, attributes] = infoFields;
  if (!subject || !spki) throw new CsrParseError('CertificationRequestInfo lacks subject or subjectPublicKeyInfo');

  const publicKey = publicKeyOf(spki);
  const parsed: ParsedCsr = { organizations: [], dnsNames: [], ipAddresses: [], otherSanKinds: [], publicKey, signatureValid: signatureVerifies(info!, algorithm, signature, publicKey) };
  readSubject(expect(subject, 0x30, 'subject'), parsed);
  if (attributes && attributes.tag === 0xa0) readAttributes(attributes, parsed);
  return parsed;
}

/** The hash of each signature algorithm a kubelet's key may sign with (null: the algorithm has its own, Ed25519). */
const SIGNATURE_HASHES: Record<string, string | null> = {
  '1.2.840.10045.4.3.2': 'sha256', '1.2.840.10045.4.3.3': 'sha384', '1.2.840.10045.4.3.4': 'sha512',
  '1.2.840.113549.1.1.11': 'sha256', '1.2.840.113549.1.1.12': 'sha384', '1.2.840.113549.1.1.13': 'sha512',
  '1.3.101.112': null,
};

function signatureVerifies(info: Tlv, algorithm: Tlv | undefined, signature: Tlv | undefined, key: KeyObject): boolean {
  const [oid] = children(expect(algorithm, 0x30, 'signatureAlgorithm').value, 'signatureAlgorithm');
  const hash = SIGNATURE_HASHES[readOid(expect(oid, 0x06, 'signature algorithm'))];
  const bits = expect(signature, 0x03, 'signature').value;
  if (hash === undefined || bits[0] !== 0) return false;
  try {
    return verify(hash, info.raw, key, bits.subarray(1));
  } catch {
    return false;
  }
}

function publicKeyOf(spki: Tlv): KeyObject {
  try {
    return createPublicKey({ key: Buffer.from(spki.raw), format: 'der', type: 'spki' });
  } catch (error) {
    throw new CsrParseError(`subjectPublicKeyInfo: ${(error as Error).message}`);
  }
}

function readSubject(subject: Tlv, out: ParsedCsr): void {
  for (const rdn of children(subject.value, 'subject')) {
    for (const atv of children(expect(rdn, 0x31, 'RelativeDistinguishedName').value, 'RelativeDistinguishedName')) {
      const [type, value] = children(expect(atv, 0x30, 'AttributeTypeAndValue').value, 'AttributeTypeAndValue');
      if (!type || !value) throw new CsrParseError('AttributeTypeAndValue lacks type or value');
      const oid = readOid(expect(type, 0x06, 'attribute type'));
      const text = new TextDecoder().decode(value.value);
      if (oid === OID_CN) out.commonName = text;
      else if (oid === OID_O) out.organizations.push(text);
    }
  }
}

function readAttributes(attributes: Tlv, out: ParsedCsr): void {
  for (const attribute of children(attributes.value, 'attributes')) {
    const [type, values] = children(expect(attribute, 0x30, 'Attribute').value, 'Attribute');
    if (!type || !values) throw new CsrParseError('Attribute lacks type or values');
    if (readOid(expect(type, 0x06, 'attribute type')) !== OID_EXTENSION_REQUEST) continue;
    for (const extensions of children(expect(values, 0x31, 'extensionRequest values').value, 'extensionRequest')) {
      for (const extension of children(expect(extensions, 0x30, 'Extensions').value, 'Extensions')) {
        const fields = children(expect(extension, 0x30, 'Extension').value, 'Extension');
        const oid = readOid(expect(fields[0], 0x06, 'extension id'));
        if (oid !== OID_SUBJECT_ALT_NAME) continue;
        const octets = expect(fields[fields.length - 1], 0x04, 'extension value');
        readSubjectAltNames(expect(readOne(octets.value, 0, 'subjectAltName'), 0x30, 'subjectAltName'), out);
      }
    }
  }
}

function readSubjectAltNames(names: Tlv, out: ParsedCsr): void {
  for (const name of children(names.value, 'subjectAltName')) {
    if (name.tag === 0x82) out.dnsNames.push(new TextDecoder().decode(name.value));
    else if (name.tag === 0x87) out.ipAddresses.push(formatIp(name.value));
    else out.otherSanKinds.push(GENERAL_NAME_KINDS[name.tag & 0x1f] ?? `tag ${name.tag}`);
  }
}

const GENERAL_NAME_KINDS: Record<number, string> = { 0: 'otherName', 1: 'email', 3: 'x400Address', 4: 'directoryName', 5: 'ediPartyName', 6: 'URI', 8: 'registeredID' };

function formatIp(bytes: Uint8Array): string {
  if (bytes.length === 4) return Array.from(bytes).join('.');
  if (bytes.length !== 16) throw new CsrParseError(`an IP SAN of ${bytes.length} bytes`);
  const groups: number[] = [];
  for (let i = 0; i < 16; i += 2) groups.push((bytes[i]! << 8) | bytes[i + 1]!);
  // RFC 5952: the longest run (of two or more) of zero groups becomes "::".
  let best = -1;
  let bestLength = 1;
  for (let i = 0; i < 8; ) {
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLength) [best, bestLength] = [i, j - i];
    i = j === i ? i + 1 : j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (best < 0) return hex.join(':');
  return `${hex.slice(0, best).join(':')}::${hex.slice(best + bestLength).join(':')}`;
}

function readOid(tlv: Tlv): string {
  const bytes = tlv.value;
  if (bytes.length === 0) throw new CsrParseError('an empty OBJECT IDENTIFIER');
  const parts: number[] = [Math.min(2, Math.floor(bytes[0]! / 40)), bytes[0]! - Math.min(2, Math.floor(bytes[0]! / 40)) * 40];
  let value = 0;
  for (let i = 1; i < bytes.length; i++) {
    value = value * 128 + (bytes[i]! & 0x7f);
    if ((bytes[i]! & 0x80) === 0) {
      parts.push(value);
      value = 0;
    }
  }
  return parts.join('.');
}

function expect(tlv: Tlv | undefined, tag: number, what: string): Tlv {
  if (!tlv) throw new CsrParseError(`${what} is missing`);
  if (tlv.tag !== tag) throw new CsrParseError(`${what}: expected tag 0x${tag.toString(16)}, found 0x${tlv.tag.toString(16)}`);
  return tlv;
}

function children(bytes: Uint8Array, what: string): Tlv[] {
  const out: Tlv[] = [];
  for (let offset = 0; offset < bytes.length; ) {
    const tlv = readOne(bytes, offset, what);
    out.push(tlv);
    offset += tlv.raw.length;
  }
  return out;
}

/** One DER element at offset: definite lengths only (DER forbids the others). */
function readOne(bytes: Uint8Array, offset: number, what: string): Tlv {
  if (offset + 2 > bytes.length) throw new CsrParseError(`${what}: truncated`);
  const tag = bytes[offset]!;
  if ((tag & 0x1f) === 0x1f) throw new CsrParseError(`${what}: multi-byte tags are not used in a CSR`);
  let length = bytes[offset + 1]!;
  let header = 2;
  if (length & 0x80) {
    const count = length & 0x7f;
    if (count === 0 || count > 4) throw new CsrParseError(`${what}: unsupported length of ${count} bytes`);
    if (offset + 2 + count > bytes.length) throw new CsrParseError(`${what}: truncated`);
    length = 0;
    for (let i = 0; i < count; i++) length = length * 256 + bytes[offset + 2 + i]!;
    header += count;
  }
  const end = offset + header + length;
  if (end > bytes.length) throw new CsrParseError(`${what}: truncated`);
  return { tag, value: bytes.subarray(offset + header, end), raw: bytes.subarray(offset, end) };
}
