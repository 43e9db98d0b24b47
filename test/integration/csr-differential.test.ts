import { beforeAll, expect, test } from 'bun:test';
import { createHash, generateKeyPairSync } from 'node:crypto';
import { decide, KUBELET_SERVING_SIGNER, type CsrFacts, type Decision, type NodeFacts } from '../../src/controllers/csr/decide.ts';
import { parseCsrPem, type ParsedCsr } from '../../src/controllers/csr/pkcs10.ts';
import {
  defaultSigning, extension, extensionRequest, ipSan, kubeletAttributes, kubeletSubject, newKey, OID, pssSigning, rdn, request, requestInfo,
  sanValue, type Kubelet, type Signing, type TestKey,
} from '../harness/csr-craft.ts';
import { craftedServingRequests } from '../harness/csr-attacks.ts';
import { buildCsrReader, readWithGo, type GoVerdict } from '../harness/csr-reader.ts';
import { bits, bmp, concat, int, nul, octets, oid, parseTree, pem, printable, seq, serialize, set, text, tlv, utf8, type DerNode } from '../harness/der-writer.ts';
import { mulberry32, seedFromEnv } from '../harness/seeded-random.ts';

/**
 * The approver against the reference reader. Every request here is decided by node-csr-approval's
 * decide() and read by Go's crypto/x509 as the API server and the kubelet-serving signer read it
 * (test/differential/csr-reader, one process for the whole batch). An approval is a failure unless
 * Go reads the request at all, its signature verifies, the signer takes it, and the certificate it
 * signs names exactly what the approver checked: CN system:node:worker-1, O system:nodes, the
 * node's own DNS names and addresses, the same lists the approver's parser read, no email or URI.
 * An exception from decide() is a failure too. The requests: crafted ones for each way a request
 * can be read twice (issue 33), and seeded random mutations of good ones (CSR_DIFF_SEED=<n>
 * replays a run; CSR_DIFF_MUTATIONS=<n> sets how many).
 */

const NODE_NAME = 'worker-1';
const USER = `system:node:${NODE_NAME}`;
const NODE: NodeFacts = { exists: true, managed: true, addresses: ['198.51.100.10', '2001:db8::10'], dnsNames: [NODE_NAME, 'worker-1.example.test'] };
const GOOD: Kubelet = { cn: USER, dns: [NODE_NAME], ips: ['198.51.100.10', '2001:db8::10'] };
/** What a compromised worker-1 would like a certificate for. */
const EVIL: Kubelet = { cn: 'system:node:worker-2', dns: ['kubernetes.default.svc'], ips: ['10.96.0.1'] };
const EC_USAGES = ['digital signature', 'server auth'];
const RSA_USAGES = ['digital signature', 'key encipherment', 'server auth'];

const SEED = seedFromEnv('CSR_DIFF_SEED');
const MUTATIONS = Number(process.env.CSR_DIFF_MUTATIONS ?? 3000);
const REPLAY = `replay: CSR_DIFF_SEED=${SEED} CSR_DIFF_MUTATIONS=${MUTATIONS}`;

interface Case {
  name: string;
  /** spec.request's text. */
  text: string;
  usages?: readonly string[];
  /** A request the approver must approve (a good one Go reads the same). */
  approve?: boolean;
}

let ec: TestKey;
let rsa: TestKey;
let ed: TestKey;
let reader: string;

beforeAll(async () => {
  [ec, rsa, ed] = [newKey('ec'), newKey('rsa'), newKey('ed25519')];
  reader = await buildCsrReader();
}, 240_000);

// The name stays the same from run to run (a test's name is its identity in reports); the seed is in the log and in a failure.
test('every approval is what Go reads and the signer signs (crafted requests and seeded random mutations)', async () => {
  const cases = [...craftedCases(), ...mutatedCases(SEED, MUTATIONS)];
  console.log(`csr differential: ${cases.length} requests, seed ${SEED}, ${MUTATIONS} mutations (${REPLAY})`);
  const go = await readWithGo(reader, cases.map((c, i) => ({ id: String(i), request: new TextEncoder().encode(c.text), usages: usagesOf(c) })));
  const failures: string[] = [];
  let approved = 0;
  cases.forEach((c, i) => {
    const problem = judge(c, go.get(String(i))!);
    if (problem === 'approved') approved++;
    else if (problem) failures.push(`${c.name}: ${problem}`);
  });
  console.log(`csr differential: ${approved} approved, ${cases.length - approved - failures.length} denied, ${failures.length} failures`);
  expect(failures.length ? [REPLAY, ...failures.slice(0, 25)] : []).toEqual([]);
}, 120_000);

