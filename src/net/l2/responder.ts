import { formatIP, ipToBytes, parseIP, type IP } from '../ip.ts';
import { handleArpFrame, handleNdpFrame, unsolicitedAdvertisementFrame, type FrameOutcome, type LinkState } from './answer.ts';
import { gratuitousArpFrames } from './arp.ts';
import { solicitedNodeAddress } from './ndp.ts';
import { arpFilter } from './arp-filter.ts';
import { WatchedPacketSocket } from './doorbell.ts';
import { drainFrames, ETH_P_ARP, ETH_P_IPV6, MulticastMembership, PACKET_OTHERHOST, PACKET_OUTGOING, PacketSocket, type BpfInstruction } from './packet-socket.ts';
import { RefusalTally, type MalformedReason, type MartianReason, type Refusal } from './refusals.ts';

/**
 * Answers ARP requests and IPv6 Neighbor Solicitations for the addresses it is given, on the
 * interfaces it is given and nowhere else; announces an address it takes over with gratuitous
 * ARP / unsolicited Neighbor Advertisements. Which addresses this node should announce is decided
 * elsewhere (election.ts): the responder only knows frames.
 *
 * Frames are read from non-blocking sockets when their doorbell rings (doorbell.ts: Bun's own
 * epoll loop wakes us when a frame has arrived), never by a blocking call: the event loop stays
 * free, and no Worker thread is needed (a Worker costs a whole JS VM, and one blocked in recv()
 * cannot be ended until a frame arrives). An idle responder is never woken: no timer runs but the
 * one repeating takeover announcements while some are pending, and the ARP socket's kernel filter
 * (arp-filter.ts) keeps out the segment's ARP about other hosts' addresses. A ring reads its socket until it
 * is empty, at most MAX_FRAMES_PER_READ frames; when that cap is reached (a flood), the socket is
 * read again after floodPauseMs, as the 10 ms polling tick used to, so a flood costs at most the
 * CPU it did (issue 34). Measured with bench/l2-poll-cost.ts (docs/networking/l2.md).
 */
export const DEFAULT_FLOOD_PAUSE_MS = 10;
/** RFC 5227 §1.1 ANNOUNCE_NUM is 2, 2 s apart; one more, sooner, shortens failover when the first is lost. */
export const DEFAULT_ANNOUNCE_COUNT = 3;
export const DEFAULT_ANNOUNCE_INTERVAL_MS = 1000;
const MAX_FRAMES_PER_READ = 256;
/** A refused frame's detail is reported (the 'refused' event) at most once per reason per this window. */
export const DEFAULT_REFUSAL_REPORT_WINDOW_MS = 10_000;
/** Frames up to a jumbo MTU; ARP and NDP frames are far shorter. */
const RECEIVE_BUFFER_SIZE = 9216;

/** Lets only ICMPv6 Neighbor Solicitations and Advertisements (no extension headers) reach us. */
export const NEIGHBOR_DISCOVERY_FILTER: BpfInstruction[] = [
  { code: 0x30, jt: 0, jf: 0, k: 14 + 6 }, // ldb [20]: IPv6 next header
  { code: 0x15, jt: 0, jf: 4, k: 58 }, //      jeq ICMPv6, else drop
  { code: 0x30, jt: 0, jf: 0, k: 14 + 40 }, // ldb [54]: ICMPv6 type
  { code: 0x15, jt: 1, jf: 0, k: 135 }, //     jeq Neighbor Solicitation: accept
  { code: 0x15, jt: 0, jf: 1, k: 136 }, //     jeq Neighbor Advertisement: accept, else drop
  { code: 0x06, jt: 0, jf: 0, k: 0x40000 }, // accept the whole frame
  { code: 0x06, jt: 0, jf: 0, k: 0 }, //       drop
];

/** Interface name -> the addresses (IPv4 and IPv6 text) this node announces on it. */
export type AnnouncementTable = ReadonlyMap<string, ReadonlySet<string> | readonly string[]>;

export type ResponderEvent =
  | { type: 'takeover'; interface: string; address: string }
  | { type: 'release'; interface: string; address: string }
  /** Another station speaks for an address we announce (a former announcer, or a conflict). */
  | { type: 'claim'; interface: string; address: string; mac: string }
  /**
   * A frame refused as malformed or martian: at most one event per reason per report window
   * (a flood stays a line per reason), `notReportedSince` counting the ones in between.
   */
  | ({ type: 'refused'; interface: string; notReportedSince: number } & Refusal)
  | { type: 'error'; interface: string; message: string };

