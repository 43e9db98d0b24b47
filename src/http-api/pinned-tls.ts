import { X509Certificate } from 'node:crypto';
import { connect, type DetailedPeerCertificate, type PeerCertificate } from 'node:tls';

/**
 * How an HTTPS API's server certificate is trusted, as Bun's fetch `tls` option; the pinned
 * fingerprint check every HTTP API provider (proxmox, lxd) makes, written once.
 *
 * What Bun's fetch can do (checked against Bun 1.4): `checkServerIdentity` is called only after
 * the chain verified against `ca` (it replaces the host-name check), and never with
 * `rejectUnauthorized: false`. So:
 * - ca: the chain must lead to it; the host name must match the certificate.
 * - ca + fingerprint: the chain must lead to the CA and the leaf must have the fingerprint.
 * - fingerprint alone: a first TLS connection (node:tls, unverified, nothing sent) reads the
 *   presented chain; its leaf must have the fingerprint and its top must be self-signed (a
 *   self-signed certificate, or a server that sends its CA). That top becomes `ca`, and every
 *   fetch connection is then verified against it and the fingerprint checked again.
 * - insecureSkipVerify: nothing is verified.
 */

export type FetchTls = NonNullable<BunFetchRequestInit['tls']>;

export interface PinnedTlsSettings {
  url: string;
  /** The port when the URL names none. */
  defaultPort: number;
  /** For the first connection that reads the presented certificate. */
  timeoutMs: number;
  ca?: string;
  fingerprint?: string;
  insecureSkipVerify?: boolean;
  /** A client certificate and key to authenticate with, sent on every fetch connection. */
  cert?: string;
  key?: string;
  /**
   * Whether the self-signed top must also be marked fit to issue (OpenSSL's check_issued: a CA,
   * or keyCertSign). LXD's own certificate is neither, so the lxd provider asks only that it is
   * signed by its own key.
   */
  topMustBeIssuer: boolean;
  /** The end of the message when the top is not self-signed: what to configure instead. */
  noAnchorHint: string;
}

export class PinnedTlsTrust {
  private learned?: Promise<FetchTls>;

  constructor(private readonly settings: PinnedTlsSettings) {}

  /** The fetch `tls` option; for a fingerprint alone, learned from the server once. */
  options(): Promise<FetchTls> {
    const { ca, fingerprint, insecureSkipVerify } = this.settings;
    const client = this.client();
    if (insecureSkipVerify) return Promise.resolve({ ...client, rejectUnauthorized: false });
    if (!fingerprint) return Promise.resolve({ ...client, ...(ca ? { ca } : {}) });
    if (ca) return Promise.resolve({ ...client, ca, checkServerIdentity: pinCheck(fingerprint) });
    this.learned ??= this.learnAnchor(fingerprint).then((anchor) => ({ ...client, ca: anchor, checkServerIdentity: pinCheck(fingerprint) })).catch((e: unknown) => {
      this.learned = undefined;
      throw e;
    });
    return this.learned;
  }

  /** After a TLS failure: the certificate may have been replaced, so learn it again. */
  forget(): void {
    this.learned = undefined;
  }

  private client(): FetchTls {
    const { cert, key } = this.settings;
    return { ...(cert !== undefined ? { cert } : {}), ...(key !== undefined ? { key } : {}) };
  }

  private async learnAnchor(fingerprint: string): Promise<string> {
    const { url, defaultPort, timeoutMs, topMustBeIssuer, noAnchorHint } = this.settings;
    const chain = await presentedChain(url, defaultPort, timeoutMs);
    const leaf = chain[0]!;
    if (leaf.fingerprint256 !== fingerprint) {
      throw new Error(`server certificate fingerprint mismatch: ${url} presents ${leaf.fingerprint256}, the configuration pins ${fingerprint}`);
    }
    const top = chain.at(-1)!;
    if (!isSelfSigned(top, topMustBeIssuer)) throw new Error(`cannot pin by fingerprint alone: ${noAnchorHint}`);
    return toPem(top);
  }
}

/** Whether a fetch failure is the TLS handshake's (the pinned certificate may have been replaced). */
export function isTlsError(e: unknown): boolean {
  const text = `${(e as { code?: string }).code ?? ''} ${(e as Error).message ?? ''}`;
  return /CERT|TLS|SSL|self.signed|fingerprint/i.test(text);
}

function pinCheck(fingerprint: string): (host: string, cert: PeerCertificate) => Error | undefined {
  return (_host, cert) =>
    cert.fingerprint256 === fingerprint ? undefined : new Error(`server certificate fingerprint mismatch: got ${cert.fingerprint256}, pinned ${fingerprint}`);
}

/** The certificates the server presents, leaf first; nothing is sent over the connection. */
function presentedChain(url: string, defaultPort: number, timeoutMs: number): Promise<DetailedPeerCertificate[]> {
  const u = new URL(url);
  const port = Number(u.port || defaultPort);
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

function isSelfSigned(cert: DetailedPeerCertificate, mustBeIssuer: boolean): boolean {
  try {
    const x = new X509Certificate(cert.raw);
    return (!mustBeIssuer || x.checkIssued(x)) && x.verify(x.publicKey);
  } catch {
    return false;
  }
}

function toPem(cert: DetailedPeerCertificate): string {
  const b64 = cert.raw.toString('base64').match(/.{1,64}/g)!.join('\n');
  return `-----BEGIN CERTIFICATE-----\n${b64}\n-----END CERTIFICATE-----\n`;
}
