/**
 * Memory of the BGP speaker under a ROUTE-REFRESH flood by a peer that never reads (issue 34):
 * one Peer (src/net/bgp/peer.ts) established over a fake socket that takes 64 KiB (a kernel
 * send buffer) and then nothing, the table set to N IPv6 routes, then R ROUTE-REFRESH messages
 * fed to it. Prints, per table size, the bytes the peer sent us, the bytes queued for it, the
 * process's heap after a full GC, and the CPU time the requests took. In-process: run it in a
 * checkout of the code to measure (the queued bytes are read from the queue itself, so older
 * code without the `queuedBytes` stat is measured the same way).
 *
 * Usage: bun bench/bgp-refresh-flood.ts [--routes=200,2000] [--requests=3560,8900]
 */
import { Afi, Safi } from '../src/net/bgp/constants.ts';
import { encodeRouteRefresh } from '../src/net/bgp/message.ts';
import { establish, session, table } from '../test/fakes/bgp-fake-session.ts';
import { option as opt } from './args.ts';

const routeCounts = (opt('routes') ?? '200,2000').split(',').map(Number);
// The figures: 81,880 bytes of requests (3,560) for 200 routes, 205 KB (8,900) for 2,000.
const requestCounts = (opt('requests') ?? '3560,8900').split(',').map(Number);
const MiB = (n: number) => (n / 1024 / 1024).toFixed(2);

function heapUsed(): number {
  Bun.gc(true);
  return process.memoryUsage().heapUsed;
}

function queued(conn: object): number {
  const c = conn as { queuedBytes?: number; queue?: Uint8Array[] };
  return c.queuedBytes ?? (c.queue ?? []).reduce((a, b) => a + b.length, 0);
}

console.log('| routes | requests (bytes in) | queued for the peer | heap growth | CPU for the requests |');
console.log('|---:|---:|---:|---:|---:|');
routeCounts.forEach((routes, i) => {
  const requests = requestCounts[i] ?? requestCounts.at(-1)!;
  const h = session(64 * 1024);
  h.peer.setRoutes(table(routes));
  establish(h);
  const refresh = encodeRouteRefresh(Afi.IPV6, Safi.UNICAST);
  const before = heapUsed();
  const cpu0 = process.cpuUsage();
  const chunk = new Uint8Array(refresh.length * 20);
  for (let j = 0; j < 20; j++) chunk.set(refresh, j * refresh.length);
  for (let sent = 0; sent < requests; sent += 20) h.conn.onData(sent + 20 <= requests ? chunk : chunk.subarray(0, (requests - sent) * refresh.length));
  const cpu = process.cpuUsage(cpu0);
  const after = heapUsed();
  console.log(`| ${routes} | ${requests} (${requests * refresh.length}) | ${queued(h.conn)} bytes | ${MiB(after - before)} MiB | ${((cpu.user + cpu.system) / 1e6).toFixed(2)} s |`);
  h.peer.stop({ subcode: 2 });
});
