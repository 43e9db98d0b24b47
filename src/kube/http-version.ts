/**
 * Which HTTP version the transport asks the API server for: HTTP/2, as client-go does, unless
 * the operator sets DISABLE_HTTP2 (client-go's own switch, any non-empty value) or the server
 * does not select h2.
 *
 * Why HTTP/2 by default: it is what client-go speaks, one connection per client instead of one
 * per request in flight, and in a 5000-node burst side by side it cost the API server and
 * edge-ccm a little less CPU than HTTP/1.1 (medians 30.5 against 32.1 and 4.7 against 5.2 CPU-s,
 * BENCHMARKS.md run 8), for 3 MiB more at the peak.
 * Bun's fetch offers h2 in ALPN only when its experimental client flag is on; per request,
 * `protocol: 'http2'` offers h2 alone and fails with HTTP2Unsupported when the server does not
 * select it. That failure comes from the TLS handshake, before any byte of the request is sent,
 * so the request is sent again over HTTP/1.1 (even a POST: nothing reached the server) and the
 * transport stays on HTTP/1.1 from then on. Plain-http servers get HTTP/1.1: Bun has no h2c.
 *
 * The health check client-go has for HTTP/2 (a PING after 30 s of silence, the connection
 * closed when 15 s pass without its answer) Bun's fetch has not: a pooled h2 connection that
 * stops answering (an API server VIP moved without a reset, a hung peer) keeps getting every
 * request, each aborted only by its own timeout (measured with a relay that silences the
 * connection: HTTP/1.1 closes the connection of an aborted request and the next one opens a new
 * one, HTTP/2 only resets the stream; http-version.test.ts pins the recovery). So a request
 * sent as HTTP/2 that times out unanswered moves the client to HTTP/1.1, and it comes back to
 * HTTP/2 once a probe over HTTP/2 is answered (the transport sends one every 30 s meanwhile).
 */

import type { Logger } from '../log.ts';

export type HttpProtocol = 'http2' | 'http1.1';

/** Why this client speaks the version it does: told once, when it settles. */
export type HttpVersionReason = 'default' | 'DISABLE_HTTP2' | 'plain http' | 'server did not select h2' | 'an HTTP/2 request went unanswered';

export class HttpVersionChoice {
  // One state: the version follows from the reason.
  private why: HttpVersionReason;

  constructor(server: string, env: Record<string, string | undefined> = process.env) {
    if (!server.startsWith('https:')) this.why = 'plain http'; // Bun's `protocol` requires https
    else if (env.DISABLE_HTTP2) this.why = 'DISABLE_HTTP2'; // also overrides Bun's own experimental flag, if set
    else this.why = 'default';
  }

  get reason(): HttpVersionReason {
    return this.why;
  }

  /** The value for fetch's `protocol` option; undefined lets Bun choose (plain http: HTTP/1.1). */
  get protocol(): HttpProtocol | undefined {
    if (this.why === 'plain http') return undefined;
    return this.why === 'default' ? 'http2' : 'http1.1';
  }

  /**
   * True when `error` is the server's refusal of h2 for a request sent with `sentWith`: the
   * choice is now HTTP/1.1 and the caller sends the request again. The first such refusal
   * returns 'switched' (for the one log line), later ones (concurrent requests) 'again'.
   */
  refused(error: unknown, sentWith: HttpProtocol | undefined): 'switched' | 'again' | false {
    if (sentWith !== 'http2' || (error as { code?: unknown } | null)?.code !== 'HTTP2Unsupported') return false;
    if (this.protocol !== 'http2') return 'again';
    this.why = 'server did not select h2';
    return 'switched';
  }

  /**
   * A request sent as HTTP/2 timed out before its answer came: HTTP/1.1 until answered() says a
   * probe over HTTP/2 got through. True when this switched (the caller starts probing); false
   * when already on HTTP/1.1 or the request was not HTTP/2.
   */
  unanswered(sentWith: HttpProtocol | undefined): boolean {
    if (sentWith !== 'http2' || this.protocol !== 'http2') return false;
    this.why = 'an HTTP/2 request went unanswered';
    return true;
  }

  /** A probe over HTTP/2 was answered: back to HTTP/2 (only from the unanswered state). */
  answered(): void {
    if (this.why === 'an HTTP/2 request went unanswered') this.why = 'default';
  }
}

/** What the transport tells about its HTTP version as it changes. */
export type HttpVersionChange =
  | { change: 'h2 refused'; server: string; userAgent?: string }
  | { change: 'h2 unanswered'; server: string; userAgent?: string }
  | { change: 'h2 answers again'; server: string; userAgent?: string };

/** The transport option that logs each change: a refusal once per client, an unanswered h2 connection each time. */
export function logHttpVersionChange(logger: Logger): (info: HttpVersionChange) => void {
  return ({ change, server, userAgent }) => {
    const fields = { server, client: userAgent };
    if (change === 'h2 refused') logger.info('the API server did not select HTTP/2 (ALPN h2); this client goes on over HTTP/1.1', fields);
    else if (change === 'h2 unanswered') logger.warn('a request over HTTP/2 went unanswered; this client goes on over HTTP/1.1 and probes HTTP/2 every 30 s', fields);
    else logger.info('HTTP/2 to the API server answers again; this client is back on HTTP/2', fields);
  };
}

/** client-go's start-up line when DISABLE_HTTP2 is set, for the operator who set it. */
export function logHttpVersionAtStart(logger: Logger, env: Record<string, string | undefined> = process.env): void {
  if (env.DISABLE_HTTP2) logger.info('HTTP/2 to the API server explicitly disabled (DISABLE_HTTP2 is set): HTTP/1.1');
}
