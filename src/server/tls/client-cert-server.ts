/**
 * The HTTPS listener used when client certificates authenticate (--client-ca-file,
 * --requestheader-client-ca-file): Bun.serve cannot tell a request which certificate its client
 * sent, node:tls can (getPeerCertificate), so TLS is terminated by a node:tls server that asks for
 * a certificate (never requires one: bearer tokens still work) and hands each connection to a
 * node:http server; requests reach the Hono app as fetch Requests with the client's chain in the
 * environment (ServerEnv's Bindings). Same certificates, SNI, suites and minimum version as the
 * Bun.serve path.
 */
import { X509Certificate } from 'node:crypto';
import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createSecureContext, createServer as createTlsServer, type PeerCertificate, type TLSSocket } from 'node:tls';
import type { PeerChain, ServingCertificate } from '../types.ts';

export interface ClientCertListener {
  port: number;
  stop(): Promise<void>;
}

type Fetch = (request: Request, env: { peerChain: PeerChain; clientAddress?: string }) => Response | Promise<Response>;

export async function listenWithClientCertificates(opts: {
  hostname: string;
  port: number;
  certificates: ServingCertificate[];
  /** The CAs clients are asked for (both authenticators'); a certificate is never required. */
  clientCaPem: string[];
  fetch: Fetch;
}): Promise<ClientCertListener> {
  const [base, ...named] = opts.certificates;
  if (!base) throw new Error('no serving certificate');
  const contextOptions = (c: ServingCertificate) => ({
    cert: c.cert,
    key: c.key,
    ca: opts.clientCaPem,
    ...(c.ciphers ? { ciphers: c.ciphers } : {}),
    ...(c.secureOptions ? { secureOptions: c.secureOptions } : {}),
  });
  const contexts = named.map((c) => ({ name: c.serverName ?? '', context: createSecureContext(contextOptions(c)) }));
  const http = createHttpServer((req, res) => void handle(req, res, opts.fetch));
  const tls = createTlsServer({
    ...contextOptions(base),
    requestCert: true,
    rejectUnauthorized: false,
    SNICallback: (servername, cb) => cb(null, sniContext(contexts, servername)),
  }, (socket) => http.emit('connection', socket));
  await new Promise<void>((resolve, reject) => {
    tls.once('error', reject);
    tls.listen(opts.port, opts.hostname, () => resolve());
  });
  const address = tls.address();
  return {
    port: typeof address === 'object' && address ? address.port : 0,
    stop: () => new Promise<void>((resolve) => {
      http.closeAllConnections?.();
      tls.close(() => resolve());
    }),
  };
}

/** An exact name first, then a `*.` wildcard one label up, as apiserver's SNI lookup. */
function sniContext(contexts: { name: string; context: ReturnType<typeof createSecureContext> }[], servername: string) {
  const name = servername.toLowerCase();
  const exact = contexts.find((c) => c.name.toLowerCase() === name);
  if (exact) return exact.context;
  const dot = name.indexOf('.');
  const wildcard = dot > 0 ? `*${name.slice(dot)}` : undefined;
  return contexts.find((c) => c.name.toLowerCase() === wildcard)?.context;
}

async function handle(req: IncomingMessage, res: ServerResponse, fetch: Fetch): Promise<void> {
  const socket = req.socket as TLSSocket;
  try {
    const headers = new Headers();
    for (let i = 0; i < req.rawHeaders.length; i += 2) headers.append(req.rawHeaders[i]!, req.rawHeaders[i + 1]!);
    const method = req.method ?? 'GET';
    const body = method === 'GET' || method === 'HEAD' ? undefined : await readBody(req);
    const request = new Request(`https://${headers.get('host') ?? 'localhost'}${req.url ?? '/'}`, { method, headers, body });
    const response = await fetch(request, { peerChain: peerChain(socket), clientAddress: socket.remoteAddress });
    res.writeHead(response.status, Object.fromEntries(response.headers));
    res.end(Buffer.from(await response.arrayBuffer()));
  } catch {
    if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' });
    res.end('internal server error\n');
  }
}

/** The endpoints take no request bodies worth more than this; a larger one is refused, not buffered. */
const MAX_BODY_BYTES = 1 << 20;

async function readBody(req: IncomingMessage): Promise<Uint8Array> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES) throw new Error('request body too large');
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

/** The client's certificates, leaf first, as sent (verification is the authenticators' job). */
function peerChain(socket: TLSSocket): PeerChain {
  const out: X509Certificate[] = [];
  let cert = socket.getPeerCertificate(true) as PeerCertificate & { issuerCertificate?: PeerCertificate };
  const seen = new Set<string>();
  while (cert?.raw && !seen.has(cert.fingerprint256)) {
    seen.add(cert.fingerprint256);
    out.push(new X509Certificate(cert.raw));
    cert = cert.issuerCertificate as typeof cert;
  }
  return out;
}
