import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import dgram from 'node:dgram';
import { formatIP, parseIP } from '../../net/ip.ts';
import { errorMessage } from '../../util/errors.ts';

/**
 * Which speakers are alive, learnt without the API server: every speaker sends a small UDP
 * heartbeat to every other node's address once per interval, signed with HMAC-SHA256 under a key
 * all speakers share (a Secret); a node not heard from for the timeout is dead. Detection takes
 * at most timeout + one check (timeout/4); the API server sees none of it (MetalLB's memberlist
 * serves the same purpose with gossip; a full mesh is simpler and at 100 nodes costs each node
 * ~100 packets of ~120 bytes per interval each way).
 *
 * A heartbeat is accepted only when: it is at most MAX_PACKET bytes, starts with the magic, its
 * HMAC verifies (constant time), its JSON names a node this speaker knows and comes from one of
 * that node's addresses, its sequence number is higher than the last one of the same boot, and its
 * send time is within maxClockSkewMs of ours (a replayed old capture is refused). Everything else
 * is counted by reason and dropped; it never throws.
 *
 * Nothing but stop() ends the heartbeats: an error on the socket, a failed send, or an exception
 * while sending or judging (including from the callbacks) is counted and reported to onError, and
 * a socket closed under us is bound again. (A speaker that goes silent but keeps answering ARP
 * is the worst case: every other speaker takes its addresses and both answer.)
 */

const MAGIC = new Uint8Array([0x65, 0x63, 0x6c, 0x01]); // "ecl", version 1
const HMAC_LENGTH = 32;
const MAX_PACKET = 512;
export const DEFAULT_LIVENESS_PORT = 7947;
export const DEFAULT_HEARTBEAT_INTERVAL_MS = 1000;
export const DEFAULT_LIVENESS_TIMEOUT_MS = 3000;
const DEFAULT_MAX_CLOCK_SKEW_MS = 30_000;

export interface Heartbeat {
  /** Sending node. */
  n: string;
  /** Random per process start: sequence numbers restart with it. */
  b: string;
  /** Sequence number, +1 per heartbeat. */
  s: number;
  /** Sender's wall clock, ms. */
  t: number;
}

export function encodeHeartbeat(key: Uint8Array, beat: Heartbeat): Uint8Array {
  const body = Buffer.concat([MAGIC, Buffer.from(JSON.stringify(beat), 'utf8')]);
  return Buffer.concat([body, createHmac('sha256', key).update(body).digest()]);
}

/** The heartbeat in `packet`, or the reason it is refused. */
export function decodeHeartbeat(key: Uint8Array, packet: Uint8Array): Heartbeat | string {
  if (packet.length > MAX_PACKET) return 'too long';
  if (packet.length < MAGIC.length + HMAC_LENGTH + 2) return 'too short';
  if (!MAGIC.every((b, i) => packet[i] === b)) return 'bad magic';
  const body = packet.subarray(0, packet.length - HMAC_LENGTH);
  const mac = packet.subarray(packet.length - HMAC_LENGTH);
  if (!timingSafeEqual(createHmac('sha256', key).update(body).digest(), mac)) return 'bad signature';
  let beat: unknown;
  try {
    beat = JSON.parse(Buffer.from(body.subarray(MAGIC.length)).toString('utf8'));
  } catch {
    return 'not JSON';
  }
  const b = beat as Partial<Heartbeat>;
  if (typeof b.n !== 'string' || typeof b.b !== 'string' || !Number.isSafeInteger(b.s) || typeof b.t !== 'number') return 'bad fields';
  return { n: b.n, b: b.b, s: b.s!, t: b.t };
}

export interface LivenessOptions {
  /** This speaker's node. */
  node: string;
  key: Uint8Array;
  port?: number;
  /** Default: every address (dual stack where the host has IPv6). */
  bindAddress?: string;
  intervalMs?: number;
  timeoutMs?: number;
  maxClockSkewMs?: number;
  /** The other nodes and their addresses (from the Node objects), read at every send and receive. */
  peers: () => ReadonlyMap<string, readonly string[]>;
  /** Called when the set of live nodes changes. */
  onChange?: (alive: ReadonlySet<string>) => void;
  /** A refused heartbeat (rate-limited by the caller if logged). */
  onRefused?: (reason: string, from: string) => void;
  /** An error on the socket, a failed send, a failure while sending or judging, or a rebind (rate-limited by the caller if logged). */
  onError?: (what: LivenessErrorKind, error: string) => void;
}

