import { constants, generateKeyPairSync, sign, type KeyObject } from 'node:crypto';
import { bits, bool, concat, int, nul, octets, oid, printable, seq, set, tlv } from './der-writer.ts';

/**
 * Certificate requests made byte by byte (node:crypto signs), so a test can make the requests a
 * kubelet makes and every variant an attacker could: any subject value, any extension shape, any
 * signature algorithm over any key. `request()` makes a good one; each field can be replaced by
 * raw DER.
 */

export const OID = {
  CN: '2.5.4.3',
  O: '2.5.4.10',
  OU: '2.5.4.11',
  EXTENSION_REQUEST: '1.2.840.113549.1.9.14',
  CHALLENGE_PASSWORD: '1.2.840.113549.1.9.7',
  SAN: '2.5.29.17',
  KEY_USAGE: '2.5.29.15',
  RSA: '1.2.840.113549.1.1.1',
  RSA_SHA256: '1.2.840.113549.1.1.11',
  RSA_SHA1: '1.2.840.113549.1.1.5',
  RSA_PSS: '1.2.840.113549.1.1.10',
  EC: '1.2.840.10045.2.1',
  P256: '1.2.840.10045.3.1.7',
  ECDSA_SHA256: '1.2.840.10045.4.3.2',
  ECDSA_SHA384: '1.2.840.10045.4.3.3',
  ED25519: '1.3.101.112',
} as const;

export type KeyKind = 'ec' | 'rsa' | 'ed25519';

export interface TestKey {
  kind: KeyKind;
  privateKey: KeyObject;
  /** The SubjectPublicKeyInfo, DER. */
  spki: Uint8Array;
}

export function newKey(kind: KeyKind): TestKey {
  const pair = kind === 'ec' ? generateKeyPairSync('ec', { namedCurve: 'P-256' })
    : kind === 'rsa' ? generateKeyPairSync('rsa', { modulusLength: 2048 })
    : generateKeyPairSync('ed25519');
  return { kind, privateKey: pair.privateKey, spki: new Uint8Array(pair.publicKey.export({ format: 'der', type: 'spki' })) };
}

/** How a request is signed: the AlgorithmIdentifier written, and the signature made over the info. */
export interface Signing {
  algorithm: Uint8Array;
  sign(info: Uint8Array): Uint8Array;
}

/** Go's RSASSA-PSS parameters for SHA-256 (crypto/x509 pssParametersSHA256). */
export const PSS_SHA256_PARAMS = Buffer.from('3034a00f300d06096086480165030402010500a11c301a06092a864886f70d010108300d060960864801650304020105' + '00a203020120', 'hex');

/** The algorithm a kubelet's key of that kind signs with (as Go's x509.CreateCertificateRequest writes it). */
export function defaultSigning(key: TestKey): Signing {
  if (key.kind === 'ec') return { algorithm: seq(oid(OID.ECDSA_SHA256)), sign: (info) => sign('sha256', info, key.privateKey) };
  if (key.kind === 'rsa') return { algorithm: seq(oid(OID.RSA_SHA256), nul()), sign: (info) => sign('sha256', info, key.privateKey) };
  return { algorithm: seq(oid(OID.ED25519)), sign: (info) => sign(null, info, key.privateKey) };
}

export function pssSigning(key: TestKey): Signing {
  return {
    algorithm: seq(oid(OID.RSA_PSS), new Uint8Array(PSS_SHA256_PARAMS)),
    sign: (info) => sign('sha256', info, { key: key.privateKey, padding: constants.RSA_PKCS1_PSS_PADDING, saltLength: 32 }),
  };
}

/** One subject attribute in its own RDN; `value` is the whole value element (any tag). */
export const rdn = (type: string, value: Uint8Array) => set(seq(oid(type), value));

export function sanValue(dns: readonly string[], ips: readonly string[]): Uint8Array {
  return seq(...dns.map((d) => tlv(0x82, new TextEncoder().encode(d))), ...ips.map(ipSan));
}

export function ipSan(ip: string): Uint8Array {
  if (ip.includes(':')) {
    const [head, tail = ''] = ip.split('::');
    const h = head ? head.split(':') : [];
    const t = tail ? tail.split(':') : [];
    const groups = ip.includes('::') ? [...h, ...Array(8 - h.length - t.length).fill('0'), ...t] : h;
    return tlv(0x87, Uint8Array.from(groups.flatMap((g) => [parseInt(g, 16) >> 8, parseInt(g, 16) & 0xff])));
  }
  return tlv(0x87, Uint8Array.from(ip.split('.').map(Number)));
}

export const extension = (id: string, value: Uint8Array, critical?: boolean) => seq(oid(id), ...(critical === undefined ? [] : [bool(critical)]), octets(value));
export const extensionRequest = (...extensions: Uint8Array[]) => seq(oid(OID.EXTENSION_REQUEST), set(seq(...extensions)));

export interface RequestParts {
  key: TestKey;
  version?: Uint8Array;
  /** The subject Name element. */
  subject?: Uint8Array;
  spki?: Uint8Array;
  /** The Attribute elements inside [0]. */
  attributes?: Uint8Array[];
  signing?: Signing;
  /** Replaces the whole info (the signed part), already encoded. */
  info?: Uint8Array;
  /** Bytes after the CertificationRequest. */
  trailing?: Uint8Array;
}

export interface Kubelet {
  cn: string;
  o?: string[];
  dns?: string[];
  ips?: string[];
}

/** A subject as Go writes a kubelet's: O then CN, PrintableString where it can. */
export function kubeletSubject(k: Kubelet): Uint8Array {
  return seq(...(k.o ?? ['system:nodes']).map((o) => rdn(OID.O, printable(o))), rdn(OID.CN, printable(k.cn)));
}

export function kubeletAttributes(k: Kubelet): Uint8Array[] {
  return [extensionRequest(extension(OID.SAN, sanValue(k.dns ?? [], k.ips ?? [])))];
}

export function requestInfo(parts: RequestParts, k?: Kubelet): Uint8Array {
  return parts.info ?? seq(
    parts.version ?? int(0),
    parts.subject ?? kubeletSubject(k!),
    parts.spki ?? parts.key.spki,
    tlv(0xa0, ...(parts.attributes ?? kubeletAttributes(k!))),
  );
}

/** The DER of a CertificationRequest of the parts (the kubelet's fields where a part is not given). */
export function request(parts: RequestParts, k?: Kubelet): Uint8Array {
  const info = requestInfo(parts, k);
  const signing = parts.signing ?? defaultSigning(parts.key);
  return concat(seq(info, signing.algorithm, bits(signing.sign(info))), parts.trailing ?? new Uint8Array());
}
