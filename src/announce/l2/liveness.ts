import { randomHex } from '../../util/digest.ts';
import { formatIP, parseIP } from '../../net/ip.ts';
import type { Logger } from '../../log.ts';
import { errorMessage } from '../../util/errors.ts';
import type { LogLimiter } from '../../util/log-limiter.ts';
import { Metronome } from '../../util/metronome.ts';

/**
 * Which speakers are alive, learnt without the API server: every speaker sends a small UDP
 * heartbeat to every other node's address once per interval, signed with HMAC-SHA256 under a key
 * all speakers share (a Secret); a node not heard from for the timeout is dead. Silence is judged
 * by a timer armed for the moment the earliest heard peer's timeout runs out (not a poll: an idle
 * speaker wakes up for its heartbeats and about once per timeout, issue 38), so detection takes
 * the timeout minus the age of the last heartbeat plus the timer's lateness (about 1 ms). Each heartbeat also
 * says what its sender is doing (warming up, ready, leaving) and a digest of the speakers it
 * counts alive, so the election (view.ts) can wait for the others to agree before a takeover.
 *
 * Sending: one connected UDP socket per peer, from an ephemeral port. Measured on Bun 1.4.5 (a
 * dual-stack or IPv4 socket, over veth): an ICMP port unreachable from one peer (its speaker is
 * dead, its kernel up) is reported by the *next* send on the same socket, whatever its
 * destination, and that send is lost: with one socket for every peer, the dead peer silenced the
 * live ones (issue 29: both survivors took the address). With a socket per peer the error lands
 * on the dead peer's socket only (as an 'error' event, recvmsg ECONNREFUSED), and names it: it is
 * kept as evidence that the peer's speaker is not running. Receiving stays on one socket bound
 * to the port; it sends nothing, so no ICMP error is reported on it.
 *
 * The sockets are the runtime's own (Bun.udpSocket), not node:dgram: node:dgram is JavaScript over
 * the same sockets, and loading it costs a speaker or a vip 1.3 MiB of heap and 1.6 MiB of mapped
 * code (BENCHMARKS.md, "What the runtime's node modules cost"). A bound '::' socket is dual stack
 * whatever net.ipv6.bindv6only says (measured: Bun clears IPV6_V6ONLY).
 *
 * A heartbeat is accepted only when: it is at most MAX_PACKET bytes, starts with the magic, its
 * HMAC verifies (constant time), its JSON names a node this speaker knows and comes from one of
 * that node's addresses, its sequence number is higher than the last one of the same boot, and its
 * send time is within maxClockSkewMs of ours (a replayed old capture is refused). Everything else
 * is counted by reason and dropped; it never throws.
 *
 * Nothing but stop() or leave() ends the heartbeats: an error on a socket, a failed send, or an
 * exception while sending or judging (including from the callbacks) is counted and reported to
 * onError, and a socket closed under us is opened again. (A speaker that goes silent but keeps
 * answering ARP is the worst case: every other speaker takes its addresses and both answer.)
 */

const MAGIC = new Uint8Array([0x65, 0x63, 0x6c, 0x01]); // "ecl", version 1
const HMAC_LENGTH = 32;
const MAX_PACKET = 512;
export const DEFAULT_LIVENESS_PORT = 7947;
/**
 * 250 ms / 1 s: failover (holder dead to the new holder's first answer) 0.75-1.05 s plus the
 * takeover, under the 2 s the issue asks with room for a loaded node (3 heartbeats may be lost in
 * a row). Cost: a speaker sends and receives 4 heartbeats per second per other node (100 nodes:
 * 396 packets/s each way of ~150 bytes), measured in BENCHMARKS.md (L2 failover).
 */
export const DEFAULT_HEARTBEAT_INTERVAL_MS = 250;
export const DEFAULT_LIVENESS_TIMEOUT_MS = 1000;
const DEFAULT_MAX_CLOCK_SKEW_MS = 30_000;
/** Copies of the last ("leaving") heartbeat: one lost must not cost the others a timeout. */
const LEAVING_COPIES = 3;

/** What a speaker says about itself: warming up (not eligible yet), ready (eligible), leaving (stopped answering, going away). */
export type SpeakerState = 'warming' | 'ready' | 'leaving';
const STATE_CODES: Record<SpeakerState, number> = { warming: 0, ready: 1, leaving: 2 };
const STATES: SpeakerState[] = ['warming', 'ready', 'leaving'];