function usagesOf(c: Case): readonly string[] {
  return c.usages ?? EC_USAGES;
}

/** Undefined for a denial, 'approved' for an approval Go agrees with, else what is wrong. */
function judge(c: Case, go: GoVerdict): string | undefined {
  const facts: CsrFacts = { signerName: KUBELET_SERVING_SIGNER, usages: usagesOf(c), username: USER, groups: ['system:nodes', 'system:authenticated'], requestPem: c.text };
  let decision: Decision;
  try {
    decision = decide(facts, NODE);
  } catch (error) {
    return `decide threw ${(error as Error).stack ?? error}`;
  }
  if (decision.kind !== 'approve') return c.approve ? `expected an approval, got ${JSON.stringify(decision)} (Go: ${JSON.stringify(go)})` : undefined;
  let ours: ParsedCsr;
  try {
    ours = parseCsrPem(c.text);
  } catch (error) {
    return `approved, yet parseCsrPem throws ${(error as Error).message}`;
  }
  const why = differences(ours, go);
  return why.length ? `approved although ${why.join('; ')} (Go: ${JSON.stringify(go)})` : 'approved';
}

function differences(ours: ParsedCsr, go: GoVerdict): string[] {
  const out: string[] = [];
  if (!go.apiServer.ok) out.push(`the API server refuses it (${go.apiServer.error})`);
  if (!go.signatureOk) out.push('Go finds the signature bad');
  if (!go.signer.ok || !go.signed) {
    out.push(`the signer refuses it (${go.signer.error})`);
    return out;
  }
  const same = (what: string, a: readonly string[], b: readonly string[]) => {
    if (JSON.stringify(a) !== JSON.stringify(b)) out.push(`${what}: approver read ${JSON.stringify(a)}, Go ${JSON.stringify(b)}`);
  };
  const signed = go.signed;
  same('CN', [ours.commonName ?? ''], [signed.cn]);
  same('O', ours.organizations, signed.o);
  same('DNS', ours.dnsNames, signed.dns);
  same('IP', ours.ipAddresses, signed.ips);
  if (signed.cn !== USER) out.push(`the certificate's CN is ${JSON.stringify(signed.cn)}`);
  if (JSON.stringify(signed.o) !== '["system:nodes"]') out.push(`the certificate's O is ${JSON.stringify(signed.o)}`);
  const names = new Set(NODE.dnsNames.map(asciiLower));
  const strangers = [...signed.dns.filter((d) => !names.has(asciiLower(d))), ...signed.ips.filter((ip) => !NODE.addresses.includes(ip))];
  if (strangers.length) out.push(`the certificate names ${JSON.stringify(strangers)}, not the node's`);
  if (signed.emails.length || signed.uris.length) out.push(`the certificate has emails/URIs ${JSON.stringify([...signed.emails, ...signed.uris])}`);
  return out;
}

function asciiLower(s: string): string {
  return s.replace(/[A-Z]/g, (c) => c.toLowerCase());
}

// --- crafted requests, one or more per class ---------------------------------------------------