export interface AnnouncementProblem {
  interface: string;
  address?: string;
  message: string;
}

export interface ResponderStats {
  /** Times a socket was read because its doorbell rang: wake-ups for frames (none while nothing arrives). */
  rings: number;
  /** Address -> ARP replies and Neighbor Advertisements sent in answer to a request. */
  answers: Record<string, number>;
  /** Address -> times this responder began announcing it. */
  takeovers: Record<string, number>;
  /** Address -> frames from other stations claiming it. */
  claims: Record<string, number>;
  malformedFrames: number;
  /** Reason -> count, for the malformed frames: every reason of a fixed set, whatever arrives. */
  malformedReasons: Record<MalformedReason, number>;
  /** Well-formed frames from a sender no station can be (refusals.ts), ignored as Linux ignores them. */
  martianFrames: number;
  martianReasons: Record<MartianReason, number>;
  sendErrors: number;
  /** Requests read while answering was not allowed (just woken from a pause): dropped, never answered late. */
  dropped: number;
}

export interface ResponderOptions {
  /** After a read stopped at its cap (a flood), the socket is read again this much later. Default DEFAULT_FLOOD_PAUSE_MS. */
  floodPauseMs?: number;
  /**
   * False: answer nothing and send no announcement now; frames read meanwhile are dropped, not
   * answered later (a process woken from a pause finds requests queued for the time it was out,
   * when another node held the addresses). Default: always true.
   */
  mayAnswer?: () => boolean;
  announceCount?: number;
  announceIntervalMs?: number;
  onEvent?: (event: ResponderEvent) => void;
  /** Default DEFAULT_REFUSAL_REPORT_WINDOW_MS. */
  refusalReportWindowMs?: number;
}

interface PendingAnnouncement {
  address: string;
  family: 4 | 6;
  frames: Uint8Array[];
  remaining: number;
  dueAt: number;
}

/** The sockets and addresses of one interface. */
class InterfaceAnnouncer {
  arp?: WatchedPacketSocket;
  ndp?: WatchedPacketSocket;
  groups?: MulticastMembership;
  /** Solicited-node groups joined, by their hex (addresses may share one). */
  readonly joined = new Set<string>();
  readonly ipv4: LinkState = { mac: new Uint8Array(6), addresses: new Set() };
  readonly ipv6: LinkState = { mac: new Uint8Array(6), addresses: new Set() };
  pending: PendingAnnouncement[] = [];
  /** The ARP socket whose filter was last set (arp-filter.ts), and the IPv4 addresses it lets in. */
  arpFiltered?: { socket: WatchedPacketSocket; addresses: ReadonlySet<string> };

  constructor(readonly name: string) {}

  get addresses(): string[] {
    return [...this.ipv4.addresses, ...this.ipv6.addresses];
  }

  close(): void {
    this.arp?.close();
    this.ndp?.close();
    this.groups?.close();
    this.arp = this.ndp = this.groups = undefined;
    this.arpFiltered = undefined;
    this.joined.clear();
    this.pending = [];
  }

  /**
   * Lets into the ARP socket only frames about the IPv4 addresses announced here (arp-filter.ts):
   * true when the filter changed, and the socket must then be read once (WatchedPacketSocket.setFilter).
   */
  filterArp(): boolean {
    const addresses = this.ipv4.addresses;
    const last = this.arpFiltered;
    // Checked against the socket too: one closed and opened again (an IPv6-only table between) has no filter yet.
    if (!this.arp || (last?.socket === this.arp && last.addresses.size === addresses.size && [...addresses].every((a) => last.addresses.has(a)))) return false;
    this.arp.setFilter(arpFilter(addresses));
    this.arpFiltered = { socket: this.arp, addresses: new Set(addresses) };
    return true;
  }
}