export interface Heartbeat {
  /** Sending node. */
  n: string;
  /** Random per process start: sequence numbers restart with it. */
  b: string;
  /** Sequence number, +1 per heartbeat. */
  s: number;
  /** Sender's wall clock, ms. */
  t: number;
  /** Sender's state: 0 warming, 1 ready, 2 leaving (absent, from an older speaker: ready). */
  r?: number;
  /** Digest of the speakers the sender counts alive (absent or "": not known, agrees with anyone). */
  v?: string;
}

const utf8 = new TextEncoder();
const utf8Decoder = new TextDecoder();

/**
 * HMAC-SHA256 under one key, kept per key: the keyed state is copied for each packet instead of
 * set up again, and the digest is written into a buffer of its own. Receiving is what an idle
 * speaker and VIP do most (4 heartbeats a second from each peer): what it allocates is what
 * wakes mimalloc's scavenger and the GC after it (issue 38).
 */
class HeartbeatMac {
  private readonly keyed: Bun.CryptoHasher;
  // CryptoHasher.digest(buffer) asks for 64 bytes whatever the hash.
  private readonly digest = new Uint8Array(64);

  constructor(key: Uint8Array) {
    this.keyed = new Bun.CryptoHasher('sha256', key);
  }

  /** The MAC of `body`, valid until the next call. */
  of(body: Uint8Array): Uint8Array {
    this.keyed.copy().update(body).digest(this.digest);
    return this.digest;
  }

  /** Whether `mac` is `body`'s MAC, in constant time. */
  verifies(body: Uint8Array, mac: Uint8Array): boolean {
    const expected = this.of(body);
    let diff = 0;
    for (let i = 0; i < HMAC_LENGTH; i++) diff |= expected[i]! ^ mac[i]!;
    return diff === 0;
  }
}

const macs = new WeakMap<Uint8Array, HeartbeatMac>();
function macFor(key: Uint8Array): HeartbeatMac {
  let mac = macs.get(key);
  if (!mac) macs.set(key, (mac = new HeartbeatMac(key)));
  return mac;
}

export function encodeHeartbeat(key: Uint8Array, beat: Heartbeat): Uint8Array {
  const json = utf8.encode(JSON.stringify(beat));
  const packet = new Uint8Array(MAGIC.length + json.length + HMAC_LENGTH);
  packet.set(MAGIC);
  packet.set(json, MAGIC.length);
  const bodyLength = MAGIC.length + json.length;
  packet.set(macFor(key).of(packet.subarray(0, bodyLength)).subarray(0, HMAC_LENGTH), bodyLength);
  return packet;
}

/** The heartbeat in `packet`, or the reason it is refused. */
export function decodeHeartbeat(key: Uint8Array, packet: Uint8Array): Heartbeat | string {
  if (packet.length > MAX_PACKET) return 'too long';
  if (packet.length < MAGIC.length + HMAC_LENGTH + 2) return 'too short';
  for (let i = 0; i < MAGIC.length; i++) if (packet[i] !== MAGIC[i]) return 'bad magic';
  const bodyLength = packet.length - HMAC_LENGTH;
  if (!macFor(key).verifies(packet.subarray(0, bodyLength), packet.subarray(bodyLength))) return 'bad signature';
  let beat: unknown;
  try {
    beat = JSON.parse(utf8Decoder.decode(packet.subarray(MAGIC.length, bodyLength)));
  } catch {
    return 'not JSON';
  }
  const b = beat as Partial<Heartbeat>;
  if (typeof b.n !== 'string' || typeof b.b !== 'string' || !Number.isSafeInteger(b.s) || typeof b.t !== 'number') return 'bad fields';
  if (b.r !== undefined && !(Number.isInteger(b.r) && b.r >= 0 && b.r < STATES.length)) return 'bad fields';
  if (b.v !== undefined && (typeof b.v !== 'string' || b.v.length > 64)) return 'bad fields';
  return { n: b.n, b: b.b, s: b.s!, t: b.t, r: b.r ?? STATE_CODES.ready, v: b.v ?? '' };
}

