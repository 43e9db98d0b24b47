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
