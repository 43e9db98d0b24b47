import { ipToBytes, parseIP } from '../ip.ts';
import { parseArp, arpProbeFrame } from './arp.ts';
import { ETHERTYPE_ARP, ETHERTYPE_IPV6, formatMac, macEquals, parseEthernet } from './ethernet.ts';
import { ICMPV6_NEIGHBOR_ADVERTISEMENT, neighborSolicitationFrame, parseNeighborMessage } from './ndp.ts';
import { WatchedPacketSocket } from './doorbell.ts';
import { drainFrames, ETH_P_ARP, ETH_P_IPV6, PACKET_OUTGOING } from './packet-socket.ts';
import { NEIGHBOR_DISCOVERY_FILTER } from './responder.ts';

/**
 * Is an address free on a link? Asks the way a host does before it configures one: ARP Probes
 * (RFC 5227 §2.1.1: sender address 0.0.0.0, so no cache changes) for IPv4, Duplicate Address
 * Detection solicitations (RFC 4862 §5.4.2: from ::) for IPv6, `count` of them `intervalMs`
 * apart, then listens one more interval. A station answering for the address (an ARP packet
 * whose sender is the address; a Neighbor Advertisement for it) holds it: its MAC is returned.
 * Another host probing the same address is not a holder and does not count.
 *
 * A holder must answer twice: to a probe, and to a probe sent after that answer (one more is
 * sent when the answer came to the last). A station that answers once and then no more is no
 * holder but is returned as `transient`: at a speaker's start or return, another speaker can
 * announce the address for some milliseconds before the election settles, and its answer must
 * not hold the address back for as long as it stays assigned (seen in the soak: 15 s silent).
 * A host that configured the address answers every probe.
 */

export const DEFAULT_PROBE_COUNT = 3;
export const DEFAULT_PROBE_INTERVAL_MS = 1000;
/** Frames read per ring at most; at the cap (a flood) the socket is read again after FLOOD_PAUSE_MS. */
const MAX_FRAMES_PER_READ = 256;
const FLOOD_PAUSE_MS = 10;
const BUFFER_SIZE = 9216;

export interface ProbeOptions {
  count?: number;
  intervalMs?: number;
  signal?: AbortSignal;
}

/** The result: `holder` is the MAC that answered for the address twice, undefined when nobody did. */
export interface ProbeResult {
  holder?: string;
  /** A MAC that answered once and not again: not a holder. */
  transient?: string;
}

/**
 * Probes `address` on `interfaceName`; rejects only when the socket cannot be opened, a probe
 * cannot be sent or the socket cannot be read.
 */
export async function probeAddress(interfaceName: string, address: string, options: ProbeOptions = {}): Promise<ProbeResult> {
  const ip = parseIP(address);
  if (!ip) throw new Error(`${JSON.stringify(address)} is not an IP address`);
  if (options.signal?.aborted) return {};
  const link = LinkProbes.join(interfaceName, ip.family);
  return link.probe(ipToBytes(ip), options.count ?? DEFAULT_PROBE_COUNT, options.intervalMs ?? DEFAULT_PROBE_INTERVAL_MS, options.signal);
}

/** One probe under way: its sends so far, and each answering MAC with the number of probes out at its first answer. */
interface Probe {
  readonly count: number;
  sent: number;
  readonly answered: Map<string, number>;
  readonly finish: (result: ProbeResult | Error) => void;
}

/**
 * The probes under way on one interface for one family share one socket and read it when a frame
 * has come (doorbell.ts): a frame is read once whatever the number of addresses probed. A socket
 * per probe polled every 10 ms made a hundred services assigned at once a hundred sockets, each
 * woken 100 times a second and each reading every ARP frame of the link (BENCHMARKS.md, issue
 * 38: 10.9 CPU-ms per service added, MetalLB's speaker 3.5). Opened by the first probe, closed
 * when the last one ends.
 */
class LinkProbes {
  private static readonly open = new Map<string, LinkProbes>();
  /** Probes by the address they probe (its bytes in hex). */
  private readonly probes = new Map<string, Set<Probe>>();
  private readonly buffer = new Uint8Array(BUFFER_SIZE);
  private readonly watched: WatchedPacketSocket;
  private readonly ourMac: Uint8Array;

  private constructor(private readonly key: string, interfaceName: string, family: 4 | 6) {
    this.watched = family === 4
      ? WatchedPacketSocket.open(interfaceName, ETH_P_ARP, undefined, this.watchOptions())
      : WatchedPacketSocket.open(interfaceName, ETH_P_IPV6, NEIGHBOR_DISCOVERY_FILTER, this.watchOptions());
    try {
      this.ourMac = this.watched.socket.mac();
    } catch (e) {
      this.watched.close();
      throw e;
    }
  }

