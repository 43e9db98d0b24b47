/**
 * A BGP speaker that originates routes (RFC 4271; no maintained BGP library exists on the npm
 * registry, so the protocol is implemented here): sessions with each configured peer, IPv4 and
 * IPv6 unicast (RFC 4760), 4-octet AS numbers (RFC 6793), ADD-PATH send (RFC 7911) for several
 * next hops per prefix, graceful restart as the restarting speaker (RFC 4724), route refresh
 * (RFC 2918), TCP-MD5 (RFC 2385). It announces the table the caller sets and learns nothing:
 * UPDATEs from peers are validated and counted, never installed.
 *
 * It knows packets and sessions, nothing of Kubernetes: the caller (the provider's routes and
 * load-balancer code) maps nodes and services to announcements and the observability data
 * here to metrics and events.
 */
import type { Socket, TCPSocketListener } from 'bun';
import { type IP, parseIP } from '../ip.ts';
import { type Logger, silentLogger } from '../../log.ts';
import { CeaseSubcode } from './constants.ts';
import type { Connection } from './connection.ts';
import { resolveConfig, type ResolvedConfig, type SpeakerConfig } from './config.ts';
import { Peer, type PeerSettings, type PeerStats, type StateChange } from './peer.ts';
import { type Announcement, parseAnnouncements, type BgpRoute } from './routes.ts';
import { fdOf, setMd5Key } from './tcp.ts';

export type { Announcement } from './routes.ts';
export type { PeerConfig, SpeakerConfig } from './config.ts';
export type { PeerState, PeerStats, StateChange } from './peer.ts';

export interface BgpSpeakerOptions {
  log?: Logger;
  /** Called on every peer state change (a session up or down: `to`/`from` 'established'). */
  onStateChange?: (change: StateChange) => void;
  /**
   * The table to start with, set before any session opens: a restarting speaker's first
   * sessions get it whole before End-of-RIB (else a router would flush what comes later).
   */
  announcements?: readonly Announcement[];
  /**
   * Why the speaker may not speak now (undefined: it may): no connection is made or accepted and
   * no UPDATE sent while it gives a reason, and an established session is closed without a
   * NOTIFICATION. The leader's "is the lease still ours by our own clock": a leader paused past
   * its lease must not reopen its sessions when it wakes, before its renewal loop notices.
   */
  refusal?: () => string | undefined;
}

export interface SpeakerStats {
  /** Prefixes in the table the caller set. */
  announcements: number;
  peers: PeerStats[];
}

type SocketData = { conn?: Connection };

interface Listener {
  address: string;
  v6: boolean;
  listener: TCPSocketListener<SocketData>;
}

export class BgpSpeaker {
  private config: ResolvedConfig;
  private readonly peers = new Map<string, Peer>();
  private listeners: Listener[] = [];
  private routes: BgpRoute[] = [];
  /** The last table's parsed routes by announcement text: see parseAnnouncements. */
  private readonly parsed = new Map<string, BgpRoute>();
  private table: Announcement[] = [];
  private readonly log: Logger;
  private stopped = false;

  private constructor(
    config: ResolvedConfig,
    private readonly options: BgpSpeakerOptions,
  ) {
    this.config = config;
    this.log = options.log ?? silentLogger;
  }

  /** Validates the configuration (throws listing every problem), listens, and starts every peer. */
  static async start(config: SpeakerConfig, options: BgpSpeakerOptions = {}): Promise<BgpSpeaker> {
    const speaker = new BgpSpeaker(resolveConfig(config), options);
    if (options.announcements) speaker.setAnnouncements(options.announcements);
    speaker.listen();
    for (const settings of speaker.config.peers) speaker.addPeer(settings);
    return speaker;
  }

  /** The ports the listeners are bound to (useful with port 0). */
  get listenPorts(): number[] {
    return this.listeners.map((l) => l.listener.port);
  }

  /**
   * Replaces the whole table; each established session is sent only what changed. Throws
   * (changing nothing) when an entry is invalid.
   */
  setAnnouncements(list: readonly Announcement[]): void {
    this.routes = parseAnnouncements(list, this.parsed);
    this.table = list.map((a) => ({ ...a, nextHops: [...a.nextHops], ...(a.communities ? { communities: [...a.communities] } : {}) }));
    for (const peer of this.peers.values()) peer.setRoutes(this.routes);
  }

  /** The table as last set (for an operator's view). */
  announcements(): Announcement[] {
    return this.table.map((a) => ({ ...a }));
  }

  stats(): SpeakerStats {
    return { announcements: this.routes.length, peers: [...this.peers.values()].map((p) => p.stats()) };
  }

