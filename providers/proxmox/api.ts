import { TokenBucket } from '../../src/util/token-bucket.ts';
import { Backoff, type BackoffBounds } from '../../src/util/backoff.ts';
import { silentLogger, type Logger } from '../../src/log.ts';
import { PinnedTlsTrust } from '../../src/http-api/pinned-tls.ts';
import { BackoffGate, exchange } from '../../src/http-api/exchange.ts';
import { authenticatorFor, type ProxmoxAuthenticator, type Ticket } from './auth.ts';
import type { ProxmoxCluster } from './config-model.ts';
import type { ApiMetrics } from './metrics.ts';

/**
 * A read-only client for one Proxmox VE cluster's API (/api2/json): authentication, TLS trust,
 * a token bucket, a timeout per request, and back-off. After a 429, a 5xx (596 is pveproxy's
 * "could not reach the other node"), a timeout or a refused connection, every request fails at
 * once until the back-off has passed (doubling from 1 s to maxBackoffSeconds, default 30 s, or
 * the server's Retry-After within that bound),
 * so an API in trouble is not hammered and callers answer "unknown" fast. A 500 from the guest
 * agent is Proxmox saying the agent is not running: an answer about one VM, no back-off.
 */

/** The `request` label of the metrics. */
export const REQUEST = {
  clusterResources: 'cluster_resources',
  haResources: 'ha_resources',
  vmConfig: 'vm_config',
  guestAgentInterfaces: 'guest_agent_network_interfaces',
  accessTicket: 'access_ticket',
} as const;
export type RequestName = (typeof REQUEST)[keyof typeof REQUEST];

export class ProxmoxApiError extends Error {
  constructor(message: string, readonly status?: number) {
    super(message);
    this.name = 'ProxmoxApiError';
  }
}

const INITIAL_BACKOFF_MS = 1_000;

export interface ProxmoxApiOptions {
  logger?: Logger;
  /** Read on every request, so metrics registered after construction (initialize) are used. */
  metrics?: () => ApiMetrics | undefined;
  /** Default: 1 s doubling up to the cluster's maxBackoffSeconds. */
  backoff?: BackoffBounds;
  now?: () => number;
}

export class ProxmoxApi {
  private readonly bucket: TokenBucket;
  private readonly trust: PinnedTlsTrust;
  private readonly auth: ProxmoxAuthenticator;
  private readonly logger: Logger;
  private readonly now: () => number;
  private readonly gate: BackoffGate;

  constructor(readonly cluster: ProxmoxCluster, private readonly opts: ProxmoxApiOptions = {}) {
    this.now = opts.now ?? (() => performance.now());
    this.bucket = new TokenBucket(cluster.qps, cluster.burst, this.now);
    this.trust = new PinnedTlsTrust({
      ...cluster.tls,
      url: cluster.url,
      defaultPort: 443,
      timeoutMs: cluster.timeoutMs,
      topMustBeIssuer: true,
      // A leaf signed by a CA the server does not send (the Proxmox default pve-ssl.pem) cannot be pinned alone.
      noAnchorHint: 'the server presents neither a self-signed certificate nor its CA; set caFile (e.g. /etc/pve/pve-root-ca.pem)',
    });
    this.auth = authenticatorFor(cluster.auth, () => this.login(), this.now);
    this.logger = opts.logger ?? silentLogger;
    const backoff = Backoff.doubling(opts.backoff ?? { initialMs: INITIAL_BACKOFF_MS, maxMs: Math.max(INITIAL_BACKOFF_MS, cluster.maxBackoffMs) });
    this.gate = new BackoffGate(backoff, this.now, (backoffMs) => this.logger.warn('proxmox API errors: backing off', { cluster: this.cluster.region, backoffMs }));
  }

  /** GET /api2/json/PATH and its `data`; throws ProxmoxApiError for anything but an answer. */
  async get<T>(request: RequestName, path: string, signal?: AbortSignal): Promise<T> {
    this.checkBackoff();
    await this.bucket.take(signal);
    let res = await this.send(request, 'GET', path, await this.auth.headers(), undefined, signal);
    if (res.status === 401 && this.auth.refused()) {
      await res.arrayBuffer();
      this.logger.info('proxmox ticket refused; logging in again', { cluster: this.cluster.region });
      res = await this.send(request, 'GET', path, await this.auth.headers(), undefined, signal);
    }
    return this.data<T>(request, res);
  }

  /** Whether requests are being refused for now after errors (for logs and tests). */
  get backingOff(): boolean {
    return this.gate.left() > 0;
  }

  private async login(): Promise<Ticket> {
    const auth = this.cluster.auth;
    if (auth.kind !== 'password') throw new Error('login without a password');
    this.checkBackoff();
    await this.bucket.take();
    const body = new URLSearchParams({ username: auth.username, password: auth.password });
    const res = await this.send(REQUEST.accessTicket, 'POST', '/access/ticket', { 'content-type': 'application/x-www-form-urlencoded' }, body.toString());
    const data = await this.data<{ ticket?: unknown; CSRFPreventionToken?: unknown }>(REQUEST.accessTicket, res);
    if (typeof data?.ticket !== 'string' || typeof data.CSRFPreventionToken !== 'string') {
      throw new ProxmoxApiError('access/ticket: the answer has no ticket');
    }
    return { ticket: data.ticket, csrfToken: data.CSRFPreventionToken };
  }

  private checkBackoff(): void {
    const left = this.gate.left();
    if (left > 0) throw new ProxmoxApiError(`backing off after API errors (${Math.ceil(left)}ms left)`);
  }

  /** One HTTP exchange with timing, TLS and the timeout; network failures become ProxmoxApiError. */
  private send(request: RequestName, method: string, path: string, headers: Record<string, string>, body: string | undefined, signal?: AbortSignal): Promise<Response> {
    return exchange(`${this.cluster.url}/api2/json${path}`, { method, headers: { accept: 'application/json', ...headers }, body }, {
      request, timeoutMs: this.cluster.timeoutMs, signal, metrics: this.opts.metrics, trust: this.trust, gate: this.gate,
      failure: (reason) => new ProxmoxApiError(`${method} ${path}: ${reason}`),
    });
  }

  private async data<T>(request: RequestName, res: Response): Promise<T> {
    if (res.ok) {
      try {
        const parsed = (await res.json()) as { data?: unknown };
        this.gate.reset();
        return parsed.data as T;
      } catch (e) {
        this.opts.metrics?.()?.error(request);
        throw new ProxmoxApiError(`${request}: the answer is not JSON: ${(e as Error).message}`, res.status);
      }
    }
    const reason = await errorReason(res);
    this.opts.metrics?.()?.error(request);
    const agentNotRunning = request === REQUEST.guestAgentInterfaces && res.status === 500;
    if (res.status === 429 || (res.status >= 500 && !agentNotRunning)) this.gate.start(retryAfterMs(res.headers.get('retry-after')));
    throw new ProxmoxApiError(`${request}: HTTP ${res.status}${reason ? `: ${reason}` : ''}`, res.status);
  }
}

/** Retry-After in seconds, as milliseconds; 0 when absent or a date. */
function retryAfterMs(header: string | null): number {
  return header && /^\d+$/.test(header) ? Number(header) * 1000 : 0;
}

/** pveproxy gives the reason in the status line and, in newer versions, as `message` in the body. */
async function errorReason(res: Response): Promise<string> {
  let message: unknown;
  try {
    message = ((await res.json()) as { message?: unknown } | null)?.message;
  } catch {
    // not JSON: the status line says it
  }
  return (typeof message === 'string' && message.trim()) || res.statusText;
}
