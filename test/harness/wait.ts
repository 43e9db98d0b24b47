import type { LoggedProcess } from './processes.ts';
import { sleep } from '../../src/util/time.ts';

/**
 * Polls `probe` until it answers true. Fails early when the process it waits for has died, and on
 * timeout, with the last lines of that process's log: a control plane that does not come up is
 * debugged from its log, never from "timed out".
 */
export async function waitUntilReady(what: string, proc: LoggedProcess, probe: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  let lastError = '';
  for (let delay = 50; ; delay = Math.min(delay * 2, 500)) {
    if (!proc.running) {
      throw new Error(`${what} exited (code ${await proc.exited}) before it was ready; last lines of ${proc.logPath}:\n${proc.logTail()}`);
    }
    try {
      if (await probe()) return;
    } catch (e) {
      lastError = e instanceof Error ? e.message : String(e);
    }
    if (performance.now() > deadline) {
      throw new Error(`${what} not ready after ${timeoutMs} ms${lastError ? ` (last error: ${lastError})` : ''}; last lines of ${proc.logPath}:\n${proc.logTail()}`);
    }
    await sleep(delay);
  }
}
