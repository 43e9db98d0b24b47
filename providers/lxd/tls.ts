import { X509Certificate } from 'node:crypto';
import { connect, type DetailedPeerCertificate, type PeerCertificate } from 'node:tls';
import type { LxdEndpoint } from './config-model.ts';

/**
 * The fetch `tls` option for the HTTPS endpoint: the client certificate LXD authenticates us by,
 * and how the server certificate is trusted.
 * - caFile: the chain must lead to it (and the host name match), as for any HTTPS server;
 * - fingerprint (LXD's default, a self-signed server certificate, as `lxc remote add` pins it):
 *   a first TLS connection (nothing sent) reads the presented certificate, which must have the
 *   fingerprint and be self-signed; it becomes the only trusted CA, and every connection checks
 *   the fingerprint again (Bun calls checkServerIdentity only after the chain verified, in place
 *   of the host-name check, as providers/proxmox/tls.ts found).
 */

export type FetchTls = NonNullable<BunFetchRequestInit['tls']>;
type Https = Extract<LxdEndpoint, { kind: 'https' }>;

export class LxdTlsTrust {
  private learned?: Promise<FetchTls>;

  constructor(private readonly endpoint: Https, private readonly timeoutMs: number) {}

  options(): Promise<FetchTls> {
    const { clientCert: cert, clientKey: key, ca, fingerprint } = this.endpoint;
    if (!fingerprint) return Promise.resolve({ cert, key, ca });
    if (ca) return Promise.resolve({ cert, key, ca, checkServerIdentity: pinCheck(fingerprint) });
    this.learned ??= this.learnAnchor(fingerprint).then((anchor) => ({ cert, key, ca: anchor, checkServerIdentity: pinCheck(fingerprint) })).catch((e: unknown) => {
      this.learned = undefined;
      throw e;
    });
    return this.learned;
  }

  /** After a TLS failure: the server certificate may have been replaced. */
  forget(): void {
    this.learned = undefined;
  }

  private async learnAnchor(fingerprint: string): Promise<string> {
    const leaf = await presentedCertificate(this.endpoint.url, this.timeoutMs);
    if (leaf.fingerprint256 !== fingerprint) {
      throw new Error(`server certificate fingerprint mismatch: ${this.endpoint.url} presents ${leaf.fingerprint256}, the configuration pins ${fingerprint}`);
    }
    const x = new X509Certificate(leaf.raw);
    // Signed by its own key (LXD marks its certificate neither as a CA nor with keyCertSign, so checkIssued says no).
    if (!x.verify(x.publicKey)) throw new Error('cannot pin by fingerprint: the server certificate is not self-signed; set caFile');
    return x.toString();
  }
}

function pinCheck(fingerprint: string): (host: string, cert: PeerCertificate) => Error | undefined {
  return (_host, cert) => (cert.fingerprint256 === fingerprint ? undefined : new Error(`server certificate fingerprint mismatch: got ${cert.fingerprint256}, pinned ${fingerprint}`));
}

function presentedCertificate(url: string, timeoutMs: number): Promise<DetailedPeerCertificate> {
  const u = new URL(url);
  const host = u.hostname.replace(/^\[|\]$/g, '');
  const isIP = /^[\d.]+$/.test(host) || host.includes(':');
  return new Promise((resolve, reject) => {
    const socket = connect({ host, port: Number(u.port || 8443), servername: isIP ? undefined : host, rejectUnauthorized: false }, () => {
      const cert = socket.getPeerCertificate(true);
      socket.destroy();
      if (cert?.raw) resolve(cert);
      else reject(new Error('the server presented no certificate'));
    });
    socket.setTimeout(timeoutMs, () => socket.destroy(new Error(`no TLS handshake within ${timeoutMs}ms`)));
    socket.once('error', reject);
  });
}
