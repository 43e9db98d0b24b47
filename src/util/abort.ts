/**
 * Waiting on an AbortSignal. An abort listener added to a signal that has already aborted never
 * fires, so every wait for an abort goes through here, which checks first.
 */

/** Resolves once the signal has aborted (at once when it already has). */
export function aborted(signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => (signal.aborted ? resolve() : signal.addEventListener('abort', () => resolve(), { once: true })));
}
