import { afterAll, describe, expect, test } from 'bun:test';
import { ApiServerHealth, HealthVerdict } from './health.ts';
import { Metronome } from '../../util/metronome.ts';
import { checkStatus, closeHealthChecks } from '../../../test/harness/health-check.ts';

describe('HealthVerdict', () => {
  test('starts unhealthy; healthy after healthyAfter successes in a row, unhealthy after unhealthyAfter failures in a row', () => {
    const v = new HealthVerdict(3, 2);
    expect(v.healthy).toBe(false);
    expect(v.record(true)).toBe(false);
    expect(v.record(true)).toBe(true);
    expect(v.healthy).toBe(true);
    // Two failures, then a success: the streak starts over (no flapping on a lost check or two).
    expect([v.record(false), v.record(false), v.record(true)]).toEqual([false, false, false]);
    expect([v.record(false), v.record(false), v.record(false)]).toEqual([false, false, true]);
    expect(v.healthy).toBe(false);
  });
});

describe('checkStatus against a local server', () => {
  const server = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    fetch: async (req) => {
      const path = new URL(req.url).pathname;
      if (path === '/hang') await Bun.sleep(2000);
      if (path === '/bad') return new Response('no', { status: 503 });
      return new Response('ok');
    },
  });
  afterAll(() => {
    closeHealthChecks();
    server.stop(true);
  });
  const url = (path: string) => `http://127.0.0.1:${server.port}${path}`;

  test('200, 503, a hung server, a closed port', async () => {
    expect(await checkStatus(url('/readyz'), 1000)).toBe('200');
    expect(await checkStatus(url('/bad'), 1000)).toBe('503');
    expect(await checkStatus(url('/hang'), 100)).toBe('timeout after 100 ms');
    const closed = Bun.serve({ hostname: '127.0.0.1', port: 0, fetch: () => new Response('') });
    const port = closed.port;
    await closed.stop(true);
    expect(await checkStatus(`http://127.0.0.1:${port}/readyz`, 1000)).not.toBe('200');
  });

  test('ApiServerHealth reports the changes of verdict', async () => {
    let answer = '200';
    const changes: [boolean, string][] = [];
    const health = new ApiServerHealth({ url: 'x', intervalMs: 5, timeoutMs: 5, unhealthyAfter: 2, healthyAfter: 1, onChange: (h, why) => changes.push([h, why]), check: async () => answer });
    health.start();
    while (changes.length < 1) await Bun.sleep(5);
    answer = 'timeout after 5 ms';
    while (changes.length < 2) await Bun.sleep(5);
    health.stop();
    expect(changes).toEqual([[true, '200'], [false, 'timeout after 5 ms']]);
    expect(health.healthy).toBe(false);
  });

  test('a check that runs through a beat is followed at once by the next, not a whole interval later', async () => {
    // The first check lasts until the first beat has come (a timeout as long as the interval, run
    // late); the second must start when it ends, not at the beat after, as when each check was
    // timed from the previous one's start. Told by order, not by time: the beats are the test's own.
    const seen: string[] = [];
    const metronome = new Metronome();
    let firstBeat = () => {};
    const beaten = new Promise<void>((resolve) => (firstBeat = resolve));
    const stopBeats = metronome.every(300, () => {
      seen.push('beat');
      firstBeat();
    });
    const health = new ApiServerHealth({
      url: 'x', intervalMs: 300, timeoutMs: 300, unhealthyAfter: 3, healthyAfter: 1, onChange: () => {}, metronome,
      check: async () => {
        seen.push('check');
        if (seen.length === 1) await beaten;
        return '200';
      },
    });
    health.start();
    while (seen.filter((e) => e === 'check').length < 2 || seen.filter((e) => e === 'beat').length < 2) await Bun.sleep(5);
    health.stop();
    stopBeats();
    expect(seen.slice(0, 4)).toEqual(['check', 'beat', 'check', 'beat']);
  });
});
