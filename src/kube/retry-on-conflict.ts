import { isConflict } from './errors.ts';
import { sleep } from '../util/time.ts';

/**
 * client-go's retry.RetryOnConflict: a read-modify-write under optimistic concurrency (a write
 * carrying the resourceVersion it was computed from) is tried again on 409 Conflict, from a fresh
 * read, a few times with a short pause.
 */

export interface RetryOptions {
  /** Attempts in all, the first included. */
  attempts: number;
  /** Pause between attempts. */
  delayMs: number;
  /** The pause is lengthened by up to this fraction at random, so racing writers spread out. */
  jitter: number;
}

/** client-go's retry.DefaultRetry: 5 attempts, 10 ms apart, 10% jitter. */
export const DEFAULT_RETRY: Readonly<RetryOptions> = Object.freeze({ attempts: 5, delayMs: 10, jitter: 0.1 });

/**
 * Calls `attempt` (with its number, from 1) until it does not fail with a conflict; any other
 * error, or a conflict on the last attempt, is thrown. Attempt 1 may use a cached copy; later
 * ones must read the object again, which is why they are told their number.
 */
export async function retryOnConflict<T>(attempt: (n: number) => Promise<T>, opts: Readonly<RetryOptions> = DEFAULT_RETRY, signal?: AbortSignal): Promise<T> {
  for (let n = 1; ; n++) {
    try {
      return await attempt(n);
    } catch (e) {
      if (!isConflict(e) || n >= opts.attempts) throw e;
    }
    await sleep(opts.delayMs * (1 + opts.jitter * Math.random()), signal);
  }
}