function craftedCases(): Case[] {
  const good = request({ key: ec }, GOOD);
  const evil = request({ key: ec }, EVIL);
  const goodPem = pem(good);
  const evilPem = pem(evil);
  const goodB64 = b64Lines(good);
  const evilB64 = b64Lines(evil);
  const block = (body: string, type = 'CERTIFICATE REQUEST') => `-----BEGIN ${type}-----\n${body}\n-----END ${type}-----\n`;
  const withSubject = (subject: Uint8Array, key = ec) => pem(request({ key, subject }, GOOD));
  const withExtensions = (...extensions: Uint8Array[]) => pem(request({ key: ec, attributes: [extensionRequest(...extensions)] }, GOOD));
  const goodSan = sanValue(GOOD.dns!, GOOD.ips!);
  const evilSan = sanValue(EVIL.dns!, EVIL.ips!);
  const cnO = (cn: Uint8Array, o: Uint8Array = printable('system:nodes')) => seq(rdn(OID.O, o), rdn(OID.CN, cn));
  const cases: Case[] = [
    // Good requests: the approver must approve them, and Go read them alike.
    { name: 'good EC P-256', text: goodPem, approve: true },
    { name: 'good RSA 2048', text: pem(request({ key: rsa }, GOOD)), usages: RSA_USAGES, approve: true },
    { name: 'good Ed25519', text: pem(request({ key: ed }, GOOD)), approve: true },
    { name: 'good RSASSA-PSS (Go\'s parameters)', text: pem(request({ key: rsa, signing: pssSigning(rsa) }, GOOD)), usages: RSA_USAGES, approve: true },
    { name: 'good, CRLF lines', text: goodPem.replace(/\n/g, '\r\n'), approve: true },
    { name: 'good, one base64 line', text: block(Buffer.from(good).toString('base64')), approve: true },
    { name: 'good, blank lines around', text: `\n\n${goodPem}\n\n`, approve: true },
    { name: 'BMPString CN and O', text: withSubject(cnO(bmp(USER), bmp('system:nodes'))), approve: true },
    { name: 'UTF8String CN, IA5String O', text: withSubject(cnO(utf8(USER), text(0x16, 'system:nodes'))), approve: true },
    { name: 'T61String CN', text: withSubject(cnO(text(0x14, USER))), approve: true },
    { name: 'critical TRUE SAN and a keyUsage extension', text: withExtensions(extension(OID.SAN, goodSan, true), extension(OID.KEY_USAGE, bits(Uint8Array.of(0x80)))), approve: true },
    { name: 'upper-case DNS SAN', text: pem(request({ key: ec }, { ...GOOD, dns: ['WORKER-1'] })), approve: true },

    // The representative set a compromised node files through the real API server (test/e2e): one or
    // more of each class below, and asking outright.
    ...craftedServingRequests(GOOD, EVIL).map(({ name, text }) => ({ name, text })),

    // 1. PEM framing.
    { name: 'two blocks', text: `${goodPem}${evilPem}` },
    { name: 'END of another type', text: `-----BEGIN CERTIFICATE REQUEST-----\n${goodB64}\n-----END CERTIFICATE-----\n${evilPem}` },
    { name: 'text after the BEGIN marker', text: `-----BEGIN CERTIFICATE REQUEST----- x\n${goodB64}\n-----END CERTIFICATE REQUEST-----\n${evilPem}` },
    { name: 'text after the END marker', text: `-----BEGIN CERTIFICATE REQUEST-----\n${goodB64}\n-----END CERTIFICATE REQUEST----- x\n${evilPem}` },
    ...['\v', '\u2028', '\f', '!', '_'].map((c) => ({ name: `U+${c.charCodeAt(0).toString(16)} inside the base64`, text: `${block(insertAt(goodB64, 10, c))}${evilPem}` })),
    { name: 'a key: value header line', text: `${block(`key: value\n\n${goodB64}`)}` },
    { name: 'Proc-Type header (Go reads it, the approver refuses headers)', text: block(`Proc-Type: 4,ENCRYPTED\n\n${goodB64}`) },
    { name: '==== in mid-block', text: `${block(`${goodB64}\n====\n${evilB64}`)}${evilPem}` },
    { name: 'NEW CERTIFICATE REQUEST', text: pem(good, 'NEW CERTIFICATE REQUEST') },
    { name: 'a byte-order mark before the block', text: `\ufeff${goodPem}` },
    { name: 'junk line before the block', text: `hello\n${goodPem}` },
    { name: 'non-canonical base64 (stray bits in the last character)', text: block(strayBits(good)) },

    // 2. An Extension with two OCTET STRINGs.
    { name: 'SAN extension with two OCTET STRINGs, good first', text: withExtensions(seq(oid(OID.SAN), octets(goodSan), octets(evilSan))) },
    { name: 'SAN extension with a critical flag after the value', text: withExtensions(seq(oid(OID.SAN), octets(goodSan), Uint8Array.of(1, 1, 0xff))) },

    // 3. A second CN with a non-string tag (Go skips it and names the first).
    ...[0x1b, 0x1c, 0x06, 0x02, 0x80, 0xa0, 0x30, 0x31].map((tag) => ({
      name: `a second CN of tag 0x${tag.toString(16)}`,
      text: withSubject(seq(rdn(OID.O, printable('system:nodes')), rdn(OID.CN, printable(EVIL.cn)), rdn(OID.CN, tag & 0x20 ? tlv(tag, utf8(USER)) : text(tag, USER)))),
    })),
    // Read differently but stopped today by the API server or the signer.
    { name: 'a single CN of OCTET STRING', text: withSubject(cnO(text(0x04, USER))) },
    { name: 'a single O of VisibleString', text: withSubject(cnO(printable(USER), text(0x1a, 'system:nodes'))) },
    { name: 'a CN with a byte-order mark', text: withSubject(cnO(utf8(`\ufeff${USER}`))) },
    { name: 'a Kelvin sign in the DNS SAN', text: pem(request({ key: ec }, { ...GOOD, dns: ['wor\u212aer-1'] })) },
    { name: 'a PrintableString with a character it cannot hold', text: withSubject(cnO(text(0x13, `${USER}_`))) },
    { name: 'a BMPString CN ending in NUL', text: withSubject(cnO(bmp(`${USER}\u0000`))) },
    { name: 'a multi-valued RDN (O+CN)', text: withSubject(seq(set(seq(oid(OID.O), printable('system:nodes')), seq(oid(OID.CN), printable(USER))))) },
    { name: 'an OU besides', text: withSubject(seq(rdn(OID.O, printable('system:nodes')), rdn(OID.OU, printable('x')), rdn(OID.CN, printable(USER)))) },
    { name: 'a non-minimal length (SAN sequence)', text: withExtensions(seq(oid(OID.SAN), octets(longForm(goodSan)))) },
    { name: 'a non-minimal length (subject)', text: withSubject(longForm(kubeletSubject(GOOD))) },
    { name: 'a non-minimal OID (CN type)', text: withSubject(seq(rdn(OID.O, printable('system:nodes')), set(seq(oid(OID.CN, 1), printable(USER))))) },
    { name: 'a non-minimal OID (SAN id)', text: withExtensions(seq(oid(OID.SAN, 2), octets(goodSan))) },
    { name: 'an OID arc above 2^31-1 in an extra extension', text: withExtensions(extension(OID.SAN, goodSan), extension('1.2.4294967296', nul())) },
    { name: 'a trailing zero byte', text: pem(request({ key: ec, trailing: Uint8Array.of(0) }, GOOD)) },
    { name: 'duplicate SAN extensions', text: withExtensions(extension(OID.SAN, goodSan), extension(OID.SAN, goodSan)) },
    { name: 'duplicate extensionRequest attributes', text: pem(request({ key: ec, attributes: [...kubeletAttributes(GOOD), ...kubeletAttributes(GOOD)] }, GOOD)) },
    { name: 'a challengePassword attribute besides', text: pem(request({ key: ec, attributes: [...kubeletAttributes(GOOD), seq(oid(OID.CHALLENGE_PASSWORD), set(utf8('x')))] }, GOOD)) },
    { name: 'an attribute that does not parse (Go skips it)', text: pem(request({ key: ec, attributes: [...kubeletAttributes(GOOD), seq(oid(OID.EXTENSION_REQUEST))] }, GOOD)) },
    { name: 'version as OCTET STRING', text: pem(request({ key: ec, version: octets(Uint8Array.of(0)) }, GOOD)) },
    { name: 'version 1', text: pem(request({ key: ec, version: int(1) }, GOOD)) },
    { name: 'version 0 with a leading zero', text: pem(request({ key: ec, version: tlv(0x02, Uint8Array.of(0, 0)) }, GOOD)) },
    { name: 'critical as 0x01', text: withExtensions(seq(oid(OID.SAN), tlv(0x01, Uint8Array.of(1)), octets(goodSan))) },
    { name: 'critical as INTEGER', text: withExtensions(seq(oid(OID.SAN), int(1), octets(goodSan))) },
    { name: 'critical as an explicit FALSE', text: withExtensions(extension(OID.SAN, goodSan, false)) },
    { name: 'a constructed DNS SAN', text: withExtensions(extension(OID.SAN, seq(tlv(0xa2, text(0x16, 'kubernetes')), tlv(0x82, new TextEncoder().encode(NODE_NAME))))) },
    { name: 'an IPv4-mapped IPv6 SAN', text: withExtensions(extension(OID.SAN, seq(tlv(0x87, Uint8Array.of(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 198, 51, 100, 10))))) },
    { name: 'an email SAN', text: withExtensions(extension(OID.SAN, seq(ipSan('198.51.100.10'), tlv(0x81, new TextEncoder().encode('a@example.test'))))) },
    // The signature algorithm that belongs to the key's type.
    { name: 'an ECDSA OID over an RSA signature', text: pem(request({ key: rsa, signing: { ...defaultSigning(rsa), algorithm: seq(oid(OID.ECDSA_SHA256)) } }, GOOD)), usages: RSA_USAGES },
    { name: 'Ed25519 with NULL parameters', text: pem(request({ key: ed, signing: { ...defaultSigning(ed), algorithm: seq(oid(OID.ED25519), nul()) } }, GOOD)) },
    { name: 'ECDSA with NULL parameters', text: pem(request({ key: ec, signing: { ...defaultSigning(ec), algorithm: seq(oid(OID.ECDSA_SHA256), nul()) } }, GOOD)) },
    { name: 'RSA without NULL parameters', text: pem(request({ key: rsa, signing: { ...defaultSigning(rsa), algorithm: seq(oid(OID.RSA_SHA256)) } }, GOOD)), usages: RSA_USAGES },
    { name: 'RSA with SHA-1', text: pem(request({ key: rsa, signing: { ...defaultSigning(rsa), algorithm: seq(oid(OID.RSA_SHA1), nul()) } }, GOOD)), usages: RSA_USAGES },
    { name: 'ECDSA-with-SHA384 OID over a SHA-256 signature', text: pem(request({ key: ec, signing: { ...defaultSigning(ec), algorithm: seq(oid(OID.ECDSA_SHA384)) } }, GOOD)) },
    { name: 'a signature BIT STRING with unused bits', text: pem(unusedBitsSignature(ec)) },
    { name: 'an RSA exponent of 2^32+1', text: pem(bigExponentRequest(2n ** 32n + 1n)), usages: RSA_USAGES },
    { name: 'an RSA exponent of 2^31+1', text: pem(bigExponentRequest(2n ** 31n + 1n)), usages: RSA_USAGES },
    { name: 'a compressed P-256 point', text: pem(request({ key: ec, spki: compressedSpki(ec) }, GOOD)) },
  ];
  return cases;
}

