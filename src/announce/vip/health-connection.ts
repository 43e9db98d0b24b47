import type { Socket } from 'bun';
import { errorMessage } from '../../util/errors.ts';

/**
 * One kept-alive connection to the health URL, speaking just enough HTTP/1.1 for a GET whose
 * status is all that counts. Why not fetch (issue 38): at one check every 250 ms, fetch cost
 * 0.4-0.6 ms of CPU a check (bench/vip-health-check-cost.ts), most of it its hand-off to Bun's
 * "HTTP Client" thread and back (two more thread wake-ups a check) and its Request, Headers,
 * Response and body objects; a socket of our own on the event loop costs about 30% less and
 * allocates only the response's text. TLS is Bun's (Bun.connect): the same verification, names
 * and error codes as fetch's (UNABLE_TO_VERIFY_LEAF_SIGNATURE, ERR_TLS_CERT_ALTNAME_INVALID...).
 *
 * The body is read to its end (Content-Length or chunked) so the connection serves the next
 * check; a response that cannot be delimited (no length, HTTP/1.0, `Connection: close`, larger
 * than MAX_RESPONSE) gives its status and the connection is closed: the next check opens another.
 * A reused connection the server closed meanwhile (its idle timeout) is retried once on a new
 * one, as HTTP clients do. The caller's timeout closes the connection (a hung server's is dead).
 * The server closing an idle connection is told (onIdleClose): a kube-apiserver killed closes it
 * at once, so its death is known without waiting for the next check.
 */

/** How each check connects: TLS settings as Bun's TLS takes them, and headers (a bearer token). */
export interface HealthRequest {
  tls: { rejectUnauthorized: boolean; ca?: string; serverName?: string; cert?: string; key?: string };
  headers: Record<string, string>;
}

export const ANONYMOUS_UNVERIFIED: HealthRequest = { tls: { rejectUnauthorized: false }, headers: {} };

const MAX_RESPONSE = 64 * 1024;
const CLOSED = 'the connection closed before a response';

/** What a response buffer holds so far: undefined while incomplete. */
interface Parsed {
  status: string;
  /** The connection may serve the next request. */
  keepAlive: boolean;
}

export class HealthConnection {
  private readonly hostname: string;
  private readonly port: number;
  private readonly tls: boolean;
  private readonly requestText: string;
  private socket?: Socket<undefined>;
  /** The connection being opened: one at a time (a check that timed out leaves it to the next). */
  private opening?: Promise<Socket<undefined> | string>;
  /** Its socket, connected but before its TLS handshake: closed by close() (a server that accepts and never shakes hands). */
  private handshaking?: Socket<undefined>;
  /** The exchange waiting for its response: resolved by the socket's handlers. */
  private waiting?: (outcome: string) => void;
  private received = '';

  /**
   * `onIdleClose`: the server closed the connection while no check was waiting (killed,
   * restarted, or its idle timeout): the caller may check at once instead of at its next interval.
   */
  constructor(url: string, private readonly request: HealthRequest, private readonly onIdleClose?: () => void) {
    const u = new URL(url);
    this.tls = u.protocol === 'https:';
    this.hostname = u.hostname.replace(/^\[(.*)\]$/, '$1');
    this.port = u.port ? Number(u.port) : this.tls ? 443 : 80;
    const headers = Object.entries(request.headers).map(([name, value]) => `${name}: ${value}\r\n`).join('');
    this.requestText = `GET ${u.pathname}${u.search} HTTP/1.1\r\nHost: ${u.host}\r\nUser-Agent: edge-ccm-vip\r\nAccept: */*\r\n${headers}\r\n`;
  }

