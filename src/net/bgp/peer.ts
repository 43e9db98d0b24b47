import type { Socket } from 'bun';
import { formatIP, type IP, type IPFamily } from '../ip.ts';
import type { Logger } from '../../log.ts';
import { AdjRibOut, type PeerView } from './adj-rib-out.ts';
import { AS_TRANS, CeaseSubcode, ErrorCode, FsmError, HEADER_LENGTH, MessageType, OpenError, Safi } from './constants.ts';
import { Connection, type ConnectionState, QUEUE_CAP_FLOOR_BYTES, type Wire } from './connection.ts';
import { BgpError, describeNotification } from './errors.ts';
import { decodeMessage, encodeNotification, type RawMessage } from './message.ts';
import { type Capabilities, emptyCapabilities, encodeOpenBody, type OpenMessage, openAs, twoOctetAs } from './open.ts';
import type { BgpRoute } from './routes.ts';
import { adoptConnectedFd, connectTcp, fdOf, setTtl } from './tcp.ts';
import { afiOf, familyOf, type UpdateContext, type UpdateMessage } from './update.ts';
import { UPDATE_ERROR_KINDS, type UpdateErrorKind } from './update-faults.ts';
import { LogLimiter } from '../../util/log-limiter.ts';

/** RFC 4271 8.2.2 session states, as the peer's summary (the furthest of its connections). */
export type PeerState = 'idle' | 'connect' | 'active' | 'opensent' | 'openconfirm' | 'established';

/** One peer's settings, already parsed (see config.ts). */
export interface PeerSettings {
  address: IP;
  asn: number;
  port: number;
  holdTimeSeconds: number;
  password?: string;
  source?: IP;
  /** TTL / hop limit of what we send; undefined leaves the kernel default (64). */
  ttl?: number;
  passive: boolean;
  connectTimeoutMs: number;
  connectRetryMinMs: number;
  connectRetryMaxMs: number;
  families: IPFamily[];
  /** Offer ADD-PATH send. */
  addPath: boolean;
}

export interface LocalSettings {
  asn: number;
  routerId: number;
  /** Graceful restart (RFC 4724) as the restarting speaker; undefined: capability not sent. */
  gracefulRestart?: { restartTimeSeconds: number };
}

export interface NegotiatedSession {
  holdTimeSeconds: number;
  fourOctetAs: boolean;
  families: IPFamily[];
  /** Families where several next hops go out as separate paths (ADD-PATH, RFC 7911). */
  addPath: IPFamily[];
  gracefulRestart: boolean;
  routeRefresh: boolean;
  remoteRouterId: string;
}

export interface PeerStats {
  address: string;
  asn: number;
  state: PeerState;
  /** When the current session became established (ms since the epoch). */
  establishedAt?: number;
  uptimeSeconds: number;
  prefixesAnnounced: number;
  updatesSent: number;
  updatesReceived: number;
  notificationsSent: number;
  notificationsReceived: number;
  /** Times an established session went down. */
  flaps: number;
  /** Received UPDATE errors by how RFC 7606 handled them (see update-faults.ts). */
  updateErrors: Record<UpdateErrorKind, number>;
  /** ROUTE-REFRESH requests not answered because the previous answer was still queued. */
  routeRefreshesCoalesced: number;
  /** Bytes waiting for the peer to read them (the write queue). */
  queuedBytes: number;
  lastError?: string;
  negotiated?: NegotiatedSession;
}

export interface StateChange {
  peer: string;
  from: PeerState;
  to: PeerState;
  /** Why the session left established or a connection failed, when known. */
  reason?: string;
}

export interface PeerHooks {
  log: Logger;
  onStateChange(change: StateChange): void;
  /** Why this speaker may not connect, accept or send an UPDATE now (BgpSpeakerOptions.refusal). */
  refusal?(): string | undefined;
}

/** RFC 4271 10: the hold time before OPEN arrives is "a large value"; 4 minutes suggested. */
const OPEN_HOLD_MS = 240_000;
/** A session that lasted this long resets the connect-retry backoff. */
const STABLE_SESSION_MS = 30_000;
const STATE_RANK: Record<ConnectionState, number> = { opensent: 1, openconfirm: 2, established: 3 };