export type LivenessErrorKind = 'send' | 'socket' | 'internal' | 'reopen';

export interface LivenessStats {
  sent: number;
  received: number;
  refused: Record<string, number>;
  /** By kind: failed sends, socket errors, exceptions while sending or judging, rebinds of a closed socket. */
  errors: Partial<Record<LivenessErrorKind, number>>;
}

interface PeerState {
  boot: string;
  seq: number;
  lastHeardAt: number;
}

export class Liveness {
  private socket?: dgram.Socket;
  private family: 4 | 6 = 6;
  private readonly boot = randomBytes(8).toString('hex');
  private seq = 0;
  private readonly heard = new Map<string, PeerState>();
  private current = new Set<string>();
  private sendTimer?: ReturnType<typeof setInterval>;
  private checkTimer?: ReturnType<typeof setInterval>;
  private readonly counters: LivenessStats = { sent: 0, received: 0, refused: {}, errors: {} };
  private stopped = false;
  private reopenTimer?: ReturnType<typeof setTimeout>;
  readonly port: number;
  readonly intervalMs: number;
  readonly timeoutMs: number;
  private readonly maxClockSkewMs: number;

  constructor(private readonly options: LivenessOptions) {
    this.port = options.port ?? DEFAULT_LIVENESS_PORT;
    this.intervalMs = options.intervalMs ?? DEFAULT_HEARTBEAT_INTERVAL_MS;
    this.timeoutMs = options.timeoutMs ?? DEFAULT_LIVENESS_TIMEOUT_MS;
    this.maxClockSkewMs = options.maxClockSkewMs ?? DEFAULT_MAX_CLOCK_SKEW_MS;
    if (this.timeoutMs <= this.intervalMs) throw new Error(`liveness timeout (${this.timeoutMs} ms) must be longer than the heartbeat interval (${this.intervalMs} ms)`);
    this.current.add(options.node);
  }

  /** Binds the port (dual stack where the node has IPv6, else IPv4) and starts sending. */
  async start(): Promise<void> {
    this.stopped = false;
    await this.open();
    this.sendTimer = setInterval(() => this.beat(), this.intervalMs);
    this.checkTimer = setInterval(() => this.check(), Math.max(50, Math.floor(this.timeoutMs / 4)));
    this.beat();
  }

  private async open(): Promise<void> {
    const at = this.options.bindAddress;
    if (at) this.family = at.includes(':') ? 6 : 4;
    const socket = at
      ? await bind(this.port, this.family, at)
      : await bind(this.port, 6).catch(() => {
          this.family = 4;
          return bind(this.port, 4);
        });
    if (this.stopped) {
      socket.close();
      return;
    }
    socket.on('message', (packet, remote) => this.receive(packet, remote.address));
    socket.on('error', (e) => this.error('socket', e));
    socket.on('close', () => {
      if (this.socket !== socket) return;
      this.socket = undefined;
      if (!this.stopped) this.reopen('the socket closed');
    });
    this.socket = socket;
  }

  /** Binds again after one interval (and again while that fails): the heartbeats must not end while the speaker runs. */
  private reopen(why: string): void {
    if (this.stopped || this.reopenTimer) return;
    this.error('reopen', `${why}; binding port ${this.port} again`);
    this.reopenTimer = setTimeout(() => {
      this.reopenTimer = undefined;
      if (this.stopped || this.socket) return;
      this.open().catch((e) => this.reopen(`binding failed: ${errorMessage(e)}`));
    }, this.intervalMs);
  }

  /** Nodes alive now: this one, and every node heard from within the timeout. */
  alive(): ReadonlySet<string> {
    return this.current;
  }

  stats(): LivenessStats {
    return structuredClone(this.counters);
  }

  stop(): void {
    this.stopped = true;
    clearInterval(this.sendTimer);
    clearInterval(this.checkTimer);
    clearTimeout(this.reopenTimer);
    this.reopenTimer = undefined;
    const socket = this.socket;
    this.socket = undefined;
    try {
      socket?.close();
    } catch {
      // Already closed.
    }
  }

