import type { Socket } from 'bun';
import { parseIP } from '../../src/net/ip.ts';
import type { Logger } from '../../src/log.ts';
import type { Connection } from '../../src/net/bgp/connection.ts';
import { Afi, MessageType, Safi } from '../../src/net/bgp/constants.ts';
import { encodeKeepalive, frame } from '../../src/net/bgp/message.ts';
import { emptyCapabilities, encodeOpenBody } from '../../src/net/bgp/open.ts';
import { Peer, type PeerSettings } from '../../src/net/bgp/peer.ts';
import { parseAnnouncements } from '../../src/net/bgp/routes.ts';

/**
 * A Peer (the speaker's side of one BGP session) on a fake socket, for the fuzz test and the
 * flood bench: the test feeds bytes with `conn.onData` and reads what the speaker wrote from
 * `wire.written`. The socket takes `capacity` bytes (what a kernel send buffer holds), then
 * nothing: a peer that never reads.
 */
export const PEER_ASN = 65010;
export const LOCAL_ASN = 4200000001;

/** A socket standing in for Bun's: records what the speaker writes; takes `capacity` bytes, then none. */
export class FakeWire {
  written: Uint8Array[] = [];
  taken = 0;
  ended = false;
  conn: Connection | undefined;
  constructor(public capacity = Number.POSITIVE_INFINITY) {}
  write(data: Uint8Array): number {
    if (this.ended) return 0;
    const n = Math.min(data.length, this.capacity - this.taken);
    if (n > 0) this.written.push(data.slice(0, n));
    this.taken += n;
    return n;
  }
  end(): void {
    this.ended = true;
    queueMicrotask(() => this.conn?.onClosed());
  }
  terminate(): void {
    this.end();
  }
}

export interface Harness {
  peer: Peer;
  wire: FakeWire;
  conn: Connection;
  internalErrors: string[];
}

export function session(capacity?: number): Harness {
  const internalErrors: string[] = [];
  const log: Logger = {
    info: () => {},
    warn: () => {},
    debug: () => {},
    enabled: () => false,
    // The peer logs an error only for an exception that was not the peer's fault (a defect).
    error: (msg, fields) => void internalErrors.push(`${msg} ${JSON.stringify(fields, (_, v) => (v instanceof Error ? v.stack : v))}`),
    with: () => log,
  };
  const settings: PeerSettings = {
    address: ip('127.0.0.1'),
    asn: PEER_ASN,
    port: 179,
    holdTimeSeconds: 90,
    passive: true,
    connectTimeoutMs: 1000,
    connectRetryMinMs: 1000,
    connectRetryMaxMs: 1000,
    families: [4, 6],
    addPath: true,
  };
  const peer = new Peer(settings, { asn: LOCAL_ASN, routerId: 0xc6336401 }, { log, onStateChange: () => {} });
  peer.start();
  const wire = new FakeWire(capacity);
  const conn = peer.accept(wire as unknown as Socket<{ conn?: Connection }>)!;
  wire.conn = conn;
  return { peer, wire, conn, internalErrors };
}


function ip(text: string) {
  const v = parseIP(text);
  if (!v) throw new Error(text);
  return v;
}

export function peerOpen(r: () => number = () => 0.5): Uint8Array {
  const families = [
    { afi: Afi.IPV4, safi: Safi.UNICAST },
    { afi: Afi.IPV6, safi: Safi.UNICAST },
  ];
  return frame(
    MessageType.OPEN,
    encodeOpenBody({
      myAs: PEER_ASN,
      holdTime: 90,
      bgpId: 0xcb007101,
      capabilities: { ...emptyCapabilities(), multiprotocol: families, routeRefresh: true, fourOctetAs: r() < 0.8 ? PEER_ASN : undefined, addPath: r() < 0.3 ? families.map((f) => ({ ...f, send: true, receive: true })) : [] },
    }),
  );
}

/** Establishes `h` (the peer's OPEN and KEEPALIVE) and returns once the table went out. */
export function establish(h: Harness, r: () => number = () => 0.5): void {
  h.conn.onData(new Uint8Array([...peerOpen(r), ...encodeKeepalive()]));
  if (h.peer.state !== 'established') throw new Error(`session not established: ${h.peer.stats().lastError}`);
}

export function table(n: number) {
  // n IPv6 prefixes (documentation range) with two next hops and a community each.
  return parseAnnouncements(
    Array.from({ length: n }, (_, i) => ({
      prefix: `2001:db8:${i.toString(16)}::/48`,
      nextHops: [`2001:db8::${(10 + (i % 3)).toString(16)}`, `2001:db8::${(20 + (i % 5)).toString(16)}`],
      communities: [`65010:${i % 50}`],
    })),
  );
}

