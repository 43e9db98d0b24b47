/**
 * Reading a promise that has already fulfilled without waiting a turn of the microtask queue.
 * Async functions that answer from memory (an inventory lookup) return promises that are
 * fulfilled by the time the call returns: a loop that runs for every node every period can take
 * those answers at once instead of awaiting (and racing) each one.
 */

/** What `fulfilledValue` returns for a promise still pending or rejected. */
export const NOT_FULFILLED: unique symbol = Symbol('not fulfilled');

/** The promise's value if it has fulfilled already; NOT_FULFILLED otherwise (pending or rejected: await it as usual). */
export function fulfilledValue<T>(promise: Promise<T>): T | typeof NOT_FULFILLED {
  return Bun.peek.status(promise) === 'fulfilled' ? (Bun.peek(promise) as T) : NOT_FULFILLED;
}

/** Whether the promise has settled (fulfilled or rejected): awaiting it gives its outcome on the next turn. */
export function isSettled(promise: Promise<unknown>): boolean {
  return Bun.peek.status(promise) !== 'pending';
}

/**
 * Promises already fulfilled with these values, to be shared: an answer from memory without a
 * new promise per call. A provider asked about every node every period (instanceShutdown) that
 * answers with these allocates nothing, and a process allocating nothing at idle does not
 * collect garbage at idle (in Bun 1.4.5, with 5000 nodes, half of the lifecycle controller's
 * idle CPU was the collections its per-node promises caused).
 */
export const FULFILLED_TRUE: Promise<true> = Promise.resolve(true);
export const FULFILLED_FALSE: Promise<false> = Promise.resolve(false);
export const FULFILLED_UNDEFINED: Promise<undefined> = Promise.resolve(undefined);
