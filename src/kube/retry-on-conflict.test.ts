import { describe, expect, test } from 'bun:test';
import { KubeApiError } from './errors.ts';
import { DEFAULT_RETRY, retryOnConflict } from './retry-on-conflict.ts';

const conflict = () => new KubeApiError(409, 'Conflict', 'the object has been modified', 'PATCH', '/api/v1/nodes/n/status');
const quick = { attempts: 3, delayMs: 0, jitter: 0 };

describe('retryOnConflict', () => {
  test('tries again on 409, telling each attempt its number, until one succeeds', async () => {
    const seen: number[] = [];
    const result = await retryOnConflict(async (n) => {
      seen.push(n);
      if (n < 3) throw conflict();
      return 'written';
    }, quick);
    expect(result).toBe('written');
    expect(seen).toEqual([1, 2, 3]);
  });

  test('the conflict of the last attempt is thrown', async () => {
    let calls = 0;
    const failing = retryOnConflict(async () => {
      calls++;
      throw conflict();
    }, quick);
    await expect(failing).rejects.toThrow(/409 Conflict/);
    expect(calls).toBe(3);
  });

  test('any other error is thrown at once', async () => {
    let calls = 0;
    const failing = retryOnConflict(async () => {
      calls++;
      throw new KubeApiError(500, 'InternalError', 'boom', 'PATCH', '/x');
    }, quick);
    await expect(failing).rejects.toThrow(/500/);
    expect(calls).toBe(1);
  });

  test('an aborted signal stops the wait between attempts', async () => {
    const abort = new AbortController();
    const failing = retryOnConflict(async () => {
      abort.abort(new Error('stopping'));
      throw conflict();
    }, DEFAULT_RETRY, abort.signal);
    await expect(failing).rejects.toThrow('stopping');
  });

  test('the default is client-go\'s DefaultRetry', () => {
    expect(DEFAULT_RETRY).toEqual({ attempts: 5, delayMs: 10, jitter: 0.1 });
  });
});