/** One log line per peer and kind of UPDATE error a minute: a peer can send thousands a second. */
const UPDATE_ERROR_LOG_WINDOW_MS = 60_000;

interface Session {
  rib: AdjRibOut;
  view: PeerView;
  recv: UpdateContext;
  negotiated: NegotiatedSession;
  establishedAt: number;
  /** Per family, the write-queue mark after the last ROUTE-REFRESH answer (Connection.mark). */
  refreshAnswered: Partial<Record<IPFamily, number>>;
}

/**
 * One BGP peer: its connections (at most one we opened and one it opened, until collision
 * detection, RFC 4271 6.8, keeps one), the session FSM on each (OpenSent, OpenConfirm,
 * Established), timers, connect retry with backoff, and the Adj-RIB-Out of the established
 * session. Every protocol error is answered with its NOTIFICATION and resets this peer only;
 * nothing a peer sends escapes as an exception.
 */
export class Peer {
  private conns: Connection[] = [];
  private session: { conn: Connection; s: Session } | undefined;
  private connecting: AbortController | undefined;
  private retryTimer: ReturnType<typeof setTimeout> | undefined;
  private failures = 0;
  private stopped = true;
  private everSynced = false;
  private routes: readonly BgpRoute[] = [];
  private current: PeerState = 'idle';
  private readonly counters = { updatesSent: 0, updatesReceived: 0, notificationsSent: 0, notificationsReceived: 0, flaps: 0, routeRefreshesCoalesced: 0 };
  private readonly updateErrors = Object.fromEntries(UPDATE_ERROR_KINDS.map((k) => [k, 0])) as Record<UpdateErrorKind, number>;
  private readonly updateErrorLog = new LogLimiter(UPDATE_ERROR_LOG_WINDOW_MS);
  private lastError: string | undefined;
  private readonly remoteOpens = new WeakMap<Connection, OpenMessage>();

  constructor(
    readonly settings: PeerSettings,
    private readonly local: LocalSettings,
    private readonly hooks: PeerHooks,
  ) {}

  get name(): string {
    return formatIP(this.settings.address);
  }

