import { describe, expect, test } from 'bun:test';
import { ApiServerReturn } from './api-server-return.ts';
import { eventually } from '../../test/harness/eventually.ts';

/** A probe whose answers the test scripts: false (no answer) until `up` is set. */
function scripted() {
  const state = { up: false, probes: 0 };
  const probe = async () => {
    state.probes++;
    return state.up;
  };
  return { state, probe };
}

describe('ApiServerReturn', () => {
  test('a waiter is woken soon after the API server answers again, well before its own wait ends', async () => {
    const { state, probe } = scripted();
    const back = new ApiServerReturn({ probe, probeIntervalMs: 10, maxJitterMs: 20 });
    const waiting = back.wait(60_000, new AbortController().signal);
    await eventually('three probes', () => state.probes >= 3, 10_000, 5);
    state.up = true;
    expect(await waiting).toBe('back');
  });

  test('a server that answered all along wakes nobody: the waiter keeps its backoff', async () => {
    const { state, probe } = scripted();
    state.up = true;
    const back = new ApiServerReturn({ probe, probeIntervalMs: 5, maxJitterMs: 0 });
    expect(await back.wait(60, new AbortController().signal)).toBe('elapsed');
    expect(state.probes).toBeGreaterThan(1);
  });

  test('every waiter is woken, each after its own random share of the jitter bound', async () => {
    const { state, probe } = scripted();
    // Drawn in the order the waiters are woken (the order they began waiting): the first waits longest.
    const draws = [0.99, 0.5, 0];
    const back = new ApiServerReturn({ probe, probeIntervalMs: 5, maxJitterMs: 60, random: () => draws.shift() ?? 0 });
    const signal = new AbortController().signal;
    const woken: string[] = [];
    const waits = ['a', 'b', 'c'].map((name) => back.wait(60_000, signal).then((o) => void woken.push(`${name} ${o}`)));
    await eventually('two probes', () => state.probes >= 2, 10_000, 2);
    state.up = true;
    await Promise.all(waits);
    expect(woken).toEqual(['c back', 'b back', 'a back']);
  });

  test('a return seen by the first probe after nobody waited still wakes: the last probe before the pause got no answer', async () => {
    // The soak and CI once saw this: every loop was mid-request when the server came back, so
    // probing paused; the next wait's first probe answered and, with no memory of the outage,
    // woke nobody, and the informers slept out their grown backoff.
    const { state, probe } = scripted();
    const back = new ApiServerReturn({ probe, probeIntervalMs: 5, maxJitterMs: 0 });
    const signal = new AbortController().signal;
    expect(await back.wait(30, signal)).toBe('elapsed');
    expect(state.probes).toBeGreaterThan(0);
    await Bun.sleep(30);
    const paused = state.probes;
    await Bun.sleep(30);
    expect(state.probes).toBe(paused); // nobody waits: probing has paused
    state.up = true; // back while nobody waits
    expect(await back.wait(60_000, signal)).toBe('back');
    // Once answered, the outage is over: a later failure (a 403, a 410) keeps its backoff.
    expect(await back.wait(40, signal)).toBe('elapsed');
  });

  test('an abort rejects with its reason, and probing stops once nobody waits', async () => {
    const { state, probe } = scripted();
    const back = new ApiServerReturn({ probe, probeIntervalMs: 5 });
    const stop = new AbortController();
    const waiting = back.wait(60_000, stop.signal);
    await eventually('two probes', () => state.probes >= 2, 10_000, 2);
    stop.abort(new Error('stopped'));
    await expect(waiting).rejects.toThrow('stopped');
    await Bun.sleep(20);
    const after = state.probes;
    await Bun.sleep(30);
    expect(state.probes).toBe(after);
  });

  test('a probe that throws counts as no answer', async () => {
    let calls = 0;
    const back = new ApiServerReturn({
      probe: async () => {
        if (++calls < 3) throw new Error('connection refused');
        return true;
      },
      probeIntervalMs: 5,
      maxJitterMs: 0,
    });
    expect(await back.wait(60_000, new AbortController().signal)).toBe('back');
  });
});