function b64Lines(der: Uint8Array): string {
  return Buffer.from(der).toString('base64').replace(/.{64}/g, '$&\n').replace(/\n$/, '');
}

function insertAt(s: string, at: number, c: string): string {
  return s.slice(0, at) + c + s.slice(at);
}

/** The base64 of `der` with bits set after its last byte (Go and Buffer decode it to the same bytes). */
function strayBits(der: Uint8Array): string {
  const b64 = Buffer.from(der.length % 3 === 0 ? concat(der, Uint8Array.of(0)) : der).toString('base64');
  const padded = der.length % 3 === 0 ? b64.slice(0, -2) + '==' : b64;
  const last = padded.replace(/=+$/, '').length - 1;
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
  return padded.slice(0, last) + alphabet[alphabet.indexOf(padded[last]!) | 1] + padded.slice(last + 1);
}

/** The element re-encoded with a needless long-form length. */
function longForm(element: Uint8Array): Uint8Array {
  const [node] = parseTree(element)!;
  return serialize({ ...node!, longLength: true });
}

function unusedBitsSignature(key: TestKey): Uint8Array {
  const info = requestInfo({ key }, GOOD);
  const signing = defaultSigning(key);
  return seq(info, signing.algorithm, tlv(0x03, Uint8Array.of(1), signing.sign(info)));
}