  get state(): PeerState {
    return this.current;
  }

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.updateState();
    if (!this.settings.passive) this.scheduleConnect(0);
  }

  /**
   * Ends the peer: with a Cease NOTIFICATION (subcode per RFC 4486), or with `graceful`
   * silently, so a peer that negotiated graceful restart keeps our routes until we return.
   */
  stop(how: { graceful: true } | { subcode: number }): void {
    this.stopped = true;
    clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    this.connecting?.abort();
    this.connecting = undefined;
    for (const conn of [...this.conns]) {
      if ('subcode' in how) this.notify(conn, new BgpError(ErrorCode.CEASE, how.subcode, 'stopped'));
      else conn.close();
    }
    this.updateState();
  }

  setRoutes(routes: readonly BgpRoute[]): void {
    this.routes = routes;
    const current = this.session;
    if (current) this.sendUpdates(current.conn, current.s.rib.sync(routes));
  }

  stats(): PeerStats {
    const s = this.session?.s;
    return {
      address: this.name,
      asn: this.settings.asn,
      state: this.current,
      ...(s ? { establishedAt: s.establishedAt } : {}),
      uptimeSeconds: s ? Math.floor((Date.now() - s.establishedAt) / 1000) : 0,
      prefixesAnnounced: s?.rib.prefixes ?? 0,
      ...this.counters,
      updateErrors: { ...this.updateErrors },
      queuedBytes: this.session?.conn.queuedBytes ?? 0,
      ...(this.lastError !== undefined ? { lastError: this.lastError } : {}),
      ...(s ? { negotiated: s.negotiated } : {}),
    };
  }

  /** An incoming connection from this peer's address (the speaker's listener matched it). */
  accept(socket: Socket<{ conn?: Connection }>): Connection | undefined {
    const refused = this.hooks.refusal?.();
    if (this.stopped || refused) {
      if (refused) this.lastError = `connection from ${this.name} closed: ${refused}`;
      socket.end();
      return undefined;
    }
    // A newer connection from the peer replaces one of its own still in the handshake.
    for (const c of this.conns) if (c.direction === 'in' && c.state !== 'established') c.close();
    const fd = fdOf(socket);
    if (this.settings.ttl !== undefined && fd !== undefined) {
      try {
        setTtl(fd, this.settings.address.family, this.settings.ttl);
      } catch (e) {
        this.hooks.log.warn('BGP: cannot set the TTL of an accepted connection', { peer: this.name, error: e });
      }
    }
    return this.open('in', socket);
  }

  private open(direction: 'in' | 'out', wire: Wire): Connection {
    const conn = new Connection(direction, wire, {
      messages: (c, m) => this.onMessages(c, m),
      framingError: (c, e) => this.onError(c, e),
      closed: (c) => this.onClosed(c),
      overflow: (c, queued) => this.notify(c, new BgpError(ErrorCode.CEASE, CeaseSubcode.OUT_OF_RESOURCES, `write queue full: ${queued} bytes the peer has not read (cap ${c.maxQueuedBytes})`)),
      sendHoldExpired: (c, ms) => this.notify(c, new BgpError(ErrorCode.SEND_HOLD_TIMER_EXPIRED, 0, `send hold timer expired: the peer read nothing for ${Math.round(ms / 1000)} s`)),
    });
    conn.sendHoldMs = OPEN_HOLD_MS;
    this.conns.push(conn);
    conn.send(MessageType.OPEN, encodeOpenBody(this.ourOpen()));
    this.setHold(conn, OPEN_HOLD_MS);
    this.updateState();
    return conn;
  }

  private ourOpen(): Omit<OpenMessage, 'type' | 'version'> {
    const families = this.settings.families;
    const caps: Capabilities = {
      ...emptyCapabilities(),
      multiprotocol: families.map((f) => ({ afi: afiOf(f), safi: Safi.UNICAST })),
      routeRefresh: true,
      fourOctetAs: this.local.asn,
      // We send several paths per prefix where the peer can receive them; we never receive any.
      addPath: this.settings.addPath ? families.map((f) => ({ afi: afiOf(f), safi: Safi.UNICAST, send: true, receive: false })) : [],
    };
    if (this.local.gracefulRestart) {
      caps.gracefulRestart = {
        // R: this process has not completed a sync with the peer yet, i.e. it (re)started.
        restartState: !this.everSynced,
        notification: false,
        restartTimeSeconds: this.local.gracefulRestart.restartTimeSeconds,
        // F: forwarding does not depend on this process (the nodes forward), so it survives.
        families: families.map((f) => ({ afi: afiOf(f), safi: Safi.UNICAST, forwardingPreserved: true })),
      };
    }
    return { myAs: twoOctetAs(this.local.asn), holdTime: this.settings.holdTimeSeconds, bgpId: this.local.routerId, capabilities: caps };
  }

  // ---- connecting ----

  private backoffMs(): number {
    const { connectRetryMinMs: min, connectRetryMaxMs: max } = this.settings;
    const base = Math.min(max, min * 2 ** Math.min(this.failures, 20));
    return Math.round(base * (0.75 + Math.random() * 0.25));
  }

  private scheduleConnect(delayMs: number): void {
    if (this.stopped || this.settings.passive || this.retryTimer || this.connecting) return;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      void this.connect();
    }, delayMs);
  }

  private async connect(): Promise<void> {
    // Something is under way or up already: RFC 4271 lets us wait for it.
    if (this.stopped || this.conns.length > 0) return;
    const refused = this.hooks.refusal?.();
    if (refused) {
      this.failed(`connect to ${this.name} not attempted: ${refused}`);
      return;
    }
    const abort = new AbortController();
    this.connecting = abort;
    this.updateState();
    const s = this.settings;
    let fd: number;
    try {
      fd = await connectTcp({
        remote: s.address,
        port: s.port,
        timeoutMs: s.connectTimeoutMs,
        signal: abort.signal,
        ...(s.source ? { source: s.source } : {}),
        ...(s.password !== undefined ? { md5Key: s.password } : {}),
        ...(s.ttl !== undefined ? { ttl: s.ttl } : {}),
      });
    } catch (e) {
      if (this.connecting === abort) this.connecting = undefined;
      if (this.stopped || abort.signal.aborted) return;
      this.failed(`connect to ${this.name}:${s.port}: ${e instanceof Error ? e.message : String(e)}`);
      return;
    }
    this.connecting = undefined;
    if (this.stopped || this.session) {
      // Stopped or established through the peer's own connection while we connected.
      adoptConnectedFd(fd, { data() {}, open: (sock) => void sock.end() }).catch(() => {});
      return;
    }
    let conn: Connection | undefined;
    try {
      await adoptConnectedFd<undefined>(fd, {
        open: (sock) => {
          conn = this.open('out', sock);
        },
        data: (_sock, chunk) => conn?.onData(chunk),
        drain: () => conn?.onDrain(),
        close: () => conn?.onClosed(),
        error: (_sock, e) => {
          this.lastError = e.message;
          conn?.onClosed();
        },
      });
    } catch (e) {
      this.failed(`connection to ${this.name}: ${e instanceof Error ? e.message : String(e)}`);
    }
  }

  private failed(reason: string): void {
    this.lastError = reason;
    this.failures++;
    this.hooks.log.debug(2, 'BGP: connection attempt failed', { peer: this.name, error: reason });
    this.updateState(reason);
    this.scheduleConnect(this.backoffMs());
  }

  // ---- messages ----

  private onMessages(conn: Connection, messages: RawMessage[]): void {
    for (const raw of messages) {
      if (conn.closed) return;
      try {
        this.handle(conn, raw);
      } catch (e) {
        if (raw.type === MessageType.UPDATE && e instanceof BgpError && e.code === ErrorCode.UPDATE_MESSAGE) this.updateErrors.session_reset++;
        this.onError(conn, e);
        return;
      }
    }
  }

  private handle(conn: Connection, raw: RawMessage): void {
    if (raw.type === MessageType.NOTIFICATION) {
      const n = decodeMessage(raw, this.recvContext(conn));
      if (n.type !== 'notification') return;
      this.counters.notificationsReceived++;
      const text = `peer sent NOTIFICATION ${describeNotification(n.code, n.subcode)}`;
      this.lastError = text;
      // RFC 4271 8.2.2: a NOTIFICATION in OpenSent (other than a version error) is answered with
      // an FSM error; elsewhere the connection is just dropped.
      if (conn.state === 'opensent' && !(n.code === ErrorCode.OPEN_MESSAGE && n.subcode === OpenError.UNSUPPORTED_VERSION)) {
        this.notify(conn, new BgpError(ErrorCode.FSM, FsmError.UNEXPECTED_IN_OPEN_SENT, `${text} instead of OPEN`));
      } else this.drop(conn, text);
      return;
    }
    switch (conn.state) {
      case 'opensent':
        if (raw.type !== MessageType.OPEN) throw new BgpError(ErrorCode.FSM, FsmError.UNEXPECTED_IN_OPEN_SENT, `message type ${raw.type} received before OPEN`);
        this.onOpen(conn, decodeMessage(raw, this.recvContext(conn)) as OpenMessage);
        return;
      case 'openconfirm':
        if (raw.type !== MessageType.KEEPALIVE) throw new BgpError(ErrorCode.FSM, FsmError.UNEXPECTED_IN_OPEN_CONFIRM, `message type ${raw.type} received in OpenConfirm (expected KEEPALIVE)`);
        this.restartHold(conn);
        this.establish(conn);
        return;
      case 'established': {
        if (raw.type === MessageType.OPEN) throw new BgpError(ErrorCode.FSM, FsmError.UNEXPECTED_IN_ESTABLISHED, 'OPEN received in Established');
        const m = decodeMessage(raw, this.recvContext(conn));
        this.restartHold(conn);
        if (m.type === 'update') this.onUpdate(m);
        else if (m.type === 'route-refresh') this.onRouteRefresh(conn, m.afi, m.safi, m.subtype);
        return;
      }
    }
  }

  /** Counts a received UPDATE and what RFC 7606 let pass in it; this speaker installs nothing. */
  private onUpdate(u: UpdateMessage): void {
    this.counters.updatesReceived++;
    if (!u.faults) return;
    // Treat-as-withdraw counts once per UPDATE (all its routes go), the others per attribute.
    if (u.treatAsWithdraw) this.updateErrors.treat_as_withdraw++;
    for (const f of u.faults) if (f.action !== 'treat_as_withdraw') this.updateErrors[f.action]++;
    const first = u.faults[0]!;
    const allowed = this.updateErrorLog.allow(first.action);
    if (allowed) {
      this.hooks.log.warn('BGP: malformed UPDATE handled without a reset (RFC 7606)', {
        peer: this.name,
        action: u.treatAsWithdraw ? 'treat_as_withdraw' : first.action,
        error: u.faults.map((f) => f.what).join('; '),
        ...(allowed.suppressed > 0 ? { suppressed: allowed.suppressed } : {}),
      });
    }
  }

  private onOpen(conn: Connection, open: OpenMessage): void {
    const asn = openAs(open);
    if (asn !== this.settings.asn) {
      const data = new Uint8Array(2);
      new DataView(data.buffer).setUint16(0, open.myAs);
      throw new BgpError(ErrorCode.OPEN_MESSAGE, OpenError.BAD_PEER_AS, `OPEN: peer AS ${asn}${open.myAs === AS_TRANS && open.capabilities.fourOctetAs === undefined ? ' (AS_TRANS without the 4-octet capability)' : ''} is not the configured ${this.settings.asn}`, data);
    }
    if (open.bgpId === 0 || (this.settings.asn === this.local.asn && open.bgpId === this.local.routerId)) {
      throw new BgpError(ErrorCode.OPEN_MESSAGE, OpenError.BAD_BGP_IDENTIFIER, `OPEN: BGP identifier ${formatRouterId(open.bgpId)} is ${open.bgpId === 0 ? 'zero' : 'our own (iBGP)'}`);
    }
    this.remoteOpens.set(conn, open);
    for (const other of this.conns) {
      if (other === conn || other.closed) continue;
      if (other.state === 'established') {
        // RFC 4724 4.2: a new connection from a peer we have a session with, both sides
        // graceful-restart capable, means the peer restarted: the old session is gone.
        const otherOpen = this.remoteOpens.get(other);
        if (conn.direction === 'in' && open.capabilities.gracefulRestart && otherOpen?.capabilities.gracefulRestart) {
          this.drop(other, 'peer reconnected (graceful restart)');
          continue;
        }
        this.notify(conn, new BgpError(ErrorCode.CEASE, CeaseSubcode.CONNECTION_COLLISION_RESOLUTION, 'a session is already established'));
        return;
      }
      if (other.state === 'openconfirm') {
        // RFC 4271 6.8: the higher BGP identifier's connection survives.
        const loser = this.local.routerId >>> 0 < open.bgpId >>> 0 ? (conn.direction === 'out' ? conn : other) : conn.direction === 'in' ? conn : other;
        this.notify(loser, new BgpError(ErrorCode.CEASE, CeaseSubcode.CONNECTION_COLLISION_RESOLUTION, 'connection collision'));
        if (loser === conn) return;
      }
    }
    conn.state = 'openconfirm';
    conn.send(MessageType.KEEPALIVE);
    const hold = Math.min(this.settings.holdTimeSeconds, open.holdTime);
    conn.stopTimers();
    // RFC 9687: a peer that reads nothing of ours for the hold time is dropped (with hold time
    // 0, which turns keepalives off, after RFC 4271's "large value" of 4 minutes).
    conn.sendHoldMs = hold > 0 ? hold * 1000 : OPEN_HOLD_MS;
    if (hold > 0) {
      conn.keepaliveTimer = setInterval(() => conn.send(MessageType.KEEPALIVE), (hold * 1000) / 3);
      this.setHold(conn, hold * 1000);
    }
    this.updateState();
  }

  private establish(conn: Connection): void {
    const open = this.remoteOpens.get(conn)!;
    for (const other of this.conns) {
      if (other !== conn) this.notify(other, new BgpError(ErrorCode.CEASE, CeaseSubcode.CONNECTION_COLLISION_RESOLUTION, 'the other connection was established'));
    }
    const caps = open.capabilities;
    const offered = new Set<IPFamily>();
    if (caps.multiprotocol.length === 0) offered.add(4); // RFC 4760 8: no MP capability = IPv4 unicast only
    for (const f of caps.multiprotocol) {
      const family = familyOf(f.afi, f.safi);
      if (family) offered.add(family);
    }
    const families = new Set(this.settings.families.filter((f) => offered.has(f)));
    // Several paths go out for a family only where we offered to send and the peer to receive.
    const addPathSend = { 4: false, 6: false } as Record<IPFamily, boolean>;
    for (const a of caps.addPath) {
      const family = familyOf(a.afi, a.safi);
      if (family && a.receive && this.settings.addPath && families.has(family)) addPathSend[family] = true;
    }
    const fourOctetAs = caps.fourOctetAs !== undefined;
    const view: PeerView = { localAsn: this.local.asn, ibgp: this.settings.asn === this.local.asn, families, addPathSend, ctx: { fourOctetAs, addPath: addPathSend } };
    const negotiated: NegotiatedSession = {
      holdTimeSeconds: Math.min(this.settings.holdTimeSeconds, open.holdTime),
      fourOctetAs,
      families: [...families].sort(),
      addPath: ([4, 6] as const).filter((f) => addPathSend[f]),
      gracefulRestart: this.local.gracefulRestart !== undefined && caps.gracefulRestart !== undefined,
      routeRefresh: caps.routeRefresh,
      remoteRouterId: formatRouterId(open.bgpId),
    };
    const ebgp = this.settings.asn !== this.local.asn;
    const s: Session = { rib: new AdjRibOut(view), view, recv: { fourOctetAs, addPath: { 4: false, 6: false }, ebgp }, negotiated, establishedAt: Date.now(), refreshAnswered: {} };
    conn.state = 'established';
    this.session = { conn, s };
    this.lastError = undefined;
    this.updateState();
    this.hooks.log.info('BGP session established', { peer: this.name, asn: this.settings.asn, families: negotiated.families.join(','), addPath: negotiated.addPath.join(',') || 'none' });
    // The initial table, then End-of-RIB for each family (RFC 4724 2).
    const table = [...s.rib.sync(this.routes), ...s.rib.endOfRib()];
    this.fitQueueCap(conn, table);
    this.sendUpdates(conn, table);
    this.everSynced = true;
  }

  private onRouteRefresh(conn: Connection, afi: number, safi: number, subtype: number): void {
    const family = familyOf(afi, safi);
    const s = this.session?.s;
    // Subtypes 1 and 2 (RFC 7313 demarcation) are not requests; unknown families are ignored (RFC 2918 4).
    if (!s || subtype !== 0 || !family || !s.view.families.has(family)) return;
    // The previous answer still waits in the queue: once it is read the peer has the whole
    // table, so a new answer would only queue it again (a peer that asks in a loop and never
    // reads would otherwise fill memory with copies of the table).
    const previous = s.refreshAnswered[family];
    if (previous !== undefined && !conn.sentThrough(previous)) {
      this.counters.routeRefreshesCoalesced++;
      return;
    }
    const answer = s.rib.refresh(family);
    this.fitQueueCap(conn, answer);
    this.sendUpdates(conn, answer);
    s.refreshAnswered[family] = conn.mark();
  }

  /**
   * The write queue holds a full table (initial or a refresh answer) plus changes: its cap is
   * at least twice the largest full table sent, so only a peer more than a table behind
   * overflows it (QUEUE_CAP_FLOOR_BYTES below that).
   */
  private fitQueueCap(conn: Connection, table: Uint8Array[]): void {
    let bytes = 0;
    for (const b of table) bytes += b.length + HEADER_LENGTH;
    conn.maxQueuedBytes = Math.max(conn.maxQueuedBytes, QUEUE_CAP_FLOOR_BYTES, 2 * bytes);
  }

  private sendUpdates(conn: Connection, bodies: Uint8Array[]): void {
    if (bodies.length === 0) return;
    const refused = this.hooks.refusal?.();
    if (refused) {
      // The Adj-RIB-Out already counts these as sent: only a new session (whole table) is right
      // again. Closed without a NOTIFICATION, so routers keep the routes as stale meanwhile.
      this.lastError = `session closed, UPDATE not sent: ${refused}`;
      conn.close();
      return;
    }
    this.counters.updatesSent += bodies.length;
    conn.sendMany(MessageType.UPDATE, bodies);
  }

  private recvContext(conn: Connection): UpdateContext {
    if (this.session?.conn === conn) return this.session.s.recv;
    return { fourOctetAs: this.remoteOpens.get(conn)?.capabilities.fourOctetAs !== undefined, addPath: { 4: false, 6: false } };
  }

  // ---- timers, errors, teardown ----

  private setHold(conn: Connection, ms: number): void {
    clearTimeout(conn.holdTimer);
    conn.holdTimer = setTimeout(() => this.notify(conn, new BgpError(ErrorCode.HOLD_TIMER_EXPIRED, 0, `hold timer expired (${ms / 1000} s without a message)`)), ms);
  }

  private restartHold(conn: Connection): void {
    if (!conn.holdTimer) return;
    conn.holdTimer.refresh();
  }

  private onError(conn: Connection, e: unknown): void {
    if (e instanceof BgpError) {
      this.notify(conn, e);
      return;
    }
    // A defect here, not the peer's fault: still only this peer is reset.
    this.hooks.log.error('BGP: internal error handling a message; resetting the session', { peer: this.name, error: e });
    this.notify(conn, new BgpError(ErrorCode.CEASE, 0, `internal error: ${e instanceof Error ? e.message : String(e)}`));
  }

  /** Sends the NOTIFICATION for `e` and closes the connection. */
  private notify(conn: Connection, e: BgpError): void {
    if (conn.closed) return;
    conn.writeRaw(encodeNotification(e.code, e.subcode, e.data));
    this.counters.notificationsSent++;
    const text = `sent NOTIFICATION ${describeNotification(e.code, e.subcode)}: ${e.message}`;
    if (e.code !== ErrorCode.CEASE || e.subcode !== CeaseSubcode.CONNECTION_COLLISION_RESOLUTION) {
      this.lastError = text;
      this.hooks.log.warn('BGP: session reset', { peer: this.name, error: text });
    }
    this.drop(conn, text);
  }

  private drop(conn: Connection, reason: string): void {
    this.onClosed(conn, reason);
    conn.close();
  }

  private onClosed(conn: Connection, reason?: string): void {
    const i = this.conns.indexOf(conn);
    if (i < 0) return;
    this.conns.splice(i, 1);
    this.remoteOpens.delete(conn);
    if (this.session?.conn === conn) {
      const uptime = Date.now() - this.session.s.establishedAt;
      this.session = undefined;
      this.counters.flaps++;
      if (uptime >= STABLE_SESSION_MS) this.failures = 0;
      this.failures++;
      this.updateState(reason ?? this.lastError ?? 'connection closed');
    } else {
      if (conn.direction === 'out') this.failures++;
      this.updateState(reason);
    }
    if (this.conns.length === 0) this.scheduleConnect(this.backoffMs());
  }

  private updateState(reason?: string): void {
    let next: PeerState;
    const best = Math.max(0, ...this.conns.map((c) => STATE_RANK[c.state]));
    if (this.stopped) next = 'idle';
    else if (best > 0) next = best === 3 ? 'established' : best === 2 ? 'openconfirm' : 'opensent';
    else next = this.connecting ? 'connect' : 'active';
    if (next === this.current) return;
    const from = this.current;
    this.current = next;
    this.hooks.onStateChange({ peer: this.name, from, to: next, ...(reason !== undefined ? { reason } : {}) });
  }
}

export function formatRouterId(id: number): string {
  return [id >>> 24, (id >>> 16) & 0xff, (id >>> 8) & 0xff, id & 0xff].join('.');
}

