import { request } from 'node:https';

/**
 * A flood of requests with random bearer tokens against edge-ccm's serving port, and one
 * request sent from another loopback address (127.0.0.2) while it runs: what the auth-flood
 * test and `scripts/bench-auth-flood` measure. Certificates are not checked (the process
 * serves a self-signed one).
 */

export interface FloodOptions {
  /** e.g. https://127.0.0.1:PORT/metrics */
  url: string;
  /** Requests to send at least. */
  total: number;
  /** Requests kept in flight at once. */
  concurrency: number;
}

/** Random-token requests from the default source address (127.0.0.1), `concurrency` at a time. */
export class Flood {
  /** Responses per HTTP status (0: the connection failed). */
  readonly statuses: Record<number, number> = {};
  sent = 0;
  answered = 0;
  private readonly done: Promise<void>;
  private until?: Promise<unknown>;
  private untilSettled = false;

  constructor(private readonly opts: FloodOptions) {
    this.done = Promise.all(Array.from({ length: opts.concurrency }, () => this.worker())).then(() => {});
  }

  /** Goes on past `total` until `until` settles, so that what it waits for runs during the flood. */
  extendUntil(until: Promise<unknown>): void {
    this.until = until;
    void until.then(() => (this.untilSettled = true), () => (this.untilSettled = true));
  }

  /** The number of requests still in flight. */
  get inFlight(): number {
    return this.sent - this.answered;
  }

  finished(): Promise<void> {
    return this.done;
  }

  private async worker(): Promise<void> {
    while (this.sent < this.opts.total || (this.until && !this.untilSettled)) {
      this.sent++;
      const status = await fetch(this.opts.url, {
        headers: { authorization: `Bearer ${randomToken()}` },
        tls: { rejectUnauthorized: false },
      }).then(async (res) => {
        await res.arrayBuffer();
        return res.status;
      }, () => 0);
      this.answered++;
      this.statuses[status] = (this.statuses[status] ?? 0) + 1;
    }
  }
}

/** A token shaped like a service-account JWT, random, so that no two are alike and none is valid. */
function randomToken(): string {
  const part = (n: number) => Buffer.from(crypto.getRandomValues(new Uint8Array(n))).toString('base64url');
  return `${part(36)}.${part(300)}.${part(256)}`;
}

/**
 * GET `url` with a bearer token from another source address (127.0.0.2: a different client than
 * the flood's 127.0.0.1), on a connection of its own. Resolves with the status and how long the
 * answer took.
 */
export function requestFrom(localAddress: string, url: string, token: string): Promise<{ status: number; ms: number }> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const req = request(url, { localAddress, headers: { authorization: `Bearer ${token}` }, rejectUnauthorized: false, agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode ?? 0, ms: performance.now() - started }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}