function compressedSpki(key: TestKey): Uint8Array {
  const point = key.spki.subarray(key.spki.length - 65);
  const compressed = concat(Uint8Array.of(0x02 | (point[64]! & 1)), point.subarray(1, 33));
  return seq(seq(oid(OID.EC), oid(OID.P256)), bits(compressed));
}

/** An RSA request whose key has exponent `e` (Go refuses exponents above 2^31-1), signed by hand with PKCS#1 v1.5. */
function bigExponentRequest(e: bigint): Uint8Array {
  for (;;) {
    const jwk = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ format: 'jwk' });
    const [n, p, q] = [jwk.n, jwk.p, jwk.q].map((v) => BigInt(`0x${Buffer.from(v!, 'base64url').toString('hex')}`)) as [bigint, bigint, bigint];
    const lambda = ((p - 1n) * (q - 1n)) / gcd(p - 1n, q - 1n);
    if (gcd(e, lambda) !== 1n) continue;
    const d = modInverse(e, lambda);
    const spki = seq(seq(oid(OID.RSA), nul()), bits(seq(int(n), int(e))));
    const key: TestKey = { kind: 'rsa', privateKey: undefined as never, spki };
    const signing: Signing = {
      algorithm: seq(oid(OID.RSA_SHA256), nul()),
      sign: (info) => {
        const digestInfo = concat(Buffer.from('3031300d060960864801650304020105000420', 'hex'), createHash('sha256').update(info).digest());
        const em = concat(Uint8Array.of(0, 1), new Uint8Array(256 - 3 - digestInfo.length).fill(0xff), Uint8Array.of(0), digestInfo);
        const s = modPow(BigInt(`0x${Buffer.from(em).toString('hex')}`), d, n);
        return new Uint8Array(Buffer.from(s.toString(16).padStart(512, '0'), 'hex'));
      },
    };
    return request({ key, signing }, GOOD);
  }
}