export class L2Responder {
  private readonly links = new Map<string, InterfaceAnnouncer>();
  private readonly buffer = new Uint8Array(RECEIVE_BUFFER_SIZE);
  private readonly counters = { answers: {} as Record<string, number>, takeovers: {} as Record<string, number>, claims: {} as Record<string, number>, sendErrors: 0, dropped: 0 };
  private readonly refusals: RefusalTally;
  /** Runs only while a takeover announcement is pending: due at the earliest one. */
  private announceTimer: ReturnType<typeof setTimeout> | undefined;
  /** Rings of sockets closed since: stats() counts them with the open ones'. */
  private closedRings = 0;
  private readonly floodPauseMs: number;
  private readonly announceCount: number;
  private readonly announceIntervalMs: number;
  private readonly onEvent: (event: ResponderEvent) => void;
  private readonly mayAnswer: () => boolean;

  constructor(options: ResponderOptions = {}) {
    this.floodPauseMs = options.floodPauseMs ?? DEFAULT_FLOOD_PAUSE_MS;
    this.announceCount = options.announceCount ?? DEFAULT_ANNOUNCE_COUNT;
    this.announceIntervalMs = options.announceIntervalMs ?? DEFAULT_ANNOUNCE_INTERVAL_MS;
    this.onEvent = options.onEvent ?? (() => {});
    this.mayAnswer = options.mayAnswer ?? (() => true);
    this.refusals = new RefusalTally(options.refusalReportWindowMs ?? DEFAULT_REFUSAL_REPORT_WINDOW_MS);
  }

  /**
   * Replaces what is announced where. An interface listed with no address is kept ready for
   * IPv4 (its ARP socket open, nothing answered): opening one takes 8-16 ms, which a takeover
   * should not wait for. Frames already queued are first answered under the old
   * table (they came while it held: at a handover the new holder never saw them, and dropping
   * them would leave a request unanswered); then addresses dropped are not answered any more,
   * and addresses added are announced at once and
   * `announceCount - 1` more times. An interface that cannot be opened, or an address that does not
   * parse, is returned as a problem and left out; everything else still applies.
   */
  setAnnouncements(table: AnnouncementTable): AnnouncementProblem[] {
    this.readAll();
    const problems: AnnouncementProblem[] = [];
    let refiltered = false;
    for (const [name, link] of this.links) {
      if (!table.has(name)) this.removeLink(link);
    }
    for (const [name, wanted] of table) {
      const ipv4 = new Set<string>();
      const ipv6 = new Set<string>();
      for (const text of wanted) {
        const ip = parseIP(text);
        if (!ip) problems.push({ interface: name, address: text, message: `${JSON.stringify(text)} is not an IP address` });
        else (ip.family === 4 ? ipv4 : ipv6).add(formatIP(ip));
      }
      const link = this.links.get(name) ?? new InterfaceAnnouncer(name);
      this.links.set(name, link);
      try {
        this.updateLink(link, ipv4, ipv6, [...wanted].length === 0);
        if (link.filterArp()) refiltered = true;
      } catch (e) {
        problems.push({ interface: name, message: `cannot announce on ${name}: ${(e as Error).message}` });
        this.removeLink(link);
      }
    }
    // A frame the new filter let in before the doorbell's changed is queued without a ring.
    if (refiltered) this.readAll();
    this.scheduleAnnouncements();
    return problems;
  }

  /** What is announced now: interface -> addresses. */
  announcements(): Map<string, string[]> {
    return new Map([...this.links].map(([name, link]) => [name, link.addresses]));
  }

  /** Addresses whose gratuitous ARP / unsolicited advertisements are still being repeated. */
  announcing(): string[] {
    return [...this.links.values()].flatMap((link) => link.pending.map((p) => p.address));
  }

  /**
   * A snapshot, copied one level down: O(reasons + addresses announced), never O(frames received)
   * (the reasons are a fixed set; answers and claims are only counted for addresses announced).
   */
  stats(): ResponderStats {
    const c = this.counters;
    const r = this.refusals;
    let rings = this.closedRings;
    for (const link of this.links.values()) rings += (link.arp?.rings ?? 0) + (link.ndp?.rings ?? 0);
    return {
      rings,
      answers: { ...c.answers },
      takeovers: { ...c.takeovers },
      claims: { ...c.claims },
      malformedFrames: r.malformedFrames,
      malformedReasons: { ...r.malformedReasons },
      martianFrames: r.martianFrames,
      martianReasons: { ...r.martianReasons },
      sendErrors: c.sendErrors,
      dropped: c.dropped,
    };
  }

