import { afterEach, expect, test } from 'bun:test';
import { FenceClosedError, RequestFence } from './request-fence.ts';
import type { BunKubeTransport } from './transport.ts';
import { StallingPeer } from '../../test/fakes/stalling-peer.ts';
import { eventually } from '../../test/harness/eventually.ts';

/**
 * Ending a leadership term: requests in flight through a fenced transport are aborted, new ones
 * are refused before they reach the peer, and a write cut off on its way is reported (it may
 * still land, so the lease must not be released). The peer is a local HTTP endpoint that
 * answers chosen requests and stalls the others, as a slow API server.
 */
const peer = new StallingPeer();
afterEach(() => peer.close());

/** A transport in `fence`'s term to a peer that answers paths starting with /fast and stalls the rest; `seen` lists what reached it. */
function fencedTransport(fence: RequestFence): { transport: BunKubeTransport; seen: string[] } {
  const seen: string[] = [];
  const transport = peer.transport((req) => {
    seen.push(`${req.method} ${new URL(req.url).pathname}`);
    return new URL(req.url).pathname.startsWith('/fast') ? Response.json({}) : peer.stall();
  }, { fence });
  return { transport, seen };
}

test('closing the term aborts a write in flight, reports it cut off, and refuses new requests before they are sent', async () => {
  const fence = new RequestFence();
  const { transport, seen } = fencedTransport(fence);
  const write = transport.request({ method: 'PATCH', path: '/slow/status', body: {} });
  const failed = write.catch((e: unknown) => e);
  await eventually('the write on the peer', () => seen.includes('PATCH /slow/status'));

  const outcome = await fence.close('term over', 5_000);
  expect(outcome).toEqual({ settled: true, cutOffWrites: 1 });
  expect(String(await failed)).toContain('term over');

  const refused = await transport.request({ method: 'GET', path: '/fast/after' }).catch((e: unknown) => e);
  expect(refused).toBeInstanceOf(FenceClosedError);
  const watch = (async () => {
    for await (const _ of transport.watch('/fast/watch', {}, new AbortController().signal)) { /* nothing */ }
  })();
  expect(await watch.catch((e: unknown) => e)).toBeInstanceOf(FenceClosedError);
  expect(seen).toEqual(['PATCH /slow/status']);
});

test('only writes cut off once the term is ending count: answered writes, cut-off reads and earlier failures do not', async () => {
  const fence = new RequestFence();
  const { transport, seen } = fencedTransport(fence);
  await transport.request({ method: 'POST', path: '/fast/create', body: {} });
  // A write that timed out long before the shutdown has landed or not long since.
  const early = new AbortController();
  const before = transport.request({ method: 'PUT', path: '/slow/early', body: {}, signal: early.signal }).catch(() => undefined);
  await eventually('the early write on the peer', () => seen.includes('PUT /slow/early'));
  early.abort();
  await before;

  fence.stopping();
  const read = transport.request({ method: 'GET', path: '/slow/list' }).catch(() => undefined);
  await eventually('the read on the peer', () => seen.includes('GET /slow/list'));
  expect(await fence.close('term over', 5_000)).toEqual({ settled: true, cutOffWrites: 0 });
  await read;
});

test('a write cut off by the stop signal after stopping() counts, though the fence closes later', async () => {
  const fence = new RequestFence();
  const { transport, seen } = fencedTransport(fence);
  const stop = new AbortController();
  const write = transport.request({ method: 'PATCH', path: '/slow/status', body: {}, signal: stop.signal }).catch(() => undefined);
  await eventually('the write on the peer', () => seen.includes('PATCH /slow/status'));
  fence.stopping();
  stop.abort();
  await write;
  expect(await fence.close('term over', 5_000)).toEqual({ settled: true, cutOffWrites: 1 });
});

test('a write guard refuses the term\'s writes before they are sent, never its reads, and only while it gives a reason', async () => {
  const fence = new RequestFence();
  const { transport, seen } = fencedTransport(fence);
  let reason: string | undefined = 'lease not renewed';
  fence.guardWrites(() => reason);
  const refused = await transport.request({ method: 'PATCH', path: '/fast/node', body: {} }).catch((e: unknown) => e);
  expect(refused).toBeInstanceOf(FenceClosedError);
  expect(String(refused)).toContain('lease not renewed');
  await transport.request({ method: 'GET', path: '/fast/read' });
  expect(seen).toEqual(['GET /fast/read']);
  reason = undefined;
  await transport.request({ method: 'PATCH', path: '/fast/node', body: {} });
  expect(seen).toEqual(['GET /fast/read', 'PATCH /fast/node']);
});