  /**
   * Applies a new configuration without a restart: peers added are started, peers removed get
   * a Cease "peer de-configured", peers whose settings changed a Cease "other configuration
   * change" and a new session. A change of the local AS, router ID or graceful restart resets
   * every session; a change of the listen addresses rebinds the listeners.
   */
  reconfigure(next: SpeakerConfig): void {
    const resolved = resolveConfig(next);
    const localChanged = !same(resolved.local, this.config.local);
    const listenChanged = !same(resolved.listen, this.config.listen);
    const before = this.config;
    this.config = resolved;
    const wanted = new Map(resolved.peers.map((p) => [peerKey(p.address), p]));
    for (const [key, peer] of this.peers) {
      const settings = wanted.get(key);
      if (!settings) {
        peer.stop({ subcode: CeaseSubcode.PEER_DECONFIGURED });
        this.peers.delete(key);
        this.setListenerKey(peer.settings.address, undefined);
      } else if (localChanged || !same(settings, peer.settings)) {
        peer.stop({ subcode: CeaseSubcode.OTHER_CONFIGURATION_CHANGE });
        this.peers.delete(key);
      }
    }
    if (listenChanged) {
      this.closeListeners();
      this.listen();
    }
    for (const [key, settings] of wanted) if (!this.peers.has(key)) this.addPeer(settings);
    this.log.info('BGP configuration applied', { peers: resolved.peers.length, previousPeers: before.peers.length });
  }

  /**
   * Ends every session and closes the listeners. `graceful`: connections are closed without a
   * NOTIFICATION, so peers that negotiated graceful restart keep forwarding on our routes
   * until a new speaker re-announces them (a leader change); otherwise each gets a Cease
   * "administrative shutdown" and withdraws everything at once.
   */
  async stop(options: { graceful?: boolean } = {}): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    for (const peer of this.peers.values()) peer.stop(options.graceful ? { graceful: true } : { subcode: CeaseSubcode.ADMINISTRATIVE_SHUTDOWN });
    this.peers.clear();
    this.closeListeners();
    // Let the final NOTIFICATIONs reach the kernel before the caller exits.
    await Bun.sleep(0);
  }

  private addPeer(settings: PeerSettings): void {
    const peer = new Peer(settings, this.config.local, {
      log: this.log,
      refusal: () => this.options.refusal?.(),
      onStateChange: (change) => {
        this.log.debug(1, 'BGP peer state', { peer: change.peer, from: change.from, to: change.to, reason: change.reason });
        try {
          this.options.onStateChange?.(change);
        } catch (e) {
          this.log.error('BGP state-change callback failed', { error: e });
        }
      },
    });
    this.peers.set(peerKey(settings.address), peer);
    this.setListenerKey(settings.address, settings.password);
    peer.setRoutes(this.routes);
    peer.start();
  }

  private listen(): void {
    const l = this.config.listen;
    if (!l) return;
    for (const address of l.addresses) {
      const listener = Bun.listen<SocketData>({
        hostname: address,
        port: l.port,
        socket: {
          open: (socket) => this.onAccept(socket),
          data: (socket, chunk) => socket.data?.conn?.onData(chunk),
          drain: (socket) => socket.data?.conn?.onDrain(),
          close: (socket) => socket.data?.conn?.onClosed(),
          error: (socket) => socket.data?.conn?.onClosed(),
        },
      });
      this.listeners.push({ address, v6: address.includes(':'), listener });
    }
    for (const p of this.config.peers) this.setListenerKey(p.address, p.password);
  }

  private closeListeners(): void {
    // Not forced: accepted connections stay until their sessions end them.
    for (const l of this.listeners) l.listener.stop(false);
    this.listeners = [];
  }

  /** TCP-MD5 keys live on the listening socket, per peer address; accepted sockets inherit them. */
  private setListenerKey(peer: IP, password: string | undefined): void {
    for (const l of this.listeners) {
      if (!l.v6 && peer.family === 6) continue;
      const fd = fdOf(l.listener);
      if (fd === undefined) throw new Error(`the BGP listener on ${l.address} exposes no descriptor for TCP-MD5`);
      try {
        setMd5Key(fd, peer, password, l.v6);
      } catch (e) {
        // Removing a key that was never set fails with ENOENT: nothing to do.
        if (password !== undefined) throw e;
      }
    }
  }

  private onAccept(socket: Socket<SocketData>): void {
    const remote = parseIP(socket.remoteAddress.replace(/^::ffff:(?=\d+\.\d+\.\d+\.\d+$)/i, ''));
    const peer = remote ? this.peers.get(peerKey(remote)) : undefined;
    if (!peer) {
      this.log.debug(2, 'BGP: connection from an address that is not a configured peer, closed', { remote: socket.remoteAddress });
      socket.end();
      return;
    }
    const conn = peer.accept(socket);
    socket.data = conn ? { conn } : {};
  }
}

/** Deep equality of plain settings (addresses hold bigints, which JSON.stringify refuses). */
function same(a: unknown, b: unknown): boolean {
  const text = (v: unknown) => JSON.stringify(v, (_k, x) => (typeof x === 'bigint' ? x.toString() : x));
  return text(a) === text(b);
}

function peerKey(ip: IP): string {
  return `${ip.family}/${ip.value}`;
}
