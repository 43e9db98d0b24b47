import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSigningRequest, type SigningRequest } from '../../../test/harness/certs.ts';
import { decide, KUBELET_SERVING_SIGNER, type CsrFacts, type NodeFacts } from './decide.ts';
import { parseCsrPem } from './pkcs10.ts';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'edge-ccm-csr-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const NODE: NodeFacts = { exists: true, managed: true, addresses: ['198.51.100.10', '2001:db8::10'], dnsNames: ['worker-1', 'worker-1.example.test'] };
let counter = 0;

async function csrFor(req: Partial<SigningRequest> = {}, facts: Partial<CsrFacts> = {}): Promise<CsrFacts> {
  const { csrPem } = await createSigningRequest(dir, `r${counter++}`, {
    commonName: 'system:node:worker-1',
    organizations: ['system:nodes'],
    dnsNames: ['worker-1'],
    ipAddresses: ['198.51.100.10', '2001:db8:0:0::10'],
    ...req,
  });
  return { signerName: KUBELET_SERVING_SIGNER, usages: ['digital signature', 'server auth'], username: 'system:node:worker-1', groups: ['system:nodes', 'system:authenticated'], requestPem: csrPem, ...facts };
}

/** The PEM with the last bit of its DER (in the signature) flipped. */
function flipLastBit(pem: string): string {
  const der = Buffer.from(pem.replace(/-----[^-]+-----|\s/g, ''), 'base64');
  der[der.length - 1]! ^= 1;
  return `-----BEGIN CERTIFICATE REQUEST-----\n${der.toString('base64')}\n-----END CERTIFICATE REQUEST-----\n`;
}

describe('parseCsrPem', () => {
  test('reads subject, SANs and key of an openssl request', async () => {
    const parsed = parseCsrPem((await csrFor({ emails: ['a@example.test'] })).requestPem);
    expect(parsed.commonName).toBe('system:node:worker-1');
    expect(parsed.organizations).toEqual(['system:nodes']);
    expect(parsed.dnsNames).toEqual(['worker-1']);
    expect(parsed.ipAddresses).toEqual(['198.51.100.10', '2001:db8::10']);
    expect(parsed.otherSanKinds).toEqual(['email']);
    expect(parsed.publicKey.asymmetricKeyDetails?.namedCurve).toBe('prime256v1');
    expect(parsed.signatureValid).toBe(true);
  });

  test('names what is malformed', () => {
    expect(() => parseCsrPem('-----BEGIN CERTIFICATE REQUEST-----\nMAMCAQA=\n-----END CERTIFICATE REQUEST-----')).toThrow(/CertificationRequestInfo: expected SEQUENCE, found INTEGER/);
    expect(() => parseCsrPem('nothing')).toThrow(/no "-----BEGIN CERTIFICATE REQUEST-----" line/);
  });
});

describe('decide', () => {
  test('approves a kubelet serving request for the node\'s own names and addresses', async () => {
    expect(decide(await csrFor(), NODE).kind).toBe('approve');
    // Older kubelets ask "key encipherment" with their EC key too.
    expect(decide(await csrFor({}, { usages: ['digital signature', 'key encipherment', 'server auth'] }), NODE).kind).toBe('approve');
  });

  test('approves RSA 2048, P-384 and Ed25519 keys', async () => {
    for (const key of ['rsa-2048', 'ec-p384', 'ed25519'] as const) {
      const usages = key === 'rsa-2048' ? ['digital signature', 'key encipherment', 'server auth'] : ['digital signature', 'server auth'];
      expect(decide(await csrFor({ key }, { usages }), NODE)).toMatchObject({ kind: 'approve' });
    }
  });

  test('leaves other signers alone', async () => {
    expect(decide(await csrFor({}, { signerName: 'kubernetes.io/kube-apiserver-client-kubelet' }), NODE)).toEqual({ kind: 'ignore' });
  });

  const denials: [string, Partial<SigningRequest>, Partial<CsrFacts>, Partial<NodeFacts>, string][] = [
    ['client usages', {}, { usages: ['digital signature', 'client auth'] }, {}, 'SignerOrUsages'],
    ['a requester not a node', {}, { username: 'alice' }, {}, 'NotANode'],
    ['a node user outside system:nodes', {}, { groups: ['system:authenticated'] }, {}, 'NotANode'],
    ['a node that does not exist', {}, {}, { exists: false }, 'UnknownNode'],
    ['a node edge-ccm does not manage', {}, {}, { managed: false }, 'UnmanagedNode'],
    ['a subject naming another node', { commonName: 'system:node:worker-2' }, {}, {}, 'SubjectMismatch'],
    ['another node\'s IP', { ipAddresses: ['198.51.100.11'] }, {}, {}, 'IPNotOfNode'],
    ['an extra DNS SAN', { dnsNames: ['worker-1', 'kubernetes.default'] }, {}, {}, 'DNSNotOfNode'],
    ['an email SAN', { emails: ['a@example.test'] }, {}, {}, 'OtherSAN'],
    ['a 1024-bit RSA key', { key: 'rsa-1024' }, { usages: ['digital signature', 'key encipherment', 'server auth'] }, {}, 'WeakKey'],
    ['a request whose signature does not verify', {}, { requestPem: '' }, {}, 'Malformed'],
    ['garbage in spec.request', {}, { requestPem: '-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----' }, {}, 'Malformed'],
  ];
  for (const [what, req, facts, node, reason] of denials) {
    test(`denies ${what} (${reason})`, async () => {
      const csr = await csrFor(req);
      // An empty requestPem asks for the good request with one bit of its signature flipped.
      const requestPem = facts.requestPem === '' ? flipLastBit(csr.requestPem) : facts.requestPem ?? csr.requestPem;
      expect(decide({ ...csr, ...facts, requestPem }, { ...NODE, ...node })).toMatchObject({ kind: 'deny', reason });
    });
  }
});