  private beat(): void {
    const socket = this.socket;
    if (!socket) return;
    try {
      const packet = encodeHeartbeat(this.options.key, { n: this.options.node, b: this.boot, s: ++this.seq, t: Date.now() });
      for (const [node, addresses] of this.options.peers()) {
        if (node === this.options.node) continue;
        const to = this.destination(addresses);
        if (!to) continue;
        this.counters.sent += 1;
        socket.send(packet, this.port, to, (err) => {
          if (err) this.error('send', err);
        });
      }
    } catch (e) {
      this.error('internal', `sending heartbeats: ${errorMessage(e)}`);
    }
  }

  /** The first address of the node this socket can reach (IPv4 as ::ffff:a.b.c.d on a dual-stack socket). */
  private destination(addresses: readonly string[]): string | undefined {
    const v4 = addresses.find((a) => !a.includes(':'));
    if (this.family === 4) return v4;
    const v6 = addresses.find((a) => a.includes(':'));
    return v4 ? `::ffff:${v4}` : v6;
  }

  private receive(packet: Uint8Array, fromAddress: string): void {
    // Never throws: Bun turns an exception from a 'message' listener into an 'error' on the socket.
    try {
      this.judge(packet, fromAddress);
    } catch (e) {
      this.error('internal', `judging a heartbeat from ${fromAddress}: ${errorMessage(e)}`);
    }
  }

  private judge(packet: Uint8Array, fromAddress: string): void {
    const from = fromAddress.startsWith('::ffff:') && fromAddress.includes('.') ? fromAddress.slice(7) : fromAddress;
    const beat = decodeHeartbeat(this.options.key, packet);
    if (typeof beat === 'string') return this.refuse(beat, from);
    const addresses = this.options.peers().get(beat.n);
    if (!addresses || beat.n === this.options.node) return this.refuse('unknown node', from);
    if (!addresses.some((a) => sameAddress(a, from))) return this.refuse('not from the node\'s address', from);
    if (Math.abs(Date.now() - beat.t) > this.maxClockSkewMs) return this.refuse('stale or clock skew', from);
    const known = this.heard.get(beat.n);
    if (known && known.boot === beat.b && beat.s <= known.seq) return this.refuse('replayed', from);
    this.counters.received += 1;
    this.heard.set(beat.n, { boot: beat.b, seq: beat.s, lastHeardAt: performance.now() });
    if (!this.current.has(beat.n)) this.check();
  }

  private refuse(reason: string, from: string): void {
    this.counters.refused[reason] = (this.counters.refused[reason] ?? 0) + 1;
    try {
      this.options.onRefused?.(reason, from);
    } catch (e) {
      this.error('internal', `onRefused: ${errorMessage(e)}`);
    }
  }

  private error(what: LivenessErrorKind, e: unknown): void {
    this.counters.errors[what] = (this.counters.errors[what] ?? 0) + 1;
    try {
      this.options.onError?.(what, errorMessage(e));
    } catch {
      // Counted above; a failing reporter must not end the heartbeats.
    }
  }

  private check(): void {
    const now = performance.now();
    const next = new Set<string>([this.options.node]);
    for (const [node, state] of this.heard) if (now - state.lastHeardAt <= this.timeoutMs) next.add(node);
    if (next.size === this.current.size && [...next].every((n) => this.current.has(n))) return;
    this.current = next;
    this.options.onChange?.(next);
  }
}

function bind(port: number, family: 4 | 6, address = family === 6 ? '::' : '0.0.0.0'): Promise<dgram.Socket> {
  return new Promise((resolve, reject) => {
    const socket = family === 6 ? dgram.createSocket({ type: 'udp6', ipv6Only: false }) : dgram.createSocket('udp4');
    // Only while binding: left attached, the first error of the bound socket (months later) would close it.
    const failed = (e: Error) => {
      socket.close();
      reject(e);
    };
    socket.once('error', failed);
    socket.bind(port, address, () => {
      socket.off('error', failed);
      resolve(socket);
    });
  });
}

function sameAddress(a: string, b: string): boolean {
  const x = parseIP(a);
  const y = parseIP(b);
  return !!x && !!y && formatIP(x) === formatIP(y);
}
