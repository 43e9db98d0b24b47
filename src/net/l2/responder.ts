import { formatIP, ipToBytes, parseIP, type IP } from '../ip.ts';
import { handleArpFrame, handleNdpFrame, unsolicitedAdvertisementFrame, type FrameOutcome, type LinkState } from './answer.ts';
import { gratuitousArpFrames } from './arp.ts';
import { solicitedNodeAddress } from './ndp.ts';
import { ETH_P_ARP, ETH_P_IPV6, MulticastMembership, PACKET_OTHERHOST, PACKET_OUTGOING, PacketSocket, type BpfInstruction } from './packet-socket.ts';
import { RefusalTally, type MalformedReason, type MartianReason, type Refusal } from './refusals.ts';

/**
 * Answers ARP requests and IPv6 Neighbor Solicitations for the addresses it is given, on the
 * interfaces it is given and nowhere else; announces an address it takes over with gratuitous
 * ARP / unsolicited Neighbor Advertisements. Which addresses this node should announce is decided
 * elsewhere (election.ts): the responder only knows frames.
 *
 * Frames are read by polling non-blocking sockets from a timer, never by a blocking call: the
 * event loop stays free, and no Worker thread is needed (a Worker blocked in recv() cannot be
 * ended until a frame arrives, and would need its own copy of the address table). One tick drains
 * every socket until it is empty, at most MAX_FRAMES_PER_TICK frames each; an idle tick is one
 * recvfrom() per socket. Measured with bench/l2-poll-cost.ts (docs/networking/l2.md): idle, with
 * 4 interfaces (8 sockets), the default 10 ms tick costs 8.5 ms of CPU per second (under 1% of one
 * core; an empty 10 ms timer alone costs about 4), 20 ms costs 5; an answer waits at most one
 * tick, far below the 1 s a resolver waits before it asks again.
 */
export const DEFAULT_POLL_INTERVAL_MS = 10;
/** RFC 5227 §1.1 ANNOUNCE_NUM is 2, 2 s apart; one more, sooner, shortens failover when the first is lost. */
export const DEFAULT_ANNOUNCE_COUNT = 3;
export const DEFAULT_ANNOUNCE_INTERVAL_MS = 1000;
const MAX_FRAMES_PER_TICK = 256;
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
  pollIntervalMs?: number;
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
  arp?: PacketSocket;
  ndp?: PacketSocket;
  groups?: MulticastMembership;
  /** Solicited-node groups joined, by their hex (addresses may share one). */
  readonly joined = new Set<string>();
  readonly ipv4: LinkState = { mac: new Uint8Array(6), addresses: new Set() };
  readonly ipv6: LinkState = { mac: new Uint8Array(6), addresses: new Set() };
  pending: PendingAnnouncement[] = [];

  constructor(readonly name: string) {}

  get addresses(): string[] {
    return [...this.ipv4.addresses, ...this.ipv6.addresses];
  }

  close(): void {
    this.arp?.close();
    this.ndp?.close();
    this.groups?.close();
    this.arp = this.ndp = this.groups = undefined;
    this.joined.clear();
    this.pending = [];
  }
}

export class L2Responder {
  private readonly links = new Map<string, InterfaceAnnouncer>();
  private readonly buffer = new Uint8Array(RECEIVE_BUFFER_SIZE);
  private readonly counters = { answers: {} as Record<string, number>, takeovers: {} as Record<string, number>, claims: {} as Record<string, number>, sendErrors: 0, dropped: 0 };
  private readonly refusals: RefusalTally;
  private timer: ReturnType<typeof setInterval> | undefined;
  private readonly pollIntervalMs: number;
  private readonly announceCount: number;
  private readonly announceIntervalMs: number;
  private readonly onEvent: (event: ResponderEvent) => void;
  private readonly mayAnswer: () => boolean;

  constructor(options: ResponderOptions = {}) {
    this.pollIntervalMs = options.pollIntervalMs ?? DEFAULT_POLL_INTERVAL_MS;
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
    if (this.timer) this.tick();
    const problems: AnnouncementProblem[] = [];
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
      } catch (e) {
        problems.push({ interface: name, message: `cannot announce on ${name}: ${(e as Error).message}` });
        this.removeLink(link);
      }
    }
    this.updateTimer();
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
    return {
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
    if (this.timer) this.tick();
    for (const link of this.links.values()) link.close();
    this.links.clear();
    this.updateTimer();
  }

  private updateLink(link: InterfaceAnnouncer, ipv4: Set<string>, ipv6: Set<string>, standby = false): void {
    if (ipv4.size > 0 || standby) link.arp ??= PacketSocket.open(link.name, ETH_P_ARP);
    if (ipv6.size > 0) {
      link.ndp ??= PacketSocket.open(link.name, ETH_P_IPV6, NEIGHBOR_DISCOVERY_FILTER);
      link.groups ??= MulticastMembership.open(link.name);
    }
    const mac = (link.arp ?? link.ndp)?.mac();
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
      link.arp.close();
      link.arp = undefined;
    }
    if (ipv6.size === 0 && link.ndp) {
      link.ndp.close();
      link.groups?.close();
      link.ndp = link.groups = undefined;
      link.joined.clear();
    }
    for (const address of added) this.takeOver(link, address);
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
    const socket = announcement.family === 4 ? link.arp : link.ndp;
    for (const frame of announcement.frames) this.send(link, socket, frame);
    announcement.remaining -= 1;
    announcement.dueAt = performance.now() + this.announceIntervalMs;
  }

  private removeLink(link: InterfaceAnnouncer): void {
    for (const address of link.addresses) this.onEvent({ type: 'release', interface: link.name, address });
    link.close();
    this.links.delete(link.name);
  }

  private updateTimer(): void {
    const needed = [...this.links.values()].some((l) => l.arp || l.ndp);
    if (needed && !this.timer) this.timer = setInterval(() => this.tick(), this.pollIntervalMs);
    if (!needed && this.timer) {
      clearInterval(this.timer);
      this.timer = undefined;
    }
  }

  private tick(): void {
    const now = performance.now();
    const silent = !this.mayAnswer();
    for (const link of this.links.values()) {
      if (link.arp) this.drain(link, link.arp, (frame) => handleArpFrame(frame, link.ipv4), silent);
      if (link.ndp) this.drain(link, link.ndp, (frame) => handleNdpFrame(frame, link.ipv6), silent);
      if (silent) continue;
      for (const announcement of link.pending) {
        if (announcement.dueAt <= now) this.announce(link, announcement);
      }
      link.pending = link.pending.filter((p) => p.remaining > 0);
    }
  }

  private drain(link: InterfaceAnnouncer, socket: PacketSocket, handle: (frame: Uint8Array) => FrameOutcome, silent: boolean): void {
    for (let i = 0; i < MAX_FRAMES_PER_TICK; i++) {
      let received;
      try {
        received = socket.receive(this.buffer);
      } catch (e) {
        this.onEvent({ type: 'error', interface: link.name, message: (e as Error).message });
        return;
      }
      if (!received) return;
      // Our own frames come back as OUTGOING; another host's unicast as OTHERHOST in promiscuous mode.
      if (received.packetType === PACKET_OUTGOING || received.packetType === PACKET_OTHERHOST) continue;
      const outcome = handle(this.buffer.subarray(0, received.length));
      if (silent && outcome.kind === 'answer') {
        this.counters.dropped += 1;
        continue;
      }
      this.apply(link, socket, outcome);
    }
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
