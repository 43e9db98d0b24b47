import { X509Certificate } from 'node:crypto';
import { connect, type PeerCertificate, type DetailedPeerCertificate } from 'node:tls';
import type { ClusterTls } from './config-model.ts';

/**
 * How one cluster's API certificate is trusted, as Bun's fetch `tls` option.
 *
 * What Bun's fetch can do (checked against Bun 1.4): `checkServerIdentity` is called only after
 * the chain verified against `ca` (it replaces the host-name check), and never with
 * `rejectUnauthorized: false`. So:
 * - caFile: the chain must lead to it; the host name must match the certificate.
 * - caFile + fingerprint: the chain must lead to the CA and the leaf must have the fingerprint.
 * - fingerprint alone: a first TLS connection (node:tls, unverified, nothing sent) reads the
 *   presented chain; its leaf must have the fingerprint and its top must be self-signed (a
 *   self-signed certificate, or a server that sends its CA). That top becomes `ca`, and every
 *   fetch connection is then verified against it and the fingerprint checked again. A leaf
 *   signed by a CA the server does not send (the Proxmox default pve-ssl.pem) cannot be pinned
 *   this way: use caFile with /etc/pve/pve-root-ca.pem.
 * - insecureSkipVerify: nothing is verified.
 */

export type FetchTls = NonNullable<BunFetchRequestInit['tls']>;

export class TlsTrust {
  private learned?: Promise<FetchTls>;

  constructor(
    private readonly tls: ClusterTls,
    private readonly url: string,
    private readonly timeoutMs: number,
  ) {}

  /** The fetch `tls` option; for a fingerprint alone, learned from the server once. */
  options(): Promise<FetchTls> {
    const { ca, fingerprint, insecureSkipVerify } = this.tls;
    if (insecureSkipVerify) return Promise.resolve({ rejectUnauthorized: false });
    if (!fingerprint) return Promise.resolve(ca ? { ca } : {});
    if (ca) return Promise.resolve({ ca, checkServerIdentity: pinCheck(fingerprint) });
    this.learned ??= this.learnAnchor(fingerprint).catch((e: unknown) => {
      this.learned = undefined;
      throw e;
    });
    return this.learned;
  }

  /** After a TLS failure: the certificate may have been replaced, so learn it again. */
  forget(): void {
    this.learned = undefined;
  }

  private async learnAnchor(fingerprint: string): Promise<FetchTls> {
    const chain = await presentedChain(this.url, this.timeoutMs);
    const leaf = chain[0]!;
    if (leaf.fingerprint256 !== fingerprint) {
      throw new Error(`certificate fingerprint mismatch: the server presents ${leaf.fingerprint256}, the configuration pins ${fingerprint}`);
    }
    const top = chain.at(-1)!;
    if (!isSelfSigned(top)) {
      throw new Error('cannot pin by fingerprint alone: the server presents neither a self-signed certificate nor its CA; set caFile (e.g. /etc/pve/pve-root-ca.pem)');
    }
    return { ca: toPem(top), checkServerIdentity: pinCheck(fingerprint) };
  }
}

function pinCheck(fingerprint: string): (host: string, cert: PeerCertificate) => Error | undefined {
  return (_host, cert) =>
    cert.fingerprint256 === fingerprint ? undefined : new Error(`certificate fingerprint mismatch: got ${cert.fingerprint256}, pinned ${fingerprint}`);
}

/** The certificates the server presents, leaf first; nothing is sent over the connection. */
function presentedChain(url: string, timeoutMs: number): Promise<DetailedPeerCertificate[]> {
  const u = new URL(url);
  const port = Number(u.port || 443);
  const host = u.hostname.replace(/^\[|\]$/g, '');
  const isIP = /^[\d.]+$/.test(host) || host.includes(':');
  return new Promise((resolve, reject) => {
    const socket = connect({ host, port, servername: isIP ? undefined : host, rejectUnauthorized: false }, () => {
      const chain: DetailedPeerCertificate[] = [];
      let cert: DetailedPeerCertificate | undefined = socket.getPeerCertificate(true);
      while (cert?.raw && !chain.some((c) => c.fingerprint256 === cert!.fingerprint256)) {
        chain.push(cert);
        cert = cert.issuerCertificate;
      }
      socket.destroy();
      if (chain.length) resolve(chain);
      else reject(new Error('the server presented no certificate'));
    });
    socket.setTimeout(timeoutMs, () => socket.destroy(new Error(`no TLS handshake within ${timeoutMs}ms`)));
    socket.once('error', reject);
  });
}

function isSelfSigned(cert: DetailedPeerCertificate): boolean {
  try {
    const x = new X509Certificate(cert.raw);
    return x.checkIssued(x) && x.verify(x.publicKey);
  } catch {
    return false;
  }
}

function toPem(cert: DetailedPeerCertificate): string {
  const b64 = cert.raw.toString('base64').match(/.{1,64}/g)!.join('\n');
  return `-----BEGIN CERTIFICATE-----\n${b64}\n-----END CERTIFICATE-----\n`;
}
