import type { udp } from 'bun';
import { ptr } from 'bun:ffi';
import { formatIP, parseIP, type IP } from '../ip.ts';
import { type Logger, silentLogger } from '../../log.ts';
import { attachSocketFilter, IP_TTL, IPPROTO_IP, IPPROTO_IPV6, IPV6_UNICAST_HOPS, libc, SocketError, type BpfInstruction } from '../../util/libc.ts';
import { LogLimiter } from '../../util/log-limiter.ts';
import { systemClock, type Clock } from '../../util/time.ts';
import { BFD_DISCARD_REASONS, decodeControlPacket, type BfdDiscardReason } from './packet.ts';
import { BfdSession, type BfdSessionStats, type BfdStateChange, type BfdTimers } from './session.ts';

/**
 * Single-hop BFD over UDP (RFC 5881): one socket receives every session's Control packets on
 * port 3784 (IPv4 and IPv6), each session sends from its own socket bound to a source port in
 * 49152-65535, with a TTL / hop limit of 255. What arrives with a lower TTL was routed (not
 * sent by a neighbour on the link) and is dropped in the kernel by a socket filter, before it
 * reaches JavaScript (RFC 5881 5: the GTSM check that stands in for authentication).
 * Packets are matched to their session by Your Discriminator, or, while the remote does not know
 * ours yet (zero), by the source address (RFC 5880 6.8.6).
 */

export const BFD_CONTROL_PORT = 3784;
const SOURCE_PORT_MIN = 49152;
const SOURCE_PORT_MAX = 65535;
const TTL = 255;
/** A discarded packet's detail, or a socket error, is logged at most once per reason (or code) per this window. */
const LOG_WINDOW_MS = 10_000;
/**
 * The socket errors counted by code (what ICMP from the network and the kernel can cause); any
 * other is counted as "other": a fixed set, like the discard reasons.
 */