  /** The status as text ("200"), "timeout after N ms", or the error in one line. */
  async check(timeoutMs: number): Promise<string> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timedOut = new Promise<undefined>((resolve) => {
      timer = setTimeout(() => resolve(undefined), timeoutMs);
    });
    try {
      const outcome = await Promise.race([this.exchange(), timedOut]);
      if (outcome !== undefined) return outcome;
      this.close();
      return `timeout after ${timeoutMs} ms`;
    } finally {
      clearTimeout(timer);
    }
  }

  close(): void {
    const socket = this.socket;
    this.socket = undefined;
    socket?.terminate();
    const handshaking = this.handshaking;
    this.handshaking = undefined;
    handshaking?.terminate();
    this.settle(CLOSED);
  }

  private async exchange(): Promise<string> {
    const reused = this.socket !== undefined;
    const outcome = await this.once();
    // Closed by the server while idle (and we had not heard yet): once more, on a new connection.
    if (outcome === CLOSED && reused) return this.once();
    return outcome;
  }

  private async once(): Promise<string> {
    let opened: Socket<undefined> | string | undefined = this.socket;
    if (!opened) {
      this.opening ??= this.connect().finally(() => {
        this.opening = undefined;
      });
      opened = await this.opening;
    }
    if (typeof opened === 'string') return opened;
    return new Promise<string>((resolve) => {
      this.waiting = resolve;
      this.received = '';
      opened.write(this.requestText);
    });
  }

  /** A new connection, TLS handshake done and the certificate verified as the request says; or the error. */
  private connect(): Promise<Socket<undefined> | string> {
    return new Promise((resolve) => {
      let settled = false;
      const settle = (result: Socket<undefined> | string) => {
        this.handshaking = undefined;
        if (settled) return false;
        settled = true;
        resolve(result);
        return true;
      };
      const done = (socket: Socket<undefined>) => {
        if (!settle(socket)) return;
        this.socket = socket;
        socket.unref();
      };
      // Told first: ending the socket runs its close handler at once.
      const failed = (socket: Socket<undefined> | undefined, outcome: string) => {
        settle(outcome);
        socket?.terminate();
      };
      const { tls } = this.request;
      Bun.connect({
        hostname: this.hostname,
        port: this.port,
        ...(this.tls ? { tls: { rejectUnauthorized: tls.rejectUnauthorized, ca: tls.ca, cert: tls.cert, key: tls.key, serverName: tls.serverName } } : {}),
        socket: {
          open: (socket) => {
            if (this.tls) this.handshaking = socket;
            else done(socket);
          },
          handshake: (socket, verified, error) => {
            if (verified || !tls.rejectUnauthorized) done(socket);
            else failed(socket, oneLine(error));
          },
          data: (socket, data) => {
            if (socket === this.socket) this.receive(socket, data);
          },
          close: (socket) => {
            settle(CLOSED);
            if (socket !== this.socket) return;
            this.socket = undefined;
            if (this.waiting) this.settle(CLOSED);
            else this.onIdleClose?.();
          },
          error: (socket, error) => failed(socket, oneLine(error)),
          connectError: (socket, error) => failed(socket, oneLine(error)),
        },
      }).catch((e) => settle(oneLine(e)));
    });
  }

  private receive(socket: Socket<undefined>, data: Buffer): void {
    if (!this.waiting) {
      // Nothing asked (a late answer after a timeout, or a server talking out of turn): not ours to read.
      this.close();
      return;
    }
    this.received += data.toString('latin1');
    const parsed = parseResponse(this.received);
    if (!parsed) return;
    if (!parsed.keepAlive && socket === this.socket) {
      this.socket = undefined;
      socket.end();
    }
    this.settle(parsed.status);
  }

  private settle(outcome: string): void {
    const waiting = this.waiting;
    this.waiting = undefined;
    this.received = '';
    waiting?.(outcome);
  }
}

const CONNECTION = /\r\nconnection:[ \t]*([^\r]*)/i;
const TRANSFER_ENCODING = /\r\ntransfer-encoding:[ \t]*([^\r]*)/i;
const CONTENT_LENGTH = /\r\ncontent-length:[ \t]*([^\r]*)/i;

/**
 * The response's status once it can be told, and whether its connection serves another request:
 * undefined while the head, or a body that keeps the connection, has not fully arrived.
 * Interim (1xx) responses are skipped.
 */
export function parseResponse(text: string): Parsed | undefined {
  let at = 0;
  for (;;) {
    const headEnd = text.indexOf('\r\n\r\n', at);
    if (headEnd < 0) return text.length > MAX_RESPONSE ? { status: 'a response head longer than 64 KiB', keepAlive: false } : undefined;
    const head = text.slice(at, headEnd);
    const statusLine = /^HTTP\/1\.([01]) (\d{3})/.exec(head);
    if (!statusLine) return { status: `not an HTTP/1 response: ${JSON.stringify(head.slice(0, 40))}`, keepAlive: false };
    const status = statusLine[2]!;
    const bodyAt = headEnd + 4;
    if (status.startsWith('1')) {
      at = bodyAt;
      continue;
    }
    const header = (pattern: RegExp) => pattern.exec(head)?.[1]?.trim().toLowerCase();
    const persistent = statusLine[1] === '1' && header(CONNECTION) !== 'close';
    const done = (keepAlive: boolean): Parsed => ({ status, keepAlive: persistent && keepAlive });
    if (status === '204' || status === '304') return done(true);
    if (header(TRANSFER_ENCODING)?.endsWith('chunked')) {
      const end = chunkedEnd(text, bodyAt);
      if (end === 'bad') return done(false);
      if (end === undefined) return text.length > MAX_RESPONSE ? done(false) : undefined;
      return done(true);
    }
    const length = header(CONTENT_LENGTH);
    if (length === undefined || !/^\d+$/.test(length) || Number(length) > MAX_RESPONSE) return done(false);
    return text.length - bodyAt >= Number(length) ? done(true) : undefined;
  }
}

/** Where a chunked body ends (after its last chunk and trailers), undefined while incomplete, 'bad' when it is not chunked encoding. */
function chunkedEnd(text: string, from: number): number | undefined | 'bad' {
  let at = from;
  for (;;) {
    const lineEnd = text.indexOf('\r\n', at);
    if (lineEnd < 0) return undefined;
    const size = /^([0-9a-fA-F]{1,8})(;.*)?$/.exec(text.slice(at, lineEnd));
    if (!size) return 'bad';
    const n = parseInt(size[1]!, 16);
    if (n === 0) {
      // The last chunk, any trailers, then an empty line.
      const end = text.indexOf('\r\n\r\n', lineEnd);
      return end < 0 ? undefined : end + 4;
    }
    at = lineEnd + 2 + n + 2;
    if (at > text.length) return undefined;
  }
}

/** An error in one line: its code and message ("ECONNREFUSED: ...", "UNABLE_TO_VERIFY_LEAF_SIGNATURE: ..."). */
function oneLine(e: unknown): string {
  const message = errorMessage(e).replace(/\s+/g, ' ').trim();
  const code = (e as { code?: unknown } | undefined)?.code;
  return typeof code === 'string' && !message.startsWith(code) ? `${code}: ${message}` : message;
}
