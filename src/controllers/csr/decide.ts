import { isIP } from 'node:net';
import type { KeyObject } from 'node:crypto';
import { CsrParseError, parseCsrPem, type ParsedCsr } from './pkcs10.ts';

/**
 * Whether to approve one kubelet-serving CSR, from facts only (no I/O): the CSR, the Node it names
 * and what the provider knows of that node's machine. Approve only when every rule holds; the first
 * rule that fails is the denial's reason, so an operator sees which one.
 */

export const KUBELET_SERVING_SIGNER = 'kubernetes.io/kubelet-serving';
const NODE_USER_PREFIX = 'system:node:';
const NODES_GROUP = 'system:nodes';
/** What a kubelet asks for (its certificate manager); older kubelets ask "key encipherment" for EC keys too, so it is allowed. */
const SERVING_USAGES = new Set(['digital signature', 'key encipherment', 'server auth']);

export interface CsrFacts {
  signerName: string;
  usages: readonly string[];
  username: string;
  groups: readonly string[];
  /** spec.request, base64-decoded: the PEM. */
  requestPem: string;
}

export interface NodeFacts {
  /** The Node named by the requester exists. */
  exists: boolean;
  /** And edge-ccm manages it (its provider knows the machine). */
  managed: boolean;
  /** The addresses the provider reports for the machine. */
  addresses: readonly string[];
  /** The node's hostname and the DNS names the inventory lists for the machine. */
  dnsNames: readonly string[];
}

export interface MinimumKey {
  rsaBits: number;
  /** The EC curves allowed (OpenSSL names as node:crypto reports them). */
  ecCurves: readonly string[];
  ed25519: boolean;
}

/** RSA 2048, ECDSA P-256 and stronger, Ed25519: what the kubelet's own key generation produces and better. */
export const DEFAULT_MINIMUM_KEY: MinimumKey = { rsaBits: 2048, ecCurves: ['prime256v1', 'secp384r1', 'secp521r1'], ed25519: true };

/** The rules, each a condition reason naming what failed. */
export type DenialReason = 'SignerOrUsages' | 'NotANode' | 'UnknownNode' | 'UnmanagedNode' | 'Malformed' | 'SubjectMismatch' | 'IPNotOfNode' | 'DNSNotOfNode' | 'OtherSAN' | 'WeakKey';

export type Decision =
  /** Not a kubelet-serving CSR: another approver's business. */
  | { kind: 'ignore' }
  | { kind: 'approve'; message: string }
  | { kind: 'deny'; reason: DenialReason; message: string };

/** The node a kubelet-serving CSR is for (its requester), or undefined when it is not one. */
export function requestingNode(csr: Pick<CsrFacts, 'signerName' | 'username'>): string | undefined {
  if (csr.signerName !== KUBELET_SERVING_SIGNER || !csr.username.startsWith(NODE_USER_PREFIX)) return undefined;
  return csr.username.slice(NODE_USER_PREFIX.length) || undefined;
}

