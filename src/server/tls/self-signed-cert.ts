import { createHash, generateKeyPairSync, randomBytes, sign, type KeyObject } from 'node:crypto';
import { isIP } from 'node:net';
import * as der from './der.ts';

/**
 * The in-memory serving certificate used when no --tls-cert-file is given, shaped as client-go's
 * cert.GenerateSelfSignedCertKey: a CA "HOST-ca@UNIXTIME" signing a serving certificate
 * "HOST@UNIXTIME", valid from an hour ago (clock skew) for one year. ECDSA P-256 rather than
 * upstream's RSA 2048: as widely accepted, and key generation takes microseconds, not a second.
 * Bun's node:crypto makes and signs with keys but has no certificate builder, so the
 * certificates are assembled here in DER.
 */

export interface SelfSignedRequest {
  /** The first name: CN prefix and first SAN (an IP SAN if it parses as an address). */
  host: string;
  alternateIPs?: string[];
  alternateDNS?: string[];
  /** For tests; defaults to the current time. */
  now?: Date;
}

export interface SelfSignedCertificate {
  /** Serving certificate then CA certificate, PEM. */
  certChainPem: string;
  keyPem: string;
  /** The CA a client can trust to verify the serving certificate. */
  caPem: string;
}

const OID = {
  commonName: '2.5.4.3',
  ecPublicKey: '1.2.840.10045.2.1',
  ecdsaWithSha256: '1.2.840.10045.4.3.2',
  subjectKeyIdentifier: '2.5.29.14',
  keyUsage: '2.5.29.15',
  subjectAltName: '2.5.29.17',
  basicConstraints: '2.5.29.19',
  authorityKeyIdentifier: '2.5.29.35',
  extKeyUsage: '2.5.29.37',
  serverAuth: '1.3.6.1.5.5.7.3.1',
} as const;

const KEY_USAGE_BIT = { digitalSignature: 0, keyCertSign: 5 } as const;
const HOUR_MS = 3600_000;
const YEAR_MS = 365 * 24 * HOUR_MS;

export function generateSelfSignedCertificate(req: SelfSignedRequest): SelfSignedCertificate {
  const now = req.now ?? new Date();
  const unix = Math.floor(now.getTime() / 1000);
  const notBefore = new Date(now.getTime() - HOUR_MS);
  const notAfter = new Date(notBefore.getTime() + YEAR_MS);

  const ca = newKeyPair();
  const caName = name(`${req.host}-ca@${unix}`);
  const caCert = buildCertificate({
    issuer: caName, subject: caName, notBefore, notAfter,
    subjectKey: ca.publicKey, signingKey: ca.privateKey, authorityKeyId: ca.keyId,
    extensions: [
      extension(OID.basicConstraints, true, der.sequence(der.boolean(true))),
      extension(OID.keyUsage, true, der.namedBits([KEY_USAGE_BIT.digitalSignature, KEY_USAGE_BIT.keyCertSign])),
      extension(OID.subjectKeyIdentifier, false, der.octetString(ca.keyId)),
    ],
  });

  const dnsNames: string[] = [];
  const ips: string[] = [];
  (isIP(req.host) ? ips : dnsNames).push(req.host);
  ips.push(...(req.alternateIPs ?? []));
  dnsNames.push(...(req.alternateDNS ?? []));

  const serving = newKeyPair();
  const servingCert = buildCertificate({
    issuer: caName, subject: name(`${req.host}@${unix}`), notBefore, notAfter,
    subjectKey: serving.publicKey, signingKey: ca.privateKey, authorityKeyId: ca.keyId,
    extensions: [
      extension(OID.basicConstraints, true, der.sequence()),
      extension(OID.keyUsage, true, der.namedBits([KEY_USAGE_BIT.digitalSignature])),
      extension(OID.extKeyUsage, false, der.sequence(der.oid(OID.serverAuth))),
      extension(OID.subjectAltName, false, subjectAltNames(dedupe(dnsNames), dedupe(ips))),
      extension(OID.subjectKeyIdentifier, false, der.octetString(serving.keyId)),
    ],
  });

  const caPem = pem('CERTIFICATE', caCert);
  return {
    certChainPem: pem('CERTIFICATE', servingCert) + caPem,
    keyPem: serving.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
    caPem,
  };
}

interface KeyPair {
  publicKey: KeyObject;
  privateKey: KeyObject;
  keyId: Uint8Array;
}

