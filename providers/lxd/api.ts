import { Backoff, type BackoffBounds } from '../../src/util/backoff.ts';
import { silentLogger, type Logger } from '../../src/log.ts';
import { PinnedTlsTrust } from '../../src/http-api/pinned-tls.ts';
import { BackoffGate, exchange } from '../../src/http-api/exchange.ts';
import type { LxdConfig } from './config-model.ts';
import type { ApiMetrics } from './metrics.ts';

/**
 * A read-only client of the LXD (or Incus: the same REST shape) API, over the unix socket or
 * HTTPS with a client certificate: a timeout per request and back-off (after a 5xx, a timeout or
 * a refused connection every request fails at once until it has passed, doubling from 1 s to
 * maxBackoffSeconds), so a daemon in trouble is not hammered and callers answer "unknown" fast.
 * LXD answers {type: sync, status_code, metadata} or {type: error, error_code, error}.
 */

export const REQUEST = { server: 'server', instances: 'instances', instance: 'instance', clusterMembers: 'cluster_members' } as const;
export type RequestName = (typeof REQUEST)[keyof typeof REQUEST];

export class LxdApiError extends Error {
  constructor(message: string, readonly status?: number) {
    super(message);
    this.name = 'LxdApiError';
  }
}

export interface LxdApiOptions {
  logger?: Logger;
  metrics?: () => ApiMetrics | undefined;
  backoff?: BackoffBounds;
  now?: () => number;
}

type Settings = Pick<LxdConfig, 'endpoint' | 'timeoutMs' | 'maxBackoffMs'>;

export class LxdApi {
  private readonly trust?: PinnedTlsTrust;
  private readonly base: string;
  private readonly gate: BackoffGate;

  constructor(readonly settings: Settings, private readonly opts: LxdApiOptions = {}) {
    const { endpoint } = settings;
    this.base = endpoint.kind === 'unix' ? 'http://lxd' : endpoint.url;
    if (endpoint.kind === 'https') {
      const { url, clientCert: cert, clientKey: key, ca, fingerprint } = endpoint;
      // LXD's own certificate is self-signed but neither a CA nor marked keyCertSign.
      this.trust = new PinnedTlsTrust({ url, defaultPort: 8443, timeoutMs: settings.timeoutMs, ca, fingerprint, cert, key, topMustBeIssuer: false, noAnchorHint: 'the server certificate is not self-signed; set caFile' });
    }
    const logger = opts.logger ?? silentLogger;
    const backoff = Backoff.doubling(opts.backoff ?? { initialMs: 1000, maxMs: Math.max(1000, settings.maxBackoffMs) });
    this.gate = new BackoffGate(backoff, opts.now ?? (() => performance.now()), (backoffMs) => logger.warn('LXD API errors: backing off', { endpoint: this.where, backoffMs }));
  }

  /** Where requests go, for messages: the socket path or the URL. */
  get where(): string {
    const e = this.settings.endpoint;
    return e.kind === 'unix' ? e.socket : e.url;
  }

  /** GET PATH (with query) and its `metadata`; throws LxdApiError for anything but a sync answer. */
  async get<T>(request: RequestName, path: string, signal?: AbortSignal): Promise<T> {
    const left = this.gate.left();
    if (left > 0) throw new LxdApiError(`backing off after API errors (${Math.ceil(left)}ms left)`);
    const res = await this.send(request, path, signal);
    let body: { type?: unknown; metadata?: unknown; error?: unknown } | undefined;
    try {
      body = (await res.json()) as typeof body;
    } catch {
      body = undefined;
    }
    if (res.ok && body?.type === 'sync') {
      this.gate.reset();
      return body.metadata as T;
    }
    this.opts.metrics?.()?.error(request);
    if (res.status >= 500 || (res.ok && body?.type !== 'sync')) this.gate.start();
    const reason = typeof body?.error === 'string' && body.error ? body.error : res.statusText;
    throw new LxdApiError(`GET ${path}: HTTP ${res.status}${reason ? `: ${reason}` : ''}${explain(res.status, this.settings.endpoint.kind)}`, res.status);
  }

  private send(request: RequestName, path: string, signal?: AbortSignal): Promise<Response> {
    const endpoint = this.settings.endpoint;
    const init: BunFetchRequestInit = { headers: { accept: 'application/json' }, ...(endpoint.kind === 'unix' ? { unix: endpoint.socket } : {}) };
    return exchange(`${this.base}${path}`, init, {
      request, timeoutMs: this.settings.timeoutMs, signal, metrics: this.opts.metrics, trust: this.trust, gate: this.gate,
      failure: (reason) => new LxdApiError(`GET ${path} at ${this.where}: ${reason}`),
    });
  }
}

/** What an operator does about the answers that mean "not trusted". */
function explain(status: number, kind: 'unix' | 'https'): string {
  if (status !== 403) return '';
  return kind === 'https'
    ? ' (the server does not trust the client certificate: add it with `lxc config trust add CERT` or a trust token, see docs/providers/lxd.md)'
    : ' (the unix socket refused this user: it must be root or in the lxd group)';
}
