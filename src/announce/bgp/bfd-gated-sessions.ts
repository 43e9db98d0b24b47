import type { Logger } from '../../log.ts';
import { BfdEndpoint } from '../../net/bfd/endpoint.ts';
import { BfdDiag, BfdState } from '../../net/bfd/packet.ts';
import type { BfdTimers } from '../../net/bfd/session.ts';
import { BgpSpeaker, type Announcement, type PeerConfig, type SpeakerConfig } from '../../net/bgp/speaker.ts';
import { formatIP, parseIP } from '../../net/ip.ts';
import type { NodeSessionStats } from './node-metrics.ts';

/**
 * One host's own BGP sessions, each tied to a BFD session with the same peer: what a node's
 * speaker (`announceFrom: nodes`) and `edge-ccm vip --announce bgp` both run, so that a host that
 * dies (power, link, kernel) leaves the routers' tables within BFD's detection time rather than
 * BGP's hold time:
 *
 * - one BgpSpeaker per peer, so that each peer's table follows its own BFD session: a peer whose
 *   BFD session is not Up has a BGP session (a router with dynamic neighbors creates its BFD
 *   session only once BGP is up) but nothing announced on it;
 * - `setTable` is synchronous: an UPDATE (a withdrawal) is written before it returns, so a caller
 *   that withdraws and then tells others it did keeps that order on the wire;
 * - no graceful restart is offered: a process that stops takes its paths with it.
 */

export interface SessionsPlan {
  localAsn: number;
  routerId: string;
  /** Each with its sourceAddress: our address of the peer's family (BFD runs from it too). */
  peers: PeerConfig[];
  /** undefined: BFD off, a peer's table is announced as soon as BGP is up. */
  bfd?: BfdTimers;
}

export interface BfdGatedSessionsOptions {
  log: Logger;
  /** A BFD session changed state or a session was replaced: the owner applies its plan again. */
  onChange: () => void;
  /** Why nothing may be sent now (BgpSpeakerOptions.refusal): a process woken from a long pause. */
  refusal?: () => string | undefined;
  /** UDP port BFD is received on (default 3784) and the peers' BFD port (default 3784); tests change them. */
  bfdPort?: number;
  bfdPeerPort?: number;
}

/** Where one peer stands, for the debug log and tests. */
export interface PeerSessionView {
  address: string;
  local: string;
  /** The table is announced to this peer (its BFD session is Up, or BFD is off). */
  announcing: boolean;
  bfd?: keyof typeof BfdState;
  bgp?: string;
}

export class BfdGatedSessions {
  private readonly sessions = new Map<string, { speaker: BgpSpeaker; config: string; announcing: boolean }>();
  private bfd?: BfdEndpoint;
  /** BFD sessions in place: peer -> our address in it and its timers, as text. */
  private readonly bfdSessions = new Map<string, string>();
  /** Peers whose BFD session is Up. */
  private readonly bfdUp = new Set<string>();
  private table: readonly Announcement[] = [];
  private bfdOn = false;

  constructor(private readonly o: BfdGatedSessionsOptions) {}

  get size(): number {
    return this.sessions.size;
  }

  /** Every peer's BGP session and BFD session; undefined while none runs. */
  stats(): NodeSessionStats | undefined {
    if (this.sessions.size === 0 && !this.bfd) return undefined;
    const sessions = [...this.sessions.values()];
    return {
      bgp: { announcements: Math.max(0, ...sessions.map((s) => s.speaker.stats().announcements)), peers: sessions.flatMap((s) => s.speaker.stats().peers) },
      bfd: this.bfd?.stats().sessions ?? [],
    };
  }

  views(): PeerSessionView[] {
    return [...this.sessions.entries()].map(([address, s]) => {
      const session = this.bfd?.session(address);
      const bgp = s.speaker.stats().peers[0];
      return { address, local: (JSON.parse(s.config) as SpeakerConfig).peers[0]!.sourceAddress!, announcing: s.announcing, ...(session ? { bfd: BfdState[session.state] as keyof typeof BfdState } : {}), ...(bgp ? { bgp: bgp.state } : {}) };
    });
  }

  /** Replaces what every peer whose BFD session is Up is told (at once, before returning). */
  setTable(table: readonly Announcement[]): void {
    this.table = table;
    for (const s of this.sessions.values()) s.speaker.setAnnouncements(s.announcing ? table : []);
  }