function newKeyPair(): KeyPair {
  const { publicKey, privateKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  // RFC 7093 method 1: the leftmost 160 bits of the SHA-256 of the public key.
  const spki = publicKey.export({ type: 'spki', format: 'der' });
  const keyId = createHash('sha256').update(spki).digest().subarray(0, 20);
  return { publicKey, privateKey, keyId };
}

interface CertificateFields {
  issuer: Uint8Array;
  subject: Uint8Array;
  notBefore: Date;
  notAfter: Date;
  subjectKey: KeyObject;
  signingKey: KeyObject;
  authorityKeyId: Uint8Array;
  extensions: Uint8Array[];
}

function buildCertificate(f: CertificateFields): Uint8Array {
  const signatureAlgorithm = der.sequence(der.oid(OID.ecdsaWithSha256));
  const serial = randomBytes(16);
  serial[0]! &= 0x7f; // positive, at most 20 bytes (RFC 5280 4.1.2.2)
  const authorityKeyId = extension(OID.authorityKeyIdentifier, false, der.sequence(der.implicitPrimitive(0, f.authorityKeyId)));
  const tbs = der.sequence(
    der.explicit(0, der.smallInteger(2)), // v3
    der.unsignedInteger(serial),
    signatureAlgorithm,
    f.issuer,
    der.sequence(der.time(f.notBefore), der.time(f.notAfter)),
    f.subject,
    new Uint8Array(f.subjectKey.export({ type: 'spki', format: 'der' })),
    der.explicit(3, der.sequence(...f.extensions, authorityKeyId)),
  );
  // ECDSA signatures from node:crypto are DER Ecdsa-Sig-Value already, as X.509 wants them.
  const signature = sign('sha256', tbs, f.signingKey);
  return der.sequence(tbs, signatureAlgorithm, der.bitString(new Uint8Array(signature)));
}

const name = (commonName: string): Uint8Array =>
  der.sequence(der.set(der.sequence(der.oid(OID.commonName), der.utf8String(commonName))));

function extension(id: string, critical: boolean, value: Uint8Array): Uint8Array {
  // DER leaves out a BOOLEAN that equals its DEFAULT (critical FALSE).
  return critical
    ? der.sequence(der.oid(id), der.boolean(true), der.octetString(value))
    : der.sequence(der.oid(id), der.octetString(value));
}

function subjectAltNames(dnsNames: string[], ips: string[]): Uint8Array {
  const encoder = new TextEncoder();
  return der.sequence(
    ...dnsNames.map((d) => der.implicitPrimitive(2, encoder.encode(d))), // dNSName IA5String
    ...ips.map((ip) => der.implicitPrimitive(7, ipBytes(ip))), // iPAddress OCTET STRING
  );
}

/** The network-order bytes of an IPv4 or IPv6 address. */
export function ipBytes(ip: string): Uint8Array {
  const version = isIP(ip);
  if (version === 4) return Uint8Array.from(ip.split('.').map(Number));
  if (version !== 6) throw new Error(`not an IP address: ${ip}`);
  let text = ip.replace(/%.*$/, ''); // zone index
  // A trailing dotted quad (::ffff:1.2.3.4) becomes two hex groups.
  const quad = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (quad) {
    const [a = 0, b = 0, c = 0, d = 0] = quad[1]!.split('.').map(Number);
    text = text.slice(0, quad.index) + ((a << 8) | b).toString(16) + ':' + ((c << 8) | d).toString(16);
  }
  const [head = '', tail] = text.split('::');
  const headGroups = head ? head.split(':') : [];
  const tailGroups = tail ? tail.split(':') : [];
  const zeros = tail === undefined ? [] : Array<string>(8 - headGroups.length - tailGroups.length).fill('0');
  const groups = [...headGroups, ...zeros, ...tailGroups].map((g) => Number.parseInt(g, 16));
  const out = new Uint8Array(16);
  groups.forEach((g, i) => {
    out[i * 2] = g >> 8;
    out[i * 2 + 1] = g & 0xff;
  });
  return out;
}

const dedupe = (items: string[]): string[] => [...new Set(items)];

function pem(label: string, bytes: Uint8Array): string {
  const lines = Buffer.from(bytes).toString('base64').match(/.{1,64}/g) ?? [];
  return `-----BEGIN ${label}-----\n${lines.join('\n')}\n-----END ${label}-----\n`;
}