  close(): void {
    // What came while it still held is answered: the next holder never saw it.
    this.readAll();
    for (const link of this.links.values()) this.closeLink(link);
    this.links.clear();
    this.scheduleAnnouncements();
  }

  private updateLink(link: InterfaceAnnouncer, ipv4: Set<string>, ipv6: Set<string>, standby = false): void {
    if (ipv4.size > 0 || standby) link.arp ??= this.watch(link, ETH_P_ARP);
    if (ipv6.size > 0) {
      link.ndp ??= this.watch(link, ETH_P_IPV6, NEIGHBOR_DISCOVERY_FILTER);
      link.groups ??= MulticastMembership.open(link.name);
    }
    const mac = (link.arp ?? link.ndp)?.socket.mac();
    if (mac) link.ipv4.mac = link.ipv6.mac = mac;
    this.updateGroups(link, ipv6);
    const added: string[] = [];
    for (const [state, wanted] of [[link.ipv4, ipv4], [link.ipv6, ipv6]] as const) {
      const current = state.addresses as Set<string>;
      for (const address of [...current]) {
        if (wanted.has(address)) continue;
        current.delete(address);
        link.pending = link.pending.filter((p) => p.address !== address);
        this.onEvent({ type: 'release', interface: link.name, address });
      }
      for (const address of wanted) {
        if (current.has(address)) continue;
        current.add(address);
        added.push(address);
      }
    }
    if (ipv4.size === 0 && !standby && link.arp) {
      this.closedRings += link.arp.rings;
      link.arp.close();
      link.arp = undefined;
    }
    if (ipv6.size === 0 && link.ndp) {
      this.closedRings += link.ndp.rings;
      link.ndp.close();
      link.groups?.close();
      link.ndp = link.groups = undefined;
      link.joined.clear();
    }
    for (const address of added) this.takeOver(link, address);
  }

  /** A socket read whenever a frame reaches it (doorbell.ts), by `handle` of this link's state. */
  private watch(link: InterfaceAnnouncer, etherType: number, filter?: BpfInstruction[]): WatchedPacketSocket {
    const handle = etherType === ETH_P_ARP ? (frame: Uint8Array) => handleArpFrame(frame, link.ipv4) : (frame: Uint8Array) => handleNdpFrame(frame, link.ipv6);
    return WatchedPacketSocket.open(link.name, etherType, filter, {
      onRing: (socket) => this.drain(link, socket, handle, !this.mayAnswer()),
      onError: (message) => this.onEvent({ type: 'error', interface: link.name, message }),
      floodPauseMs: this.floodPauseMs,
    });
  }

  /** Joins the solicited-node group of each IPv6 address, leaves those no longer needed. */
  private updateGroups(link: InterfaceAnnouncer, ipv6: Set<string>): void {
    if (!link.groups) return;
    const wanted = new Map<string, Uint8Array>();
    for (const address of ipv6) {
      const group = solicitedNodeAddress(ipToBytes(parseIP(address)!));
      wanted.set(Buffer.from(group).toString('hex'), group);
    }
    for (const [key, group] of wanted) {
      if (link.joined.has(key)) continue;
      link.groups.join(group);
      link.joined.add(key);
    }
    for (const key of [...link.joined]) {
      if (wanted.has(key)) continue;
      link.groups.leave(Buffer.from(key, 'hex'));
      link.joined.delete(key);
    }
  }

  private takeOver(link: InterfaceAnnouncer, address: string): void {
    const ip: IP = parseIP(address)!;
    const bytes = ipToBytes(ip);
    const mac = link.ipv4.mac;
    const frames = ip.family === 4 ? gratuitousArpFrames(bytes, mac) : [unsolicitedAdvertisementFrame(bytes, mac)];
    this.counters.takeovers[address] = (this.counters.takeovers[address] ?? 0) + 1;
    this.onEvent({ type: 'takeover', interface: link.name, address });
    const announcement: PendingAnnouncement = { address, family: ip.family, frames, remaining: this.announceCount, dueAt: 0 };
    this.announce(link, announcement);
    if (announcement.remaining > 0) link.pending.push(announcement);
  }

  private announce(link: InterfaceAnnouncer, announcement: PendingAnnouncement): void {
    const socket = (announcement.family === 4 ? link.arp : link.ndp)?.socket;
    for (const frame of announcement.frames) this.send(link, socket, frame);
    announcement.remaining -= 1;
    announcement.dueAt = performance.now() + this.announceIntervalMs;
  }