export function decide(csr: CsrFacts, node: NodeFacts, minimum: MinimumKey = DEFAULT_MINIMUM_KEY): Decision {
  if (csr.signerName !== KUBELET_SERVING_SIGNER) return { kind: 'ignore' };
  const deny = (reason: DenialReason, message: string): Decision => ({ kind: 'deny', reason, message });

  const usages = new Set(csr.usages);
  const extra = [...usages].filter((u) => !SERVING_USAGES.has(u));
  if (extra.length > 0 || !usages.has('server auth') || !usages.has('digital signature')) {
    return deny('SignerOrUsages', `usages ${JSON.stringify(csr.usages)}: a kubelet serving certificate has "digital signature" and "server auth" (and "key encipherment" for RSA) only`);
  }
  const name = requestingNode(csr);
  if (!name || !csr.groups.includes(NODES_GROUP)) {
    return deny('NotANode', `requester ${JSON.stringify(csr.username)} is not system:node:<name> in group ${NODES_GROUP}`);
  }
  if (!node.exists) return deny('UnknownNode', `Node ${JSON.stringify(name)} does not exist`);
  if (!node.managed) return deny('UnmanagedNode', `Node ${JSON.stringify(name)} is not managed by edge-ccm (its provider does not know the machine)`);

  let request: ParsedCsr;
  try {
    request = parseCsrPem(csr.requestPem);
  } catch (error) {
    // Not one reading only (or not a request at all): what the API server and the signer read may differ from what is checked here.
    if (error instanceof CsrParseError) return deny('Malformed', `spec.request is not a kubelet's certificate request read one way only: ${error.message}`);
    throw error;
  }
  if (!request.signatureValid) return deny('Malformed', 'the request\'s signature does not verify with its public key');
  if (request.commonName !== csr.username || request.organizations.length !== 1 || request.organizations[0] !== NODES_GROUP) {
    return deny('SubjectMismatch', `subject CN=${JSON.stringify(request.commonName)} O=${JSON.stringify(request.organizations)}: must be CN=${csr.username} O=${NODES_GROUP}`);
  }
  if (request.otherSanKinds.length > 0) return deny('OtherSAN', `SANs of kinds ${request.otherSanKinds.join(', ')}: only DNS names and IP addresses are allowed`);
  if (request.dnsNames.length + request.ipAddresses.length === 0) return deny('OtherSAN', 'no DNS or IP SAN');

  const known = new Set(node.addresses.map(canonicalIp));
  const strangerIps = request.ipAddresses.filter((ip) => !known.has(canonicalIp(ip)));
  if (strangerIps.length > 0) {
    return deny('IPNotOfNode', `IP SANs ${strangerIps.join(', ')} are not addresses of node ${name}'s machine (${node.addresses.join(', ') || 'none'})`);
  }
  const names = new Set(node.dnsNames.map(asciiLowerCase));
  const strangerNames = request.dnsNames.filter((n) => !names.has(asciiLowerCase(n)));
  if (strangerNames.length > 0) {
    return deny('DNSNotOfNode', `DNS SANs ${strangerNames.join(', ')} are neither node ${name}'s hostname nor names the inventory lists (${node.dnsNames.join(', ') || 'none'})`);
  }

  const weakness = keyWeakness(request.publicKey, minimum);
  if (weakness) return deny('WeakKey', weakness);
  return { kind: 'approve', message: `kubelet serving certificate of node ${name} for ${[...request.dnsNames, ...request.ipAddresses].join(', ')}` };
}

/** Why the key is below the minimum, or undefined when it is not. */
export function keyWeakness(key: KeyObject, minimum: MinimumKey): string | undefined {
  const type = key.asymmetricKeyType;
  const details = key.asymmetricKeyDetails ?? {};
  if (type === 'rsa') {
    const bits = details.modulusLength ?? 0;
    return bits >= minimum.rsaBits ? undefined : `RSA key of ${bits} bits: at least ${minimum.rsaBits} required`;
  }
  if (type === 'ec') {
    const curve = details.namedCurve ?? 'unknown';
    return minimum.ecCurves.includes(curve) ? undefined : `EC key on curve ${curve}: allowed curves are ${minimum.ecCurves.join(', ')}`;
  }
  if (type === 'ed25519' && minimum.ed25519) return undefined;
  return `${type ?? 'unknown'} key: allowed are RSA >= ${minimum.rsaBits} bits, EC on ${minimum.ecCurves.join('/')}${minimum.ed25519 ? ', Ed25519' : ''}`;
}

/** DNS names compare case-insensitively in ASCII only (RFC 4343): toLowerCase() would fold the Kelvin sign U+212A to "k". */
function asciiLowerCase(name: string): string {
  return name.replace(/[A-Z]/g, (c) => String.fromCharCode(c.charCodeAt(0) + 32));
}

/** One text form per address ("2001:DB8::1" and "2001:db8:0::1" are one), by round-tripping through a URL host. */
function canonicalIp(ip: string): string {
  if (isIP(ip) !== 6) return ip;
  try {
    return new URL(`http://[${ip}]/`).hostname.slice(1, -1);
  } catch {
    return ip.toLowerCase();
  }
}
