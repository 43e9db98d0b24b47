import type { Hono } from 'hono';
import { createServerApp, type ServerAppOptions } from './app.ts';
import type { ServerEnv } from './types.ts';
import { loadServingTls, type ServingTlsOptions } from './tls/serving.ts';
import { listenWithClientCertificates, type ClientCertListener } from './tls/client-cert-server.ts';

export interface ServerOptions extends ServerAppOptions, ServingTlsOptions {
  /** --secure-port; 0 turns serving off, as upstream. */
  securePort: number;
  /** --permit-port-sharing: SO_REUSEPORT, so several processes may bind the port. */
  permitPortSharing?: boolean;
  /** Listen on a port the kernel picks, whatever securePort says (tests only). */
  ephemeralPortForTests?: boolean;
}

export interface StartedServer {
  /** The port listened on; 0 when serving is off. */
  port: number;
  /** The CA of the in-memory self-signed certificate, when one was made (clients can trust it). */
  selfSignedCaPem?: string;
}

export interface CcmServer {
  app: Hono<ServerEnv>;
  start(): Promise<StartedServer>;
  /** Stops accepting connections and waits for requests in flight; safe to call twice. */
  stop(): Promise<void>;
}

/** The HTTPS endpoint of the process: always TLS, on Bun.serve. */
export function createServer(opts: ServerOptions): CcmServer {
  if (!Number.isInteger(opts.securePort) || opts.securePort < 0 || opts.securePort > 65535) {
    throw new Error(`--secure-port must be between 0 and 65535, got ${opts.securePort}`);
  }
  let server: ReturnType<typeof Bun.serve> | undefined;
  // The peer's address, for the per-client share of token reviews.
  let certListener: ClientCertListener | undefined;
  const app = createServerApp({ clientAddress: (c) => c.env?.clientAddress ?? server?.requestIP(c.req.raw)?.address, ...opts });
  const log = opts.logger;

  return {
    app,
    async start() {
      if (server || certListener) throw new Error('server already started');
      if (opts.securePort === 0 && !opts.ephemeralPortForTests) {
        log.info('secure serving is off (--secure-port=0)');
        return { port: 0 };
      }
      const tls = await loadServingTls(opts);
      for (const warning of tls.warnings) log.warn(warning);
      if (tls.selfSignedFiles) log.info(tls.selfSignedFiles.reused ? 'serving with the self-signed pair in --cert-dir' : 'wrote a self-signed pair to --cert-dir', tls.selfSignedFiles);
      if (opts.clientCertificates) {
        for (const line of opts.clientCertificates.leftOut) log.warn('a client CA certificate is left out: nobody authenticates through it', { certificate: line });
        // Client certificates authenticate: node:tls, which tells the request what its client sent.
        certListener = await listenWithClientCertificates({
          hostname: opts.bindAddress,
          port: opts.ephemeralPortForTests ? 0 : opts.securePort,
          certificates: tls.certificates,
          clientCaPem: opts.clientCertificates.acceptedCaPem,
          fetch: (request, env) => app.fetch(request, env),
        });
        log.info('serving securely', { address: opts.bindAddress, port: certListener.port, clientCertificates: true });
        return { port: certListener.port, ...(tls.selfSignedCaPem ? { selfSignedCaPem: tls.selfSignedCaPem } : {}) };
      }
      server = Bun.serve({
        hostname: opts.bindAddress,
        port: opts.ephemeralPortForTests ? 0 : opts.securePort,
        // One entry per certificate: the default first, then the --tls-sni-cert-key ones by server name.
        tls: tls.certificates.length === 1 ? tls.certificates[0] : tls.certificates,
        ...(opts.permitPortSharing ? { reusePort: true } : {}),
        fetch: app.fetch,
      });
      const port = server.port ?? 0;
      log.info('serving securely', {
        address: opts.bindAddress, port, certificate: tls.selfSignedCaPem ? 'self-signed' : opts.tlsCertFile,
      });
      return { port, ...(tls.selfSignedCaPem ? { selfSignedCaPem: tls.selfSignedCaPem } : {}) };
    },
    async stop() {
      const running = server;
      server = undefined;
      await running?.stop();
      const listener = certListener;
      certListener = undefined;
      await listener?.stop();
    },
  };
}