function gcd(a: bigint, b: bigint): bigint {
  while (b) [a, b] = [b, a % b];
  return a;
}

function modInverse(a: bigint, m: bigint): bigint {
  let [oldR, r, oldS, s] = [a % m, m, 1n, 0n];
  while (r) {
    const quotient = oldR / r;
    [oldR, r] = [r, oldR - quotient * r];
    [oldS, s] = [s, oldS - quotient * s];
  }
  return ((oldS % m) + m) % m;
}

function modPow(base: bigint, exponent: bigint, modulus: bigint): bigint {
  let result = 1n;
  base %= modulus;
  for (; exponent > 0n; exponent >>= 1n) {
    if (exponent & 1n) result = (result * base) % modulus;
    base = (base * base) % modulus;
  }
  return result;
}

// --- seeded random mutations of good requests --------------------------------------------------

/** Elements a fuzzer may splice into a request: what an attacker would want read, in every shape. */
function evilPool(): Uint8Array[] {
  const evilSan = sanValue(EVIL.dns!, EVIL.ips!);
  return [
    octets(evilSan), evilSan, extension(OID.SAN, evilSan), extensionRequest(extension(OID.SAN, evilSan)),
    rdn(OID.CN, printable(EVIL.cn)), rdn(OID.CN, text(0x04, EVIL.cn)), rdn(OID.O, printable('system:masters')),
    seq(oid(OID.CN), printable(EVIL.cn)), printable(EVIL.cn), text(0x1a, USER), utf8(`\ufeff${USER}`), bmp(USER),
    tlv(0x82, new TextEncoder().encode('kubernetes.default.svc')), ipSan('10.96.0.1'), tlv(0x81, new TextEncoder().encode('a@b.c')),
    Uint8Array.of(0x01, 0x01, 0xff), Uint8Array.of(0x01, 0x01, 0x00), Uint8Array.of(0x01, 0x01, 0x01), int(0), int(2 ** 32 + 1), nul(),
    oid(OID.SAN), oid(OID.CN, 1), seq(), set(), tlv(0xa0), octets(new Uint8Array()),
  ];
}

const TAGS = [0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x0c, 0x12, 0x13, 0x14, 0x16, 0x1a, 0x1b, 0x1c, 0x1e, 0x30, 0x31, 0x80, 0x81, 0x82, 0x86, 0x87, 0xa0, 0xa2];
const PEM_NOISE = [' ', '\t', '\r', '\n', '\v', '\f', '\u00a0', '\u2028', '\ufeff', '-', '=', ':', '_', '!', 'A', '+', '/', '-----END CERTIFICATE REQUEST-----', '-----BEGIN CERTIFICATE REQUEST-----\n', 'Proc-Type: 4,ENCRYPTED\n'];

