import { afterEach, describe, expect, test } from 'bun:test';
import { ptr } from 'bun:ffi';
import { IP_TTL, IPPROTO_IP, libc } from '../../util/libc.ts';
import { BfdEndpoint } from './endpoint.ts';
import { BFD_DISCARD_REASONS, BfdState, encodeControlPacket } from './packet.ts';
import type { BfdStateChange } from './session.ts';

/**
 * Two endpoints on loopback (no root needed): real UDP sockets, real timers. The router
 * interoperability (BIRD, FRR) is test/integration/bgp-node-liveness.test.ts's.
 */
const FAST = { desiredMinTxMs: 50, requiredMinRxMs: 50, detectMult: 3 };
let open: BfdEndpoint[] = [];
afterEach(async () => {
  for (const e of open) await e.close();
  open = [];
});

async function endpoint(): Promise<BfdEndpoint> {
  const e = await BfdEndpoint.open({ port: 0, address: '127.0.0.1' });
  open.push(e);
  return e;
}

async function until(what: string, check: () => boolean, ms = 5_000): Promise<void> {
  const deadline = performance.now() + ms;
  while (!check()) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await Bun.sleep(10);
  }
}

describe('BFD endpoint (RFC 5881) on loopback', () => {
  test('two endpoints bring a session Up; one leaving (AdminDown) takes the other Down at once; back, Up again', async () => {
    const a = await endpoint();
    const b = await endpoint();
    const changes: BfdStateChange[] = [];
    const sa = await a.addSession('127.0.0.1', { port: b.port, local: '127.0.0.1', timers: FAST, onStateChange: (c) => changes.push(c) });
    const sb = await b.addSession('127.0.0.1', { port: a.port, local: '127.0.0.1', timers: FAST });
    await until('both Up', () => sa.state === BfdState.Up && sb.state === BfdState.Up);
    // The Poll Sequence moved both to the fast rate.
    await until('the fast rate', () => a.stats().sessions[0]!.txIntervalMs === 50 && b.stats().sessions[0]!.detectionTimeMs === 150);
    const downAt = performance.now();
    const removed = b.removeSession('127.0.0.1');
    await until('a Down after b said AdminDown', () => sa.state === BfdState.Down);
    expect(changes.at(-1)!.diag).toBe(3); // neighbor signaled session down
    expect(performance.now() - downAt).toBeLessThan(1_000);
    await removed;

    // b back: the session comes Up again with new discriminators on b's side.
    const again = await b.addSession('127.0.0.1', { port: a.port, local: '127.0.0.1', timers: FAST });
    await until('Up again', () => sa.state === BfdState.Up && again.state === BfdState.Up);
    expect(sa.remoteDiscriminator).toBe(again.stats().localDiscriminator);
  });

  test('a packet with a TTL below 255 never reaches the session (the kernel filter); the same packet with 255 does', async () => {
    const a = await endpoint();
    const sa = await a.addSession('127.0.0.1', { port: 9, local: '127.0.0.1', timers: FAST });
    const down = encodeControlPacket({ diag: 0, state: BfdState.Down, poll: false, final: false, controlPlaneIndependent: false, demand: false, detectMult: 3, myDiscriminator: 99, yourDiscriminator: 0, desiredMinTxUs: 1_000_000, requiredMinRxUs: 50_000, requiredMinEchoRxUs: 0 });
    const sender = await Bun.udpSocket({ hostname: '127.0.0.1', port: 0 });
    const setTtl = (ttl: number) => libc().setsockopt((sender as unknown as { fd: number }).fd, IPPROTO_IP, IP_TTL, ptr(new Int32Array([ttl])), 4);
    try {
      expect(setTtl(254)).toBe(0);
      sender.send(down, a.port, '127.0.0.1');
      await Bun.sleep(200);
      expect(sa.state).toBe(BfdState.Down);
      expect(a.stats().sessions[0]!.received).toBe(0);
      expect(setTtl(255)).toBe(0);
      sender.send(down, a.port, '127.0.0.1');
      await until('Init', () => sa.state === BfdState.Init);
    } finally {
      sender.close();
    }
  });

  test('packets for no session are counted by reason; a second session with one peer is refused', async () => {
    const a = await endpoint();
    await a.addSession('127.0.0.1', { port: 9, local: '127.0.0.1', timers: FAST });
    await expect(a.addSession('127.0.0.1', { port: 9, timers: FAST })).rejects.toThrow('exists already');
    await expect(a.addSession('127.0.0.2', { local: '::1', timers: FAST })).rejects.toThrow('is not an IPv4 address');
    const sender = await Bun.udpSocket({ hostname: '127.0.0.1', port: 0 });
    libc().setsockopt((sender as unknown as { fd: number }).fd, IPPROTO_IP, IP_TTL, ptr(new Int32Array([255])), 4);
    const packet = encodeControlPacket({ diag: 0, state: BfdState.Up, poll: false, final: false, controlPlaneIndependent: false, demand: false, detectMult: 3, myDiscriminator: 99, yourDiscriminator: 12345, desiredMinTxUs: 1_000_000, requiredMinRxUs: 50_000, requiredMinEchoRxUs: 0 });
    sender.send(packet, a.port, '127.0.0.1');
    sender.send(new Uint8Array(10), a.port, '127.0.0.1');
    await until('two discards', () => Object.values(a.stats().discarded).reduce((x, y) => x + y, 0) === 2);
    sender.close();
    const { discarded } = a.stats();
    expect(Object.entries(discarded).filter(([, n]) => n > 0)).toEqual([['short', 1], ['unknown-your-discriminator', 1]]);
    // Every reason is there from the start, and the set is fixed.
    expect(Object.keys(discarded)).toEqual([...BFD_DISCARD_REASONS]);
    // Port 9 answers with ICMP port unreachable: counted by its code.
    await until('the port unreachable counted', () => a.stats().socketErrors.ECONNREFUSED > 0);
  });
});