  private removeLink(link: InterfaceAnnouncer): void {
    for (const address of link.addresses) this.onEvent({ type: 'release', interface: link.name, address });
    this.closeLink(link);
    this.links.delete(link.name);
  }

  private closeLink(link: InterfaceAnnouncer): void {
    this.closedRings += (link.arp?.rings ?? 0) + (link.ndp?.rings ?? 0);
    link.close();
  }

  /** Every socket read to empty (up to the cap each), under the table as it is now. */
  private readAll(): void {
    const silent = !this.mayAnswer();
    for (const link of this.links.values()) {
      if (link.arp) this.drain(link, link.arp.socket, (frame) => handleArpFrame(frame, link.ipv4), silent);
      if (link.ndp) this.drain(link, link.ndp.socket, (frame) => handleNdpFrame(frame, link.ipv6), silent);
    }
  }

  /** The announcement timer, set for the earliest pending repeat; none when nothing is pending. */
  private scheduleAnnouncements(): void {
    if (this.announceTimer) clearTimeout(this.announceTimer);
    this.announceTimer = undefined;
    let due = Infinity;
    for (const link of this.links.values()) for (const p of link.pending) due = Math.min(due, p.dueAt);
    if (due === Infinity) return;
    this.announceTimer = setTimeout(() => this.announceDue(), Math.max(0, due - performance.now()));
  }

  private announceDue(): void {
    this.announceTimer = undefined;
    const now = performance.now();
    if (this.mayAnswer()) {
      for (const link of this.links.values()) {
        for (const announcement of link.pending) {
          if (announcement.dueAt <= now) this.announce(link, announcement);
        }
        link.pending = link.pending.filter((p) => p.remaining > 0);
      }
    } else {
      // Paused: nothing is sent now; asked again a flood pause later (the polling tick's pace).
      for (const link of this.links.values()) for (const p of link.pending) p.dueAt = Math.max(p.dueAt, now + this.floodPauseMs);
    }
    this.scheduleAnnouncements();
  }

  /** Reads `socket` until it is empty or MAX_FRAMES_PER_READ frames were read; true at the cap. */
  private drain(link: InterfaceAnnouncer, socket: PacketSocket, handle: (frame: Uint8Array) => FrameOutcome, silent: boolean): boolean {
    // An event handler may close the socket (a new table set from onEvent): drainFrames stops then.
    return drainFrames(socket, this.buffer, MAX_FRAMES_PER_READ, (frame, packetType) => {
      // Our own frames come back as OUTGOING; another host's unicast as OTHERHOST in promiscuous mode.
      if (packetType === PACKET_OUTGOING || packetType === PACKET_OTHERHOST) return;
      const outcome = handle(frame);
      if (silent && outcome.kind === 'answer') {
        this.counters.dropped += 1;
        return;
      }
      this.apply(link, socket, outcome);
    }, (e) => this.onEvent({ type: 'error', interface: link.name, message: e.message }));
  }

  private apply(link: InterfaceAnnouncer, socket: PacketSocket, outcome: FrameOutcome): void {
    switch (outcome.kind) {
      case 'answer':
        if (this.send(link, socket, outcome.reply)) this.counters.answers[outcome.address] = (this.counters.answers[outcome.address] ?? 0) + 1;
        return;
      case 'claim':
        this.counters.claims[outcome.address] = (this.counters.claims[outcome.address] ?? 0) + 1;
        this.onEvent({ type: 'claim', interface: link.name, address: outcome.address, mac: outcome.mac });
        return;
      case 'malformed':
      case 'martian': {
        const report = this.refusals.count(outcome);
        if (report) this.onEvent({ type: 'refused', interface: link.name, ...report, ...outcome });
        return;
      }
      case 'ignored':
        return;
    }
  }

  private send(link: InterfaceAnnouncer, socket: PacketSocket | undefined, frame: Uint8Array): boolean {
    if (!socket) return false;
    try {
      socket.send(frame);
      return true;
    } catch (e) {
      this.counters.sendErrors += 1;
      this.onEvent({ type: 'error', interface: link.name, message: (e as Error).message });
      return false;
    }
  }
}
