import { silentLogger, type Logger } from '../log.ts';
import { errorMessage } from '../util/errors.ts';

/**
 * Wakes retry loops when the API server answers again after an outage, so they retry at once
 * instead of sleeping out a backoff that grew while it was down (the reflector's reaches 30 s:
 * node initialisation lagged 11-22 s behind a 22 s outage).
 *
 * While any loop waits, one probe (GET /readyz) runs at once and then every probeIntervalMs. Only
 * a return wakes the waiters: a probe that answers after one that did not (also across a pause in
 * probing, when nobody waited). A loop that failed
 * while the server answers (403, 410, a proxy closing watches) is never woken and keeps its
 * backoff. Each waiter wakes after its own random delay below maxJitterMs, so the informers and
 * the lease do not all arrive in the same instant; then it resets its backoff.
 */

export interface RetryWait {
  /** Waits `ms`, or less when the API server answers again; rejects with the signal's reason on abort. */
  wait(ms: number, signal: AbortSignal): Promise<'elapsed' | 'back'>;
}

export interface ApiServerReturnOptions {
  /** One probe: true when the API server answered (ready or at least answering), false or a throw when not. */
  probe: (signal: AbortSignal) => Promise<boolean>;
  probeIntervalMs?: number;
  maxJitterMs?: number;
  random?: () => number;
  logger?: Logger;
}

interface Waiter {
  wake: () => void;
}

export const DEFAULT_RETURN_PROBE_INTERVAL_MS = 1_000;
export const DEFAULT_MAX_JITTER_MS = 500;

export class ApiServerReturn implements RetryWait {
  private readonly waiters = new Set<Waiter>();
  private readonly probeIntervalMs: number;
  private readonly maxJitterMs: number;
  private readonly random: () => number;
  private readonly log: Logger;
  private probing = false;
  /**
   * Whether the last probe got no answer, kept while probing pauses: every loop may be mid-request
   * when the server comes back, and the next wait's first answer is then still a return. At most
   * one wake per outage: the first answer clears it.
   */
  private unanswered = false;

  constructor(private readonly opts: ApiServerReturnOptions) {
    this.probeIntervalMs = opts.probeIntervalMs ?? DEFAULT_RETURN_PROBE_INTERVAL_MS;
    this.maxJitterMs = opts.maxJitterMs ?? DEFAULT_MAX_JITTER_MS;
    this.random = opts.random ?? Math.random;
    this.log = opts.logger ?? silentLogger;
  }

  wait(ms: number, signal: AbortSignal): Promise<'elapsed' | 'back'> {
    return new Promise((resolve, reject) => {
      if (signal.aborted) return reject(signal.reason);
      let jitterTimer: ReturnType<typeof setTimeout> | undefined;
      const done = (outcome?: 'elapsed' | 'back') => {
        clearTimeout(timer);
        clearTimeout(jitterTimer);
        this.waiters.delete(waiter);
        signal.removeEventListener('abort', onAbort);
        if (outcome) resolve(outcome);
        else reject(signal.reason);
      };
      const timer = setTimeout(() => done('elapsed'), ms);
      const onAbort = () => done();
      const waiter: Waiter = {
        wake: () => {
          this.waiters.delete(waiter);
          jitterTimer = setTimeout(() => done('back'), this.random() * this.maxJitterMs);
        },
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.waiters.add(waiter);
      if (!this.probing) void this.probeWhileWaited();
    });
  }

  /** Probes while anyone waits; wakes them all on a return (an answer after a probe without one). */
  private async probeWhileWaited(): Promise<void> {
    this.probing = true;
    try {
      while (this.waiters.size > 0) {
        const answered = await this.probeOnce();
        if (answered && this.unanswered) {
          this.log.info('the API server answers again: retrying at once', { waiting: this.waiters.size });
          for (const w of [...this.waiters]) w.wake();
        }
        this.unanswered = !answered;
        if (this.waiters.size === 0) break;
        await new Promise((r) => setTimeout(r, this.probeIntervalMs));
      }
    } finally {
      this.probing = false;
    }
  }

  private async probeOnce(): Promise<boolean> {
    try {
      return await this.opts.probe(AbortSignal.timeout(this.probeIntervalMs * 2));
    } catch (e) {
      this.log.debug(4, 'API server probe got no answer', { error: errorMessage(e) });
      return false;
    }
  }
}
