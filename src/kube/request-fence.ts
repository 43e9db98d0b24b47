import type { HttpMethod } from './http-method.ts';

/**
 * The API requests of one leadership term, so the term can be ended cleanly: `close()` refuses
 * every new request, aborts the ones in flight and waits until they have all settled, and says
 * whether a write was cut off after it was sent. Such a write may still be committed by the API
 * server later (it may already have it); the leader must then not release its lease (a new
 * leader could write first and be overwritten), but let it expire, as after a crash.
 *
 * Only writes cut off once the term is ending count (`stopping()`, at SIGTERM, when the stop
 * signal starts aborting requests): one that failed long before has landed or not long since.
 * Transports given the fence (TransportOptions.fence) report each request they send through it.
 */

export class FenceClosedError extends Error {
  constructor(reason: string) {
    super(`request refused: ${reason}`);
    this.name = 'FenceClosedError';
  }
}

export interface FenceOutcome {
  /** Every request of the term settled within the wait. */
  settled: boolean;
  /** Writes (not GET) that were sent and ended without an answer: they may still land. */
  cutOffWrites: number;
}

export class RequestFence {
  private readonly stop = new AbortController();
  private readonly inFlight = new Set<Promise<unknown>>();
  private cutOff = 0;
  private ending = false;
  private writeGuard?: () => string | undefined;

  /** Aborts when the fence closes: transports add it to every request's signal. */
  get signal(): AbortSignal {
    return this.stop.signal;
  }

  get closed(): boolean {
    return this.stop.signal.aborted;
  }

  /**
   * Refuses the term's writes (not its reads) while `check` gives a reason: the leader elector's
   * "is our lease still ours by our own clock" (LeaderElector.holdsLeaseNow), so a leader that
   * was paused past its lease writes nothing until it has renewed it.
   */
  guardWrites(check: () => string | undefined): void {
    this.writeGuard = check;
  }

  /** Throws once the fence is closed, or for a write while the write guard refuses: called before a request is sent. */
  admit(method: HttpMethod = 'GET'): void {
    if (this.closed) throw new FenceClosedError(this.closedReason());
    if (method === 'GET') return;
    const refused = this.writeGuard?.();
    if (refused) throw new FenceClosedError(refused);
  }

  /** Why the term may not act on the world now (closed, or the write guard refuses); undefined: it may. Also what the BGP speaker asks. */
  refusal(): string | undefined {
    return this.closed ? this.closedReason() : this.writeGuard?.();
  }

  private closedReason(): string {
    return String((this.stop.signal.reason as Error)?.message ?? this.stop.signal.reason);
  }

  /** The term is ending: from now on a write that ends without an answer is counted as cut off. */
  stopping(): void {
    this.ending = true;
  }

  /**
   * Tracks one sent request until its answer (the response headers: a write is committed by
   * then) or its failure (aborted, timed out, connection lost: whether the API server got it is
   * unknown).
   */
  track<T>(method: HttpMethod, response: Promise<T>): Promise<T> {
    const settled = response.then(
      () => undefined,
      () => {
        if (method !== 'GET' && (this.ending || this.closed)) this.cutOff++;
      },
    );
    this.inFlight.add(settled);
    void settled.finally(() => this.inFlight.delete(settled));
    return response;
  }

  /** Ends the term: refuses new requests, aborts those in flight, waits up to `settleMs` for them. */
  async close(reason: string, settleMs: number): Promise<FenceOutcome> {
    this.ending = true;
    if (!this.closed) this.stop.abort(new Error(reason));
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timedOut = new Promise<false>((r) => (timer = setTimeout(() => r(false), settleMs)));
    const settled = await Promise.race([Promise.all([...this.inFlight]).then(() => true), timedOut]);
    clearTimeout(timer);
    return { settled, cutOffWrites: this.cutOff };
  }
}