/** What this speaker knows of one peer. */
export interface PeerReport {
  /** Heard within the timeout (a leaving peer too, until its silence). */
  heard: boolean;
  /** Its state in its last heartbeat. */
  state: SpeakerState;
  /** Its view digest in its last heartbeat ("" when it sent none). */
  view: string;
  /** Its node refused our heartbeats (ICMP port unreachable) since we last heard it: its speaker is not running. */
  refused: boolean;
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
  /** Sends the heartbeats on this metronome's beat (shared with another periodic job: one wake-up for both); default one of its own. */
  metronome?: Metronome;
  /** The other nodes and their addresses (from the Node objects), read at every send and receive. */
  peers: () => ReadonlyMap<string, readonly string[]>;
  /** Called when the set of nodes heard changes, or what a peer says (state, view) or a refusal does. */
  onChange?: (alive: ReadonlySet<string>) => void;
  /** A refused heartbeat (rate-limited by the caller if logged). */
  onRefused?: (reason: string, from: string) => void;
  /** An error on a socket, a failed send, a failure while sending or judging, or a reopen (rate-limited by the caller if logged). */
  onError?: (what: LivenessErrorKind, error: string) => void;
  /**
   * This process sent no heartbeat for longer than the timeout (SIGSTOP, a frozen cgroup, a
   * blocked event loop): the others count it dead and have taken its addresses. Called once,
   * when it runs again, before its next heartbeat leaves and before anything else is judged.
   */
  onFrozen?: (gapMs: number) => void;
}

/** `unreachable`: a peer's node answered our heartbeat with ICMP port unreachable (its speaker is not running). */
export type LivenessErrorKind = 'send' | 'socket' | 'internal' | 'reopen' | 'unreachable';

export interface LivenessStats {
  sent: number;
  received: number;
  refused: Record<string, number>;
  /** By kind: failed sends, socket errors, exceptions while sending or judging, rebinds of a closed socket, peers refusing. */
  errors: Partial<Record<LivenessErrorKind, number>>;
}

interface PeerState {
  boot: string;
  seq: number;
  lastHeardAt: number;
  state: SpeakerState;
  view: string;
  /** performance.now() of the last ICMP port unreachable from its node. */
  refusedAt?: number;
}

type BoundSocket = Bun.udp.Socket<'uint8array'>;
type ConnectedSocket = Bun.udp.ConnectedSocket<'uint8array'>;

/** One connected socket per peer address (see the module comment for why). */
interface PeerSocket {
  /** Undefined while it connects (a moment: the first heartbeat to the peer may be skipped). */
  socket?: ConnectedSocket;
  node: string;
  /** Set by stop() or when the peer is gone: a socket connected after that is closed at once. */
  dropped: boolean;
}

/**
 * The error a UDP socket's error handler was given. Bun 1.4.5 calls it with the error alone
 * while its types say (socket, error): whichever argument is an Error.
 */
function handlerError(args: readonly unknown[]): unknown {
  return args.find((a) => a instanceof Error) ?? args[args.length - 1];
}

/**
 * onRefused and onError for a speaker's log: each reason (or kind) logged at most once per the
 * limiter's window, with how many were not logged since (a peer refusing every heartbeat stays
 * one line a minute). The speaker and the VIP announcer log them alike.
 */
export function loggedLivenessProblems(log: Logger, limiter: LogLimiter): Pick<LivenessOptions, 'onRefused' | 'onError'> {
  return {
    onRefused: (reason, from) => {
      const logged = limiter.allow(`refused ${reason}`);
      if (logged) log.warn('heartbeat refused', { reason, from, notLoggedSince: logged.suppressed });
    },
    onError: (what, error) => {
      const logged = limiter.allow(`error ${what}`);
      if (logged) log.warn('liveness error', { what, error, notLoggedSince: logged.suppressed });
    },
  };
}

