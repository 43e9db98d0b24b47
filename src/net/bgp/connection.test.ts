import { expect, test } from 'bun:test';
import { Connection, type ConnectionEvents } from './connection.ts';

/** A socket taking `capacity` bytes until told to take more (a peer reading, or not). */
function wire(capacity: number) {
  const w = { capacity, taken: 0, ended: false, write: (d: Uint8Array) => { const n = Math.max(0, Math.min(d.length, w.capacity - w.taken)); w.taken += n; return n; }, end: () => void (w.ended = true), terminate: () => void (w.ended = true) };
  return w;
}

function events(log: string[]): ConnectionEvents {
  return {
    messages: () => {},
    framingError: () => {},
    closed: () => log.push('closed'),
    overflow: (_c, queued) => log.push(`overflow ${queued}`),
    sendHoldExpired: () => log.push('send hold'),
  };
}

test('the write queue: capped in bytes (the write refused, overflow told), a final NOTIFICATION still queued past the cap; marks tell when the kernel has taken a write', () => {
  const log: string[] = [];
  const w = wire(100);
  const c = new Connection('in', w, events(log));
  c.maxQueuedBytes = 1000;
  c.send(2, new Uint8Array(181)); // 200 bytes: 100 taken, 100 queued
  const mark = c.mark();
  expect(c.queuedBytes).toBe(100);
  expect(c.sentThrough(mark)).toBe(false);
  c.send(2, new Uint8Array(881)); // 900 more: 1000, at the cap
  expect(c.queuedBytes).toBe(1000);
  c.send(4);
  expect(log).toEqual(['overflow 1000']);
  expect(c.queuedBytes).toBe(1000);
  c.writeRaw(new Uint8Array(21));
  expect(c.queuedBytes).toBe(1021);
  w.capacity = 250; // the peer reads 150 bytes: the first write is through
  c.onDrain();
  expect(c.sentThrough(mark)).toBe(true);
  expect(c.queuedBytes).toBe(871);
});

test('send hold timer (RFC 9687): queued bytes untouched for sendHoldMs are told; a peer that reads a little restarts it', async () => {
  const log: string[] = [];
  const w = wire(10);
  const c = new Connection('in', w, events(log));
  c.sendHoldMs = 150;
  c.send(2, new Uint8Array(100));
  for (let i = 0; i < 4; i++) {
    await Bun.sleep(80);
    w.capacity += 5; // reads 5 bytes every 80 ms: slow, not stalled
    c.onDrain();
  }
  expect(log).toEqual([]);
  await Bun.sleep(250);
  expect(log).toEqual(['send hold']);
  c.close();
});
