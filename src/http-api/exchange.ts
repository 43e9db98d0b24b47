import type { Backoff } from '../util/backoff.ts';
import type { ApiMetrics } from './request-metrics.ts';
import { isTlsError, type PinnedTlsTrust } from './pinned-tls.ts';

/**
 * What every HTTP API provider does around one request, written once: a timeout per request,
 * the request metrics, forgetting a pinned certificate after a TLS failure, and back-off (after
 * errors every request fails at once until it has passed, so an API in trouble is not hammered
 * and callers answer "unknown" fast).
 */

export class BackoffGate {
  private until = 0;

  constructor(
    private readonly backoff: Backoff,
    private readonly now: () => number,
    /** Told each time a back-off starts (the provider logs it, naming its API). */
    private readonly started: (waitMs: number) => void,
  ) {}

  /** Milliseconds of back-off left; 0 or less: requests may go. */
  left(): number {
    return this.until - this.now();
  }

  /** After a good answer. */
  reset(): void {
    this.backoff.reset();
  }

  /** After an error: the next doubling delay, or the server's wish (Retry-After) within the bound. */
  start(serverSaysMs = 0): void {
    const wait = Math.min(Math.max(this.backoff.next(), serverSaysMs), this.backoff.maxMs);
    this.until = this.now() + wait;
    this.started(wait);
  }
}

export interface ExchangeOptions {
  /** The metrics' `request` label. */
  request: string;
  timeoutMs: number;
  /** The caller's: when it aborts, the failure says nothing about the API (no back-off, no error wrapping). */
  signal?: AbortSignal;
  /** Read at each use, so metrics registered after construction are used. */
  metrics?: () => ApiMetrics | undefined;
  /** The HTTPS trust; none for a unix socket. */
  trust?: PinnedTlsTrust;
  gate: BackoffGate;
  /** The provider's error for a failure with no answer (`reason`: the timeout or the network error). */
  failure: (reason: string) => Error;
}

/** One fetch with the timeout, timing and TLS; a failure with no answer starts the back-off. */
export async function exchange(url: string, init: BunFetchRequestInit, o: ExchangeOptions): Promise<Response> {
  const timeout = AbortSignal.timeout(o.timeoutMs);
  const signal = o.signal ? AbortSignal.any([o.signal, timeout]) : timeout;
  const started = performance.now();
  try {
    const res = await fetch(url, { ...init, signal, redirect: 'manual', ...(o.trust ? { tls: await o.trust.options() } : {}) });
    o.metrics?.()?.observe(o.request, (performance.now() - started) / 1000);
    return res;
  } catch (e) {
    o.metrics?.()?.observe(o.request, (performance.now() - started) / 1000);
    o.metrics?.()?.error(o.request);
    if (o.signal?.aborted && !timeout.aborted) throw e; // the caller gave up: says nothing about the API
    if (isTlsError(e)) o.trust?.forget();
    o.gate.start();
    throw o.failure(timeout.aborted ? `no answer within ${o.timeoutMs}ms` : (e as Error).message);
  }
}