  static join(interfaceName: string, family: 4 | 6): LinkProbes {
    const key = `${interfaceName}/${family}`;
    let link = LinkProbes.open.get(key);
    if (!link) {
      link = new LinkProbes(key, interfaceName, family);
      LinkProbes.open.set(key, link);
    }
    return link;
  }

  private watchOptions() {
    return {
      onRing: () => this.read(),
      // Answers are also read before each probe's every step: a doorbell that failed (it is
      // watched again) delays an answer by at most one probe interval.
      onError: () => {},
      floodPauseMs: FLOOD_PAUSE_MS,
    };
  }

  /**
   * Sends `count` probes `intervalMs` apart (one more when an answer came to the last one) and
   * listens one more interval; a MAC answering a probe sent after its first answer holds it.
   */
  probe(target: Uint8Array, count: number, intervalMs: number, signal?: AbortSignal): Promise<ProbeResult> {
    const frame = target.length === 4 ? arpProbeFrame(target, this.ourMac) : neighborSolicitationFrame(target, this.ourMac);
    const address = Buffer.from(target).toString('hex');
    return new Promise<ProbeResult>((resolve, reject) => {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const onAbort = () => probe.finish({});
      const probe: Probe = {
        count,
        sent: 0,
        answered: new Map(),
        finish: (result) => {
          clearTimeout(timer);
          signal?.removeEventListener('abort', onAbort);
          if (!this.leave(address, probe)) return;
          if (result instanceof Error) reject(result);
          else resolve(result);
        },
      };
      let waiting = this.probes.get(address);
      if (!waiting) this.probes.set(address, (waiting = new Set()));
      waiting.add(probe);
      signal?.addEventListener('abort', onAbort, { once: true });
      const step = () => {
        this.read();
        if (!waiting.has(probe)) return;
        if (probe.sent < probesNeeded(probe)) {
          try {
            this.watched.socket.send(frame);
          } catch (e) {
            probe.finish(e as Error);
            return;
          }
          probe.sent += 1;
          timer = setTimeout(step, intervalMs);
          return;
        }
        probe.finish(probe.answered.size ? { transient: [...probe.answered.keys()][0] } : {});
      };
      step();
    });
  }

  /** Reads the socket until it is empty or MAX_FRAMES_PER_READ frames were read (true at the cap), handing answers to their probes. */
  private read(): boolean {
    return drainFrames(this.watched.socket, this.buffer, MAX_FRAMES_PER_READ, (frame, packetType) => {
      if (packetType === PACKET_OUTGOING) return;
      const answer = probeAnswer(frame, this.ourMac);
      if (!answer) return;
      for (const probe of [...(this.probes.get(Buffer.from(answer.address).toString('hex')) ?? [])]) {
        const after = probe.answered.get(answer.mac);
        if (after !== undefined && probe.sent > after) probe.finish({ holder: answer.mac });
        else if (after === undefined) probe.answered.set(answer.mac, probe.sent);
      }
    }, (e) => {
      // Each probe on this link would have read the same error from a socket of its own.
      for (const waiting of [...this.probes.values()]) for (const probe of [...waiting]) probe.finish(e);
    });
  }

  /** Takes a probe off; false when it was off already. The last one closes the socket. */
  private leave(address: string, probe: Probe): boolean {
    const waiting = this.probes.get(address);
    if (!waiting?.delete(probe)) return false;
    if (waiting.size === 0) this.probes.delete(address);
    if (this.probes.size === 0) {
      LinkProbes.open.delete(this.key);
      this.watched.close();
    }
    return true;
  }
}

/** Probes to send in all: `count`, one more when an answer came to the last one sent (at most one: answers cannot prolong it further). */
function probesNeeded(probe: Probe): number {
  let needed = probe.count;
  for (const after of probe.answered.values()) needed = Math.max(needed, after + 1);
  return Math.min(probe.count + 1, needed);
}

/** The address (its bytes) a frame shows another station holding, and that station's MAC; undefined for any other frame. */
export function probeAnswer(frame: Uint8Array, ourMac: Uint8Array): { address: Uint8Array; mac: string } | undefined {
  const ethernet = parseEthernet(frame);
  if (!ethernet || macEquals(ethernet.source, ourMac)) return undefined;
  if (ethernet.etherType === ETHERTYPE_ARP) {
    const parsed = parseArp(ethernet.payload);
    if (!parsed.ok || macEquals(parsed.packet.senderMac, ourMac)) return undefined;
    return { address: parsed.packet.senderIp, mac: formatMac(parsed.packet.senderMac) };
  }
  if (ethernet.etherType === ETHERTYPE_IPV6) {
    const parsed = parseNeighborMessage(ethernet.payload);
    if (!parsed.ok || parsed.message.type !== ICMPV6_NEIGHBOR_ADVERTISEMENT) return undefined;
    return { address: parsed.message.target, mac: formatMac(parsed.message.linkLayerAddress ?? ethernet.source) };
  }
  return undefined;
}
