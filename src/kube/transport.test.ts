import { afterEach, expect, test } from 'bun:test';
import { StallingPeer } from '../../test/fakes/stalling-peer.ts';
import { eventually } from '../../test/harness/eventually.ts';
import type { TimeoutSignals } from '../util/timeout-signals.ts';

/**
 * A connection that stalls (headers sent, then nothing; or nothing at all) must not hold a
 * caller forever: requests are bounded as a whole, watches by how long nothing arrives.
 * The peer is a local HTTP endpoint that stalls on purpose (not an imitation of the API).
 */
const peer = new StallingPeer();
afterEach(() => peer.close());

test('a request the server never answers is aborted after requestTimeoutMs', async () => {
  const t = peer.transport(() => peer.stall(), { requestTimeoutMs: 200 });
  await expect(t.request({ method: 'GET', path: '/api/v1/nodes' })).rejects.toThrow(/timed out|abort/i);
});

test('a response whose body stalls is aborted too (the bound covers the body)', async () => {
  const t = peer.transport(() => new Response(new ReadableStream({ start: (c) => c.enqueue(new TextEncoder().encode('{"items":[')) })), { requestTimeoutMs: 200 });
  await expect(t.request({ method: 'GET', path: '/api/v1/nodes' })).rejects.toThrow(/timed out|abort/i);
});

test('a request that was answered (or failed) holds no timeout afterwards; one in flight does, and the caller\'s abort still ends it', async () => {
  let answer: () => Response = () => Response.json({ kind: 'NodeList', items: [] });
  const t = peer.transport(() => answer(), { requestTimeoutMs: 60_000 });
  const pending = () => (t as unknown as { timeouts: TimeoutSignals }).timeouts.pending;
  await t.request({ method: 'GET', path: '/api/v1/nodes' });
  answer = () => Response.json({ kind: 'Status', reason: 'NotFound', message: 'nodes "x" not found' }, { status: 404 });
  await expect(t.request({ method: 'GET', path: '/api/v1/nodes/x' })).rejects.toThrow(/not found/);
  expect(pending()).toBe(0);

  answer = () => peer.stall() as never;
  const caller = new AbortController();
  const stalled = t.request({ method: 'GET', path: '/api/v1/nodes', signal: caller.signal });
  await eventually('the stalled request holds its timeout', () => pending() === 1);
  caller.abort(new Error('caller gave up'));
  await expect(stalled).rejects.toThrow(/caller gave up|abort/i);
  expect(pending()).toBe(0);
});

test('a watch that goes silent ends with an error (the reflector resumes it); one with regular bookmarks lives on', async () => {
  const encoder = new TextEncoder();
  const event = (type: string) => encoder.encode(`${JSON.stringify({ type, object: { metadata: { resourceVersion: '1' } } })}\n`);
  let silent = true;
  const timers: ReturnType<typeof setInterval>[] = [];
  const t = peer.transport(() => new Response(new ReadableStream({
    start(c) {
      c.enqueue(event('ADDED'));
      if (!silent) timers.push(setInterval(() => c.enqueue(event('BOOKMARK')), 50));
    },
  })), { watchIdleTimeoutMs: 300 });

  const seen: string[] = [];
  const quiet = (async () => {
    for await (const ev of t.watch('/api/v1/nodes', { allowWatchBookmarks: true }, new AbortController().signal)) seen.push(ev.type);
  })();
  await expect(quiet).rejects.toThrow('nothing received for 300 ms');
  expect(seen).toEqual(['ADDED']);

  silent = false;
  const stop = new AbortController();
  const kept: string[] = [];
  const lively = (async () => {
    for await (const ev of t.watch('/api/v1/nodes', { allowWatchBookmarks: true }, stop.signal)) kept.push(ev.type);
  })();
  await Bun.sleep(800); // well past the idle bound, with a bookmark every 50 ms
  stop.abort();
  await lively; // ends quietly when the caller aborts
  for (const timer of timers) clearInterval(timer);
  expect(kept.length).toBeGreaterThan(5);
  expect(kept[0]).toBe('ADDED');
});
