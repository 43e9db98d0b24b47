export interface EventuallyOptions {
  timeoutMs?: number;
  intervalMs?: number;
  /** More to say on timeout (a process's recent log, the last value seen): read only then. */
  explain?: () => string;
}

/**
 * Polls `probe` until it returns a value other than undefined or false, and returns that value;
 * fails naming `what` after the timeout (default 60 s), with `explain`'s text when given. Tests
 * wait for conditions this way, never for fixed times.
 */
export async function eventually<T>(
  what: string,
  probe: () => T | undefined | false | Promise<T | undefined | false>,
  timeout: number | EventuallyOptions = 60_000,
  intervalMs = 50,
): Promise<T> {
  const options = typeof timeout === 'number' ? { timeoutMs: timeout, intervalMs } : timeout;
  const timeoutMs = options.timeoutMs ?? 60_000;
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== false) return value;
    if (performance.now() > deadline) {
      const more = options.explain?.();
      throw new Error(`timed out after ${timeoutMs}ms waiting for ${what}${more ? `\n${more}` : ''}`);
    }
    await Bun.sleep(options.intervalMs ?? 50);
  }
}

/**
 * Polls `probe` until its value deep-equals `expected` (object keys in any order); a timeout
 * shows both, the last value seen, so a near miss is read from the failure.
 */
export async function eventuallyEqual<T>(what: string, probe: () => T | Promise<T>, expected: T, options: EventuallyOptions = {}): Promise<void> {
  let last: T | undefined;
  await eventually(what, async () => Bun.deepEquals((last = await probe()), expected), {
    ...options,
    explain: () => [`expected ${JSON.stringify(expected)}`, `last saw ${JSON.stringify(last)}`, options.explain?.()].filter(Boolean).join('\n'),
  });
}