export const BFD_SOCKET_ERROR_CODES = ['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'EHOSTDOWN', 'EMSGSIZE', 'EACCES', 'other'] as const;
export type BfdSocketErrorCode = (typeof BFD_SOCKET_ERROR_CODES)[number];

export interface BfdEndpointOptions {
  /** Where Control packets are received; default 3784 (tests use others). */
  port?: number;
  /** The address to receive on; default "::" (IPv4 and IPv6). */
  address?: string;
  clock?: Clock;
  log?: Logger;
}

export interface BfdPeerOptions {
  /** The address our packets come from (the address the remote knows us by); default: the kernel's choice. */
  local?: string;
  /** The remote's Control port; default 3784. */
  port?: number;
  timers: BfdTimers;
  onStateChange?(change: BfdStateChange): void;
}

export interface BfdEndpointStats {
  /** Packets that reached the socket and were discarded (malformed, or for no session), by reason: every reason of a fixed set. */
  discarded: Record<BfdDiscardReason, number>;
  /** Errors the kernel queued on the sockets (an ICMP port unreachable from a peer whose BFD is not up yet), by code. */
  socketErrors: Record<BfdSocketErrorCode, number>;
  sessions: (BfdSessionStats & { peer: string })[];
}

interface Entry {
  peer: IP;
  session: BfdSession;
  tx: udp.Socket<'buffer'>;
}

export class BfdEndpoint {
  private readonly byPeer = new Map<string, Entry>();
  private readonly byDiscriminator = new Map<number, Entry>();
  private readonly discarded = Object.fromEntries(BFD_DISCARD_REASONS.map((r) => [r, 0])) as Record<BfdDiscardReason, number>;
  private readonly socketErrors = Object.fromEntries(BFD_SOCKET_ERROR_CODES.map((c) => [c, 0])) as Record<BfdSocketErrorCode, number>;
  /** Keyed by reason or error code: as bounded as they are. */
  private readonly logLimit: LogLimiter;
  private readonly clock: Clock;
  private readonly log: Logger;
  private rx?: udp.Socket<'buffer'>;

  private constructor(o: BfdEndpointOptions) {
    this.clock = o.clock ?? systemClock;
    this.log = o.log ?? silentLogger;
    this.logLimit = new LogLimiter(LOG_WINDOW_MS, () => this.clock.now());
  }

  /** Binds the receiving socket (throws naming the port when it is taken, e.g. by a routing daemon's bfdd). */
  static async open(o: BfdEndpointOptions = {}): Promise<BfdEndpoint> {
    const endpoint = new BfdEndpoint(o);
    const port = o.port ?? BFD_CONTROL_PORT;
    try {
      endpoint.rx = await Bun.udpSocket({
        hostname: o.address ?? '::',
        port,
        socket: {
          data: (_s, data, _port, address) => endpoint.onPacket(data, address),
          error: (...args: unknown[]) => endpoint.socketError(errorArgument(args)),
        },
      });
    } catch (e) {
      throw new Error(`cannot receive BFD on UDP port ${port}: ${e instanceof Error ? e.message : String(e)} (another BFD daemon on this host?)`);
    }
    attachSocketFilter(descriptorOf(endpoint.rx), TTL_FILTER, 'the BFD TTL filter');
    return endpoint;
  }

  /** The port Control packets are received on. */
  get port(): number {
    return this.rx?.port ?? 0;
  }

  /** Starts a session with `peer` (one per address); it begins Down and sends at the slow rate. */
  async addSession(peerText: string, o: BfdPeerOptions): Promise<BfdSession> {
    const peer = parseIP(peerText);
    if (!peer) throw new Error(`BFD peer ${JSON.stringify(peerText)} is not an IP address`);
    const key = formatIP(peer);
    if (this.byPeer.has(key)) throw new Error(`a BFD session with ${key} exists already`);
    const local = o.local !== undefined ? parseIP(o.local) : undefined;
    if (o.local !== undefined && (!local || local.family !== peer.family)) throw new Error(`BFD source ${JSON.stringify(o.local)} is not an IPv${peer.family} address`);
    const tx = await bindSourcePort(local ? formatIP(local) : peer.family === 4 ? '0.0.0.0' : '::', peer.family, (e) => this.socketError(e));
    const remotePort = o.port ?? BFD_CONTROL_PORT;
    const discriminator = this.newDiscriminator();
    const session = new BfdSession({
      localDiscriminator: discriminator,
      timers: o.timers,
      clock: this.clock,
      send: (bytes) => tx.send(bytes, remotePort, key),
      onStateChange: (change) => o.onStateChange?.(change),
    });
    const entry = { peer, session, tx };
    this.byPeer.set(key, entry);
    this.byDiscriminator.set(discriminator, entry);
    session.start();
    return session;
  }

  session(peer: string): BfdSession | undefined {
    const ip = parseIP(peer);
    return ip ? this.byPeer.get(formatIP(ip))?.session : undefined;
  }

  /** Ends the session with `peer`: AdminDown sent (the remote takes it down at once), then its socket closed. */
  async removeSession(peer: string): Promise<void> {
    const ip = parseIP(peer);
    const entry = ip ? this.byPeer.get(formatIP(ip)) : undefined;
    if (!entry) return;
    this.byPeer.delete(formatIP(entry.peer));
    await entry.session.stop();
    this.byDiscriminator.delete(entry.session.stats().localDiscriminator);
    entry.tx.close();
  }

  stats(): BfdEndpointStats {
    return { discarded: { ...this.discarded }, socketErrors: { ...this.socketErrors }, sessions: [...this.byPeer.entries()].map(([peer, e]) => ({ peer, ...e.session.stats() })) };
  }

  /** Every session AdminDown, then the sockets closed. */
  async close(): Promise<void> {
    await Promise.all([...this.byPeer.keys()].map((peer) => this.removeSession(peer)));
    this.rx?.close();
    this.rx = undefined;
  }

  private onPacket(data: Buffer, address: string): void {
    const decoded = decodeControlPacket(data);
    if ('error' in decoded) return this.discard(decoded.error, decoded.detail, address);
    const p = decoded.packet;
    const from = parseIP(address.replace(/^::ffff:(?=\d+\.\d+\.\d+\.\d+$)/i, ''));
    const entry = p.yourDiscriminator !== 0 ? this.byDiscriminator.get(p.yourDiscriminator) : from ? this.byPeer.get(formatIP(from)) : undefined;
    if (!entry) return p.yourDiscriminator !== 0 ? this.discard('unknown-your-discriminator', 'unknown Your Discriminator', address) : this.discard('no-session', 'no session with the sender', address);
    // A discriminator is guessable; the source address of a single-hop session is not spoofed past the TTL check.
    if (!from || formatIP(from) !== formatIP(entry.peer)) return this.discard('other-peers-discriminator', 'Your Discriminator of another peer\'s session', address);
    entry.session.receive(p);
  }

  /**
   * An error the kernel queued on a socket (Bun's UDP sockets ask for them: IP_RECVERR), such as
   * the ICMP port unreachable of a peer whose BFD is not running yet. Counted, never fatal: each
   * session has its own sending socket, so one peer's error cannot cost another its packets.
   */
  private socketError(error: Error): void {
    const given = (error as { code?: string }).code;
    const code = (BFD_SOCKET_ERROR_CODES as readonly string[]).includes(given ?? '') ? (given as BfdSocketErrorCode) : 'other';
    this.socketErrors[code] += 1;
    const logged = this.logLimit.allow(`socket ${code}`);
    if (logged) this.log.debug(2, 'BFD socket error', { error: error.message, notLoggedSince: logged.suppressed });
  }

  private discard(reason: BfdDiscardReason, detail: string, from: string): void {
    this.discarded[reason] += 1;
    const logged = this.logLimit.allow(reason);
    if (logged) this.log.debug(2, 'BFD packet discarded', { reason, detail, from, notLoggedSince: logged.suppressed });
  }

  private newDiscriminator(): number {
    for (;;) {
      const d = crypto.getRandomValues(new Uint32Array(1))[0]!;
      if (d !== 0 && !this.byDiscriminator.has(d)) return d;
    }
  }
}

/** A socket on a random free port of 49152-65535 (RFC 5881 4), sending with TTL / hop limit 255. */
async function bindSourcePort(hostname: string, family: 4 | 6, onError: (e: Error) => void): Promise<udp.Socket<'buffer'>> {
  let last: unknown;
  for (let i = 0; i < 32; i++) {
    const port = SOURCE_PORT_MIN + Math.floor(Math.random() * (SOURCE_PORT_MAX - SOURCE_PORT_MIN + 1));
    try {
      // Packets arriving here (none are expected: the remote sends to 3784) are ignored.
      const socket = await Bun.udpSocket({ hostname, port, socket: { error: (...args: unknown[]) => onError(errorArgument(args)) } });
      const fd = descriptorOf(socket);
      const ttl = new Int32Array([TTL]);
      const [level, option] = family === 4 ? [IPPROTO_IP, IP_TTL] : [IPPROTO_IPV6, IPV6_UNICAST_HOPS];
      if (libc().setsockopt(fd, level, option, ptr(ttl), 4) !== 0) {
        socket.close();
        throw new SocketError(`setting the BFD socket's ${family === 4 ? 'TTL' : 'hop limit'} to 255`);
      }
      return socket;
    } catch (e) {
      if (e instanceof SocketError) throw e;
      last = e;
    }
  }
  throw new Error(`no free BFD source port in ${SOURCE_PORT_MIN}-${SOURCE_PORT_MAX} on ${hostname}: ${last instanceof Error ? last.message : String(last)}`);
}

/** Bun 1.4.5 calls a UDP socket's error handler with the error first (the socket as `this`), unlike its type definitions: take whichever argument is the error. */
function errorArgument(args: unknown[]): Error {
  const e = args.find((a) => a instanceof Error);
  return e instanceof Error ? e : new Error(String(args[0]));
}

/** The descriptor of a Bun UDP socket: Bun has it at runtime (`.fd`), not in its type definitions (1.4.5). */
function descriptorOf(socket: object): number {
  const fd = (socket as { fd?: unknown }).fd;
  if (typeof fd !== 'number' || fd < 0) throw new Error('the UDP socket exposes no descriptor');
  return fd;
}

/** Classic BPF opcodes (linux/filter.h). */
const BPF_LDB_ABS = 0x30;
const BPF_RSH_K = 0x74;
const BPF_JEQ_K = 0x15;
const BPF_RET_K = 0x06;
/** SKF_NET_OFF: offsets from the network header (the filter of a UDP socket starts at the UDP header). */
const NET = 0xfff00000;

/**
 * Accepts only datagrams whose IPv4 TTL or IPv6 hop limit is 255: the receive side of RFC 5881
 * 5, done in the kernel because Bun's UDP sockets do not hand the TTL (IP_RECVTTL) to JavaScript.
 */
export const TTL_FILTER: BpfInstruction[] = [
  { code: BPF_LDB_ABS, jt: 0, jf: 0, k: NET }, // A = version << 4 | IHL (IPv4) or version << 4 | traffic class (IPv6)
  { code: BPF_RSH_K, jt: 0, jf: 0, k: 4 },
  { code: BPF_JEQ_K, jt: 0, jf: 2, k: 4 },
  { code: BPF_LDB_ABS, jt: 0, jf: 0, k: NET + 8 }, // IPv4 TTL
  { code: BPF_JEQ_K, jt: 3, jf: 2, k: TTL },
  { code: BPF_LDB_ABS, jt: 0, jf: 0, k: NET + 7 }, // IPv6 hop limit
  { code: BPF_JEQ_K, jt: 1, jf: 0, k: TTL },
  { code: BPF_RET_K, jt: 0, jf: 0, k: 0 },
  { code: BPF_RET_K, jt: 0, jf: 0, k: 0xffff },
];