  /** Sessions and BFD sessions as the plan says, with `table` announced where BFD allows. */
  async apply(plan: SessionsPlan, table: readonly Announcement[], isEnded: () => boolean = () => false): Promise<void> {
    this.table = table;
    this.bfdOn = !!plan.bfd;
    await this.applyBfd(plan.bfd, plan.peers);
    const wanted = new Map(plan.peers.map((p) => [key(p.address), p]));
    for (const [peer, session] of this.sessions) {
      if (wanted.has(peer)) continue;
      this.sessions.delete(peer);
      await session.speaker.stop({ graceful: false });
    }
    for (const [peer, settings] of wanted) {
      if (isEnded()) return;
      // Nothing announced to a peer until its BFD session is Up: a path only once packets flow both ways.
      const announcing = !this.bfdOn || this.bfdUp.has(peer);
      const config: SpeakerConfig = { localAsn: plan.localAsn, routerId: plan.routerId, listen: false, peers: [settings] };
      const text = JSON.stringify(config);
      let session = this.sessions.get(peer);
      if (session && announcing && !session.announcing && session.speaker.stats().peers[0]?.state !== 'established') {
        // BFD just came Up and BGP is not: packets flow again, so connect now rather than at the
        // end of a connect-retry backoff that grew while the link was down.
        this.sessions.delete(peer);
        await session.speaker.stop({ graceful: false });
        session = undefined;
        this.o.log.info('announcing to the peer: its BFD session is Up (connecting again at once)', { peer, announcements: this.table.length });
      }
      if (!session) {
        const speaker = await BgpSpeaker.start(config, {
          log: this.o.log,
          announcements: announcing ? this.table : [],
          ...(this.o.refusal ? { refusal: this.o.refusal } : {}),
          onStateChange: (c) => {
            if (c.to === 'established') this.o.log.info('BGP session established', { peer: c.peer });
            else if (c.from === 'established') this.o.log.info('BGP session down', { peer: c.peer, reason: c.reason });
          },
        });
        session = { speaker, config: text, announcing };
        this.sessions.set(peer, session);
        this.o.log.info('BGP session started', { peer, local: settings.sourceAddress, announcing, announcements: this.table.length });
        continue;
      }
      if (session.config !== text) {
        session.speaker.reconfigure(config);
        session.config = text;
      }
      if (session.announcing !== announcing) this.o.log.info(announcing ? 'announcing to the peer: its BFD session is Up' : 'withdrawn from the peer: its BFD session is down', { peer, announcements: this.table.length });
      session.announcing = announcing;
      session.speaker.setAnnouncements(announcing ? this.table : []);
    }
  }

  /** One BFD session per peer, from our address of its family; peers gone or moved lose theirs. */
  private async applyBfd(timers: BfdTimers | undefined, peers: PeerConfig[]): Promise<void> {
    const wanted = new Map(timers ? peers.map((p) => [key(p.address), `${p.sourceAddress} ${JSON.stringify(timers)}`]) : []);
    for (const [peer, setting] of this.bfdSessions) {
      if (wanted.get(peer) === setting) continue;
      this.bfdSessions.delete(peer);
      this.bfdUp.delete(peer);
      await this.bfd?.removeSession(peer);
    }
    if (wanted.size === 0) {
      await this.bfd?.close();
      this.bfd = undefined;
      return;
    }
    this.bfd ??= await BfdEndpoint.open({ log: this.o.log, ...(this.o.bfdPort !== undefined ? { port: this.o.bfdPort } : {}) });
    for (const [peer, setting] of wanted) {
      if (this.bfdSessions.has(peer)) continue;
      const local = setting.split(' ')[0]!;
      this.bfdSessions.set(peer, setting);
      await this.bfd.addSession(peer, {
        local,
        timers: timers!,
        ...(this.o.bfdPeerPort !== undefined ? { port: this.o.bfdPeerPort } : {}),
        onStateChange: (c) => {
          if (this.bfdSessions.get(peer) !== setting) return; // a session being replaced
          const up = c.to === BfdState.Up;
          this.o.log.info(up ? 'BFD session up' : 'BFD session down', { peer, from: BfdState[c.from], to: BfdState[c.to], ...(up ? {} : { diag: BfdDiag[c.diag] }) });
          if (up) this.bfdUp.add(peer);
          else this.bfdUp.delete(peer);
          this.o.onChange();
        },
      });
    }
  }

  /** BGP first (a Cease: the router withdraws at once), then BFD AdminDown. */
  async shutdown(): Promise<void> {
    const sessions = [...this.sessions.values()];
    this.sessions.clear();
    await Promise.all(sessions.map((s) => s.speaker.stop({ graceful: false })));
    const bfd = this.bfd;
    this.bfd = undefined;
    this.bfdSessions.clear();
    this.bfdUp.clear();
    await bfd?.close();
  }
}

function key(address: string): string {
  return formatIP(parseIP(address)!);
}

/**
 * The BGP identifier of a host without an IPv4 address: a non-zero 32-bit hash of its name
 * (FNV-1a), shown dotted. Routers need only that it differs from theirs and stays put.
 */
export function routerIdOf(name: string): string {
  let h = 0x811c9dc5;
  for (const c of new TextEncoder().encode(name)) h = Math.imul(h ^ c, 0x01000193) >>> 0;
  h = h || 1;
  return [h >>> 24, (h >>> 16) & 255, (h >>> 8) & 255, h & 255].join('.');
}
