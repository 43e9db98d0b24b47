import { Backoff, type BackoffBounds } from '../../src/util/backoff.ts';
import { silentLogger, type Logger } from '../../src/log.ts';
import type { LxdConfig } from './config-model.ts';
import type { ApiMetrics } from './metrics.ts';
import { LxdTlsTrust } from './tls.ts';

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
  private readonly trust?: LxdTlsTrust;
  private readonly base: string;
  private readonly logger: Logger;
  private readonly now: () => number;
  private readonly backoff: Backoff;
  private backoffUntil = 0;

  constructor(readonly settings: Settings, private readonly opts: LxdApiOptions = {}) {
    const { endpoint } = settings;
    this.base = endpoint.kind === 'unix' ? 'http://lxd' : endpoint.url;
    if (endpoint.kind === 'https') this.trust = new LxdTlsTrust(endpoint, settings.timeoutMs);
    this.logger = opts.logger ?? silentLogger;
    this.now = opts.now ?? (() => performance.now());
    this.backoff = Backoff.doubling(opts.backoff ?? { initialMs: 1000, maxMs: Math.max(1000, settings.maxBackoffMs) });
  }

  /** Where requests go, for messages: the socket path or the URL. */
  get where(): string {
    const e = this.settings.endpoint;
    return e.kind === 'unix' ? e.socket : e.url;
  }

  /** GET PATH (with query) and its `metadata`; throws LxdApiError for anything but a sync answer. */
  async get<T>(request: RequestName, path: string, signal?: AbortSignal): Promise<T> {
    const left = this.backoffUntil - this.now();
    if (left > 0) throw new LxdApiError(`backing off after API errors (${Math.ceil(left)}ms left)`);
    const res = await this.send(request, path, signal);
    let body: { type?: unknown; metadata?: unknown; error?: unknown } | undefined;
    try {
      body = (await res.json()) as typeof body;
    } catch {
      body = undefined;
    }
    if (res.ok && body?.type === 'sync') {
      this.backoff.reset();
      return body.metadata as T;
    }
    this.opts.metrics?.()?.error(request);
    if (res.status >= 500 || (res.ok && body?.type !== 'sync')) this.startBackoff();
    const reason = typeof body?.error === 'string' && body.error ? body.error : res.statusText;
    throw new LxdApiError(`GET ${path}: HTTP ${res.status}${reason ? `: ${reason}` : ''}${explain(res.status, this.settings.endpoint.kind)}`, res.status);
  }

  private async send(request: RequestName, path: string, signal?: AbortSignal): Promise<Response> {
    const timeout = AbortSignal.timeout(this.settings.timeoutMs);
    const both = signal ? AbortSignal.any([signal, timeout]) : timeout;
    const started = performance.now();
    const endpoint = this.settings.endpoint;
    try {
      const res = await fetch(`${this.base}${path}`, {
        headers: { accept: 'application/json' },
        signal: both,
        redirect: 'manual',
        ...(endpoint.kind === 'unix' ? { unix: endpoint.socket } : { tls: await this.trust!.options() }),
      });
      this.opts.metrics?.()?.observe(request, (performance.now() - started) / 1000);
      return res;
    } catch (e) {
      this.opts.metrics?.()?.observe(request, (performance.now() - started) / 1000);
      this.opts.metrics?.()?.error(request);
      if (signal?.aborted && !timeout.aborted) throw e; // the caller gave up: says nothing about the daemon
      const text = `${(e as { code?: string }).code ?? ''} ${(e as Error).message ?? ''}`;
      if (/CERT|TLS|SSL|self.signed|fingerprint/i.test(text)) this.trust?.forget();
      this.startBackoff();
      throw new LxdApiError(`GET ${path} at ${this.where}: ${timeout.aborted ? `no answer within ${this.settings.timeoutMs}ms` : (e as Error).message}`);
    }
  }

  private startBackoff(): void {
    const wait = Math.min(this.backoff.next(), this.backoff.maxMs);
    this.backoffUntil = this.now() + wait;
    this.logger.warn('LXD API errors: backing off', { endpoint: this.where, backoffMs: wait });
  }
}

/** What an operator does about the answers that mean "not trusted". */
function explain(status: number, kind: 'unix' | 'https'): string {
  if (status !== 403) return '';
  return kind === 'https'
    ? ' (the server does not trust the client certificate: add it with `lxc config trust add CERT` or a trust token, see docs/providers/lxd.md)'
    : ' (the unix socket refused this user: it must be root or in the lxd group)';
}
