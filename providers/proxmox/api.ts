import { TokenBucket } from '../../src/util/token-bucket.ts';
import { Backoff, type BackoffBounds } from '../../src/util/backoff.ts';
import { silentLogger, type Logger } from '../../src/log.ts';
import { authenticatorFor, type ProxmoxAuthenticator, type Ticket } from './auth.ts';
import type { ProxmoxCluster } from './config-model.ts';
import type { ApiMetrics } from './metrics.ts';
import { TlsTrust } from './tls.ts';

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
  private readonly trust: TlsTrust;
  private readonly auth: ProxmoxAuthenticator;
  private readonly logger: Logger;
  private readonly now: () => number;
  private readonly backoff: Backoff;
  private backoffUntil = 0;

  constructor(readonly cluster: ProxmoxCluster, private readonly opts: ProxmoxApiOptions = {}) {
    this.now = opts.now ?? (() => performance.now());
    this.bucket = new TokenBucket(cluster.qps, cluster.burst, this.now);
    this.trust = new TlsTrust(cluster.tls, cluster.url, cluster.timeoutMs);
    this.auth = authenticatorFor(cluster.auth, () => this.login(), this.now);
    this.logger = opts.logger ?? silentLogger;
    this.backoff = Backoff.doubling(opts.backoff ?? { initialMs: INITIAL_BACKOFF_MS, maxMs: Math.max(INITIAL_BACKOFF_MS, cluster.maxBackoffMs) });
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
    return this.now() < this.backoffUntil;
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
    const left = this.backoffUntil - this.now();
    if (left > 0) throw new ProxmoxApiError(`backing off after API errors (${Math.ceil(left)}ms left)`);
  }

  /** One HTTP exchange with timing, TLS and the timeout; network failures become ProxmoxApiError. */
  private async send(request: RequestName, method: string, path: string, headers: Record<string, string>, body: string | undefined, signal?: AbortSignal): Promise<Response> {
    const timeout = AbortSignal.timeout(this.cluster.timeoutMs);
    const both = signal ? AbortSignal.any([signal, timeout]) : timeout;
    const started = performance.now();
    try {
      const res = await fetch(`${this.cluster.url}/api2/json${path}`, {
        method,
        headers: { accept: 'application/json', ...headers },
        body,
        signal: both,
        redirect: 'manual',
        tls: await this.trust.options(),
      });
      this.opts.metrics?.()?.observe(request, (performance.now() - started) / 1000);
      return res;
    } catch (e) {
      this.opts.metrics?.()?.observe(request, (performance.now() - started) / 1000);
      this.opts.metrics?.()?.error(request);
      if (signal?.aborted && !timeout.aborted) throw e; // the caller gave up: says nothing about the API
      if (isTlsError(e)) this.trust.forget();
      const message = timeout.aborted ? `no answer within ${this.cluster.timeoutMs}ms` : (e as Error).message;
      this.startBackoff(undefined);
      throw new ProxmoxApiError(`${method} ${path}: ${message}`);
    }
  }

  private async data<T>(request: RequestName, res: Response): Promise<T> {
    if (res.ok) {
      try {
        const parsed = (await res.json()) as { data?: unknown };
        this.backoff.reset();
        return parsed.data as T;
      } catch (e) {
        this.opts.metrics?.()?.error(request);
        throw new ProxmoxApiError(`${request}: the answer is not JSON: ${(e as Error).message}`, res.status);
      }
    }
    const reason = await errorReason(res);
    this.opts.metrics?.()?.error(request);
    const agentNotRunning = request === REQUEST.guestAgentInterfaces && res.status === 500;
    if (res.status === 429 || (res.status >= 500 && !agentNotRunning)) this.startBackoff(res.headers.get('retry-after'));
    throw new ProxmoxApiError(`${request}: HTTP ${res.status}${reason ? `: ${reason}` : ''}`, res.status);
  }

  private startBackoff(retryAfter: string | null | undefined): void {
    const delay = this.backoff.next();
    const serverSays = retryAfter && /^\d+$/.test(retryAfter) ? Number(retryAfter) * 1000 : 0;
    const wait = Math.min(Math.max(delay, serverSays), this.backoff.maxMs);
    this.backoffUntil = this.now() + wait;
    this.logger.warn('proxmox API errors: backing off', { cluster: this.cluster.region, backoffMs: wait });
  }
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

function isTlsError(e: unknown): boolean {
  const text = `${(e as { code?: string }).code ?? ''} ${(e as Error).message ?? ''}`;
  return /CERT|TLS|SSL|self.signed|fingerprint/i.test(text);
}