function mutatedCases(seed: number, count: number): Case[] {
  const random = mulberry32(seed);
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
  const pool = evilPool();
  const bases = [
    { key: ec, usages: EC_USAGES, signing: defaultSigning(ec) },
    { key: ec, usages: EC_USAGES, signing: defaultSigning(ec) },
    { key: ed, usages: EC_USAGES, signing: defaultSigning(ed) },
    { key: rsa, usages: RSA_USAGES, signing: defaultSigning(rsa) },
    { key: rsa, usages: RSA_USAGES, signing: pssSigning(rsa) },
  ];
  const evilPem = pem(request({ key: ec }, EVIL));
  const cases: Case[] = [];
  for (let i = 0; i < count; i++) {
    const base = pick(bases);
    const roll = random();
    const ops: string[] = [];
    if (roll < 0.7) {
      // The signed part as a tree: cut, copy, retag, splice in evil elements, lengthen; then sign it again.
      const [info] = parseTree(requestInfo({ key: base.key }, GOOD))!;
      for (let n = 1 + Math.floor(random() * 3); n > 0; n--) ops.push(mutateTree(info!, random, pick, pool));
      const der = serialize(info!);
      const signed = seq(der, base.signing.algorithm, bits(base.signing.sign(der)));
      cases.push({ name: `mutation ${i} (seed ${seed}): tree ${ops.join(', ')}`, text: pem(signed), usages: base.usages });
    } else if (roll < 0.8) {
      // Bytes of the whole request, not signed again.
      const der = new Uint8Array(request({ key: base.key, signing: base.signing }, GOOD));
      for (let n = 1 + Math.floor(random() * 2); n > 0; n--) {
        const at = Math.floor(random() * der.length);
        der[at] = random() < 0.5 ? der[at]! ^ (1 << Math.floor(random() * 8)) : Math.floor(random() * 256);
        ops.push(`byte ${at}`);
      }
      cases.push({ name: `mutation ${i} (seed ${seed}): ${ops.join(', ')}`, text: pem(der), usages: base.usages });
    } else {
      // The PEM text, often followed by a second block asking for more.
      let textOf = pem(request({ key: base.key, signing: base.signing }, GOOD));
      for (let n = 1 + Math.floor(random() * 2); n > 0; n--) {
        const at = Math.floor(random() * textOf.length);
        const r = random();
        if (r < 0.6) {
          const noise = pick(PEM_NOISE);
          textOf = insertAt(textOf, at, noise);
          ops.push(`insert ${JSON.stringify(noise)} at ${at}`);
        } else if (r < 0.85) {
          textOf = textOf.slice(0, at) + textOf.slice(at + 1);
          ops.push(`delete at ${at}`);
        } else {
          textOf = ` ${textOf}`;
          ops.push('space first');
        }
      }
      if (random() < 0.5) {
        textOf += evilPem;
        ops.push('evil block after');
      }
      cases.push({ name: `mutation ${i} (seed ${seed}): pem ${ops.join(', ')}`, text: textOf, usages: base.usages });
    }
  }
  return cases;
}

/** One random change to the tree (in place); returns what it did. */
function mutateTree(root: DerNode, random: () => number, pick: <T>(items: readonly T[]) => T, pool: Uint8Array[]): string {
  const all: { node: DerNode; parent?: DerNode; path: string }[] = [];
  const walk = (node: DerNode, parent: DerNode | undefined, path: string) => {
    all.push({ node, parent, path });
    node.children?.forEach((child, i) => walk(child, node, `${path}.${i}`));
  };
  walk(root, undefined, 'info');
  const { node, parent, path } = pick(all.slice(1));
  const siblings = parent!.children!;
  const index = siblings.indexOf(node);
  const op = Math.floor(random() * 7);
  switch (op) {
    case 0:
      siblings.splice(index, 0, structuredClone(node));
      return `duplicate ${path}`;
    case 1:
      siblings.splice(index, 1);
      return `delete ${path}`;
    case 2: {
      const element = pick(pool);
      siblings.splice(index + Math.round(random()), 0, parseTree(element)![0]!);
      return `splice evil ${Buffer.from(element).toString('hex').slice(0, 24)} at ${path}`;
    }
    case 3: {
      const tag = pick(TAGS);
      const wasConstructed = Boolean(node.tag & 0x20);
      node.tag = tag;
      if (wasConstructed !== Boolean(tag & 0x20) && node.children && !(tag & 0x20)) {
        node.value = serialize({ tag: 0x30, children: node.children }).subarray(2);
        delete node.children;
      }
      return `retag ${path} to 0x${tag.toString(16)}`;
    }
    case 4:
      node.longLength = true;
      return `long length at ${path}`;
    case 5: {
      if (node.children) {
        node.children.reverse();
        return `reverse ${path}`;
      }
      const value = new Uint8Array(node.value ?? new Uint8Array(1));
      const at = Math.floor(random() * value.length);
      if (value.length) value[at] = value[at]! ^ (1 << Math.floor(random() * 8));
      node.value = value;
      return `flip a bit in ${path}`;
    }
    default: {
      const other = pick(all.slice(1)).node;
      siblings[index] = structuredClone(other);
      return `replace ${path} with a copy of another element`;
    }
  }
}