export class Liveness {
  private socket?: BoundSocket;
  private family: 4 | 6 = 6;
  private readonly boot = randomHex(8);
  private seq = 0;
  private readonly heard = new Map<string, PeerState>();
  private readonly senders = new Map<string, PeerSocket>();
  private current = new Set<string>();
  /** Stops the heartbeats' beat. */
  private stopBeat?: () => void;
  /** Armed for the earliest moment a heard peer's timeout runs out; undefined while none is heard. */
  private deadlineTimer?: ReturnType<typeof setTimeout>;
  /** When this process last sent its heartbeats (performance.now()); undefined before the start. */
  private lastSentAt?: number;
  private readonly counters: LivenessStats = { sent: 0, received: 0, refused: {}, errors: {} };
  private stopped = false;
  private reopenTimer?: ReturnType<typeof setTimeout>;
  private state: SpeakerState = 'warming';
  private view = '';
  private beatQueued = false;
  /** Signature of what check() last reported, to call onChange only on a change. */
  private reported = '';
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
    this.lastSentAt = performance.now();
    this.stopBeat = (this.options.metronome ?? new Metronome()).every(this.intervalMs, () => this.beat());
    this.beat();
  }

  private async open(): Promise<void> {
    const at = this.options.bindAddress;
    if (at) this.family = at.includes(':') ? 6 : 4;
    const handlers = this.socketHandlers;
    const socket = at
      ? await bind(this.port, at, handlers)
      : await bind(this.port, '::', handlers).catch(() => {
          this.family = 4;
          return bind(this.port, '0.0.0.0', handlers);
        });
    if (this.stopped) {
      socket.close();
      return;
    }
    this.socket = socket;
  }

  /** The bound socket's: a heartbeat read; an error (a failed receive) counted and reported, the socket kept. */
  private readonly socketHandlers: Bun.udp.SocketHandler<'uint8array'> = {
    data: (_socket, packet, _port, address) => this.receive(packet, address),
    error: (...args: unknown[]) => this.error('socket', handlerError(args)),
  };

  /** A bound socket closed under the speaker (the runtime has no close event: seen at each heartbeat) is bound again. */
  private noticeClosedSocket(): void {
    if (!this.socket?.closed) return;
    this.socket = undefined;
    if (!this.stopped) this.reopen('the socket closed');
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

  /** Nodes heard now (any state but leaving), and this one. */
  alive(): ReadonlySet<string> {
    return this.current;
  }

  /** What this speaker knows of each peer it has heard from (or whose node refused its heartbeats) since it started. */
  reports(): Map<string, PeerReport> {
    const now = performance.now();
    const out = new Map<string, PeerReport>();
    for (const [node, p] of this.heard) {
      const heard = now - p.lastHeardAt <= this.timeoutMs;
      const refused = p.refusedAt !== undefined && p.refusedAt > p.lastHeardAt;
      out.set(node, { heard, state: p.state, view: p.view, refused });
    }
    return out;
  }

  /**
   * What our heartbeats say from now on; a change is sent at once (not at the next interval): a
   * peer waiting for our view before a takeover, or for our release, waits one one-way delay.
   */
  setState(state: SpeakerState, view: string): void {
    // Once leaving, always leaving: a late reconcile must not say "ready" again.
    if (this.state === 'leaving' || this.stopped) return;
    if (state === this.state && view === this.view) return;
    this.state = state;
    this.view = view;
    this.beatSoon();
  }

  stats(): LivenessStats {
    return structuredClone(this.counters);
  }

  /**
   * Tells every peer that this speaker is leaving (its addresses already released, so they may
   * take them at once instead of after a timeout), then stops. The copies are a few ms apart.
   */
  async leave(): Promise<void> {
    if (this.stopped) return;
    this.state = 'leaving';
    this.stopBeat?.();
    for (let i = 0; i < LEAVING_COPIES && !this.stopped; i++) {
      this.beat();
      await Bun.sleep(5);
    }
    this.stop();
  }

  stop(): void {
    this.stopped = true;
    this.stopBeat?.();
    clearTimeout(this.deadlineTimer);
    this.deadlineTimer = undefined;
    clearTimeout(this.reopenTimer);
    this.reopenTimer = undefined;
    const socket = this.socket;
    this.socket = undefined;
    closeQuietly(socket);
    for (const peer of this.senders.values()) dropPeer(peer);
    this.senders.clear();
  }

  private beatSoon(): void {
    if (this.beatQueued || this.stopped) return;
    this.beatQueued = true;
    queueMicrotask(() => {
      this.beatQueued = false;
      this.beat();
    });
  }

  /**
   * One heartbeat to every peer. A send is done when it returns (the runtime's UDP send is a
   * sendmsg, not queued); a refusal comes later, on the peer's socket.
   */
  private beat(): void {
    if (this.stopped && this.state !== 'leaving') return;
    try {
      this.noticePause();
      this.noticeClosedSocket();
      // Signed once a peer is there to send to (a lone node signs nothing).
      let packet: Uint8Array | undefined;
      const wanted = new Set<string>();
      for (const [node, addresses] of this.options.peers()) {
        if (node === this.options.node) continue;
        const to = this.destination(addresses);
        if (!to) continue;
        wanted.add(`${node} ${to}`);
        const peer = this.sender(node, to);
        if (!peer.socket) continue;
        this.counters.sent += 1;
        packet ??= encodeHeartbeat(this.options.key, { n: this.options.node, b: this.boot, s: ++this.seq, t: Date.now(), r: STATE_CODES[this.state], v: this.view });
        this.send(peer.node, peer.socket, packet);
      }
      // Peers gone from the Node objects (or readdressed): their sockets close, and nodes gone are forgotten.
      for (const [key, peer] of this.senders) {
        if (wanted.has(key)) continue;
        this.senders.delete(key);
        dropPeer(peer);
      }
      const known = this.options.peers();
      for (const node of this.heard.keys()) if (!known.has(node)) this.heard.delete(node);
    } catch (e) {
      this.error('internal', `sending heartbeats: ${errorMessage(e)}`);
    }
  }

  private send(node: string, socket: ConnectedSocket, packet: Uint8Array): void {
    try {
      // false: the socket's send buffer is full and the datagram was not sent (a lost heartbeat).
      if (!socket.send(packet)) this.sendFailed(node, new Error('send buffer full: heartbeat dropped'));
    } catch (e) {
      this.sendFailed(node, e);
    }
  }

  /**
   * The connected socket to `node` at `to`, opened on first use (connecting takes a moment: the
   * first heartbeat may be skipped). One that fails to open (no route yet, the bind address
   * gone) is reported and tried again at the next heartbeat; one closed under us, likewise.
   */
  private sender(node: string, to: string): PeerSocket {
    const key = `${node} ${to}`;
    const existing = this.senders.get(key);
    if (existing && !existing.socket?.closed) return existing;
    if (existing) this.senders.delete(key);
    const peer: PeerSocket = { node, dropped: false };
    this.senders.set(key, peer);
    const at = this.options.bindAddress;
    // Bound to the configured address, when it is of the same family, so the source is the one the peers expect.
    const bindTo = at && at.includes(':') === to.includes(':') && at !== '::' && at !== '0.0.0.0' ? { hostname: at } : {};
    opened(() => Bun.udpSocket({
      ...bindTo,
      binaryType: 'uint8array',
      connect: { hostname: to, port: this.port },
      socket: { error: (...args: unknown[]) => this.sendFailed(node, handlerError(args)) },
    })).then((socket) => {
      if (peer.dropped) socket.close();
      else peer.socket = socket;
    }, (e) => {
      if (this.senders.get(key) === peer) this.senders.delete(key);
      if (!peer.dropped) this.sendFailed(node, e);
    });
    return peer;
  }

  /** ECONNREFUSED: the peer's node said nobody listens on the port (ICMP port unreachable): its speaker is not running. */
  private sendFailed(node: string, e: unknown): void {
    const message = errorMessage(e);
    if (/ECONNREFUSED/.test(message)) {
      const peer = this.heard.get(node);
      if (peer) peer.refusedAt = performance.now();
      else this.heard.set(node, { boot: '', seq: 0, lastHeardAt: -Infinity, state: 'warming', view: '', refusedAt: performance.now() });
      this.error('unreachable', `${node}: ${message}`);
      this.check();
      return;
    }
    this.error('send', `${node}: ${message}`);
  }

  /** The first address of the node: IPv4 if it has one (the order heartbeats always used), else IPv6; none if the bound family cannot reach it. */
  private destination(addresses: readonly string[]): string | undefined {
    const v4 = addresses.find((a) => !a.includes(':'));
    if (this.family === 4) return v4;
    return v4 ?? addresses.find((a) => a.includes(':'));
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
    const state = STATES[beat.r ?? 1]!;
    const view = beat.v ?? '';
    const now = performance.now();
    // Judged again only when something changed (a heartbeat per peer per interval must not cost a pass over all peers).
    const changed = !known || state !== known.state || view !== known.view || now - known.lastHeardAt > this.timeoutMs || (known.refusedAt ?? -Infinity) > known.lastHeardAt;
    // Updated in place: a heartbeat per peer per interval allocates no state of its own.
    if (known) {
      known.boot = beat.b;
      known.seq = beat.s;
      known.lastHeardAt = now;
      known.state = state;
      known.view = view;
      known.refusedAt = undefined;
    } else {
      this.heard.set(beat.n, { boot: beat.b, seq: beat.s, lastHeardAt: now, state, view });
    }
    if (changed) this.check();
    // A heartbeat puts its sender's timeout last of all: the timer, when armed, stays right.
    if (!this.deadlineTimer) this.armDeadline();
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

  /**
   * How long since this process last sent its heartbeats: above the timeout, the others count it
   * dead, and it has just woken from a pause without judging it yet (what it would answer now may
   * be someone else's). At most one interval (and the timer's lateness) while it runs.
   */
  stalledFor(): number {
    return this.lastSentAt === undefined ? 0 : performance.now() - this.lastSentAt;
  }

  /**
   * Before each heartbeat: a silence longer than the timeout is reported (once: the heartbeat
   * follows) while stalledFor() still says so. What onFrozen does (the announcer empties the
   * responder's table, which first drains the frames queued meanwhile) must see the pause: reset
   * first, the requests queued during a 3 s SIGSTOP were answered beside the new holder (CI run,
   * the paused-speaker test: one probe round answered by two nodes).
   */
  private noticePause(): void {
    const gap = this.stalledFor();
    if (gap > this.timeoutMs) {
      try {
        this.options.onFrozen?.(gap);
      } catch (e) {
        this.error('internal', `onFrozen: ${errorMessage(e)}`);
      }
    }
    this.lastSentAt = performance.now();
  }

  /**
   * Arms the timer for the moment the first heard peer's timeout runs out (the only change of a
   * report that time alone makes; the others come with a packet or a refusal); none while no
   * peer is heard. A pass over the peers, so only when the timer fires or is not armed.
   */
  private armDeadline(): void {
    clearTimeout(this.deadlineTimer);
    this.deadlineTimer = undefined;
    if (this.stopped) return;
    const now = performance.now();
    let earliest = Infinity;
    for (const p of this.heard.values()) {
      const silentAt = p.lastHeardAt + this.timeoutMs;
      if (silentAt >= now && silentAt < earliest) earliest = silentAt;
    }
    if (earliest === Infinity) return;
    // A peer is silent once more than the timeout has passed: 1 ms past the moment, in whole ms.
    this.deadlineTimer = setTimeout(() => this.deadline(), Math.ceil(earliest - now) + 1);
  }

  private deadline(): void {
    this.deadlineTimer = undefined;
    try {
      this.check();
    } catch (e) {
      this.error('internal', `judging silence: ${errorMessage(e)}`);
    }
    this.armDeadline();
  }

  /**
   * Reports a change of who is heard, of what a peer says, or of a refusal. Just woken from a
   * pause (a heartbeat, a refusal or the deadline ran before the heartbeat timer), it sends first,
   * which reports the pause, so the change is judged after onFrozen, as everything after a pause.
   * Bun 1.4.5 hands over the datagrams received during a pause before the timers that fell due
   * meanwhile (measured), so heartbeats that waited are read before their senders are judged.
   */
  private check(): void {
    if (this.stalledFor() > this.timeoutMs) this.beat();
    const reports = this.reports();
    const next = new Set<string>([this.options.node]);
    for (const [node, r] of reports) if (r.heard && r.state !== 'leaving') next.add(node);
    const signature = [...reports].map(([node, r]) => `${node}:${r.heard ? 1 : 0}${r.state}${r.view}${r.refused ? 'x' : ''}`).sort().join(',');
    if (signature === this.reported) return;
    this.reported = signature;
    this.current = next;
    try {
      this.options.onChange?.(next);
    } catch (e) {
      this.error('internal', `onChange: ${errorMessage(e)}`);
    }
  }
}

function bind(port: number, hostname: string, socket: Bun.udp.SocketHandler<'uint8array'>): Promise<BoundSocket> {
  return opened(() => Bun.udpSocket({ hostname, port, binaryType: 'uint8array', socket }));
}

/**
 * A Bun.udpSocket call whose failures all reject: Bun 1.4.5 throws some instead (EAFNOSUPPORT
 * from connect()), which left a peer silent for good and would skip the bound socket's IPv4 fallback.
 */
async function opened<T>(open: () => Promise<T>): Promise<T> {
  return await open();
}

function closeQuietly(socket: { close(): void } | undefined): void {
  try {
    socket?.close();
  } catch {
    // Already closed.
  }
}

/** A peer no longer sent to: its socket closed now, or as soon as it has connected. */
function dropPeer(peer: PeerSocket): void {
  peer.dropped = true;
  closeQuietly(peer.socket);
}

function sameAddress(a: string, b: string): boolean {
  if (a === b) return true;
  const x = parseIP(a);
  const y = parseIP(b);
  return !!x && !!y && formatIP(x) === formatIP(y);
}
