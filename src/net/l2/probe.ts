import { formatIP, ipToBytes, parseIP } from '../ip.ts';
import { parseArp, arpProbeFrame } from './arp.ts';
import { ETHERTYPE_ARP, ETHERTYPE_IPV6, formatMac, macEquals, parseEthernet } from './ethernet.ts';
import { ICMPV6_NEIGHBOR_ADVERTISEMENT, neighborSolicitationFrame, parseNeighborMessage } from './ndp.ts';
import { ETH_P_ARP, ETH_P_IPV6, PACKET_OUTGOING, PacketSocket } from './packet-socket.ts';
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
const POLL_MS = 10;
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

/** Probes `address` on `interfaceName`; rejects only when the socket cannot be opened or a probe cannot be sent. */
export async function probeAddress(interfaceName: string, address: string, options: ProbeOptions = {}): Promise<ProbeResult> {
  const ip = parseIP(address);
  if (!ip) throw new Error(`${JSON.stringify(address)} is not an IP address`);
  const count = options.count ?? DEFAULT_PROBE_COUNT;
  const intervalMs = options.intervalMs ?? DEFAULT_PROBE_INTERVAL_MS;
  const target = ipToBytes(ip);
  const socket = ip.family === 4 ? PacketSocket.open(interfaceName, ETH_P_ARP) : PacketSocket.open(interfaceName, ETH_P_IPV6, NEIGHBOR_DISCOVERY_FILTER);
  try {
    const ourMac = socket.mac();
    const probe = ip.family === 4 ? arpProbeFrame(target, ourMac) : neighborSolicitationFrame(target, ourMac);
    const buffer = new Uint8Array(BUFFER_SIZE);
    const started = performance.now();
    let sent = 0;
    // Each answering MAC and how many probes had gone out at its first answer.
    const answered = new Map<string, number>();
    while (!options.signal?.aborted) {
      const elapsed = performance.now() - started;
      // One probe more when an answer came to the last one (at most one: answers cannot prolong it further).
      const needed = Math.min(count + 1, Math.max(count, ...[...answered.values()].map((after) => after + 1)));
      if (sent < needed && elapsed >= sent * intervalMs) {
        socket.send(probe);
        sent++;
      }
      for (let received = socket.receive(buffer); received; received = socket.receive(buffer)) {
        if (received.packetType === PACKET_OUTGOING) continue;
        const mac = probeAnswerHolder(buffer.subarray(0, received.length), formatIP(ip), ourMac);
        if (!mac) continue;
        const after = answered.get(mac);
        if (after !== undefined && sent > after) return { holder: mac };
        if (after === undefined) answered.set(mac, sent);
      }
      if (sent >= needed && elapsed >= sent * intervalMs) return answered.size ? { transient: [...answered.keys()][0] } : {};
      await Bun.sleep(POLL_MS);
    }
    return {};
  } finally {
    socket.close();
  }
}

/** The MAC of the station a frame shows holding `address` (canonical text), other than `ourMac`; undefined for any other frame. */
export function probeAnswerHolder(frame: Uint8Array, address: string, ourMac: Uint8Array): string | undefined {
  const ethernet = parseEthernet(frame);
  if (!ethernet || macEquals(ethernet.source, ourMac)) return undefined;
  if (ethernet.etherType === ETHERTYPE_ARP) {
    const parsed = parseArp(ethernet.payload);
    if (!parsed.ok || macEquals(parsed.packet.senderMac, ourMac)) return undefined;
    return sameAddress(parsed.packet.senderIp, address) ? formatMac(parsed.packet.senderMac) : undefined;
  }
  if (ethernet.etherType === ETHERTYPE_IPV6) {
    const parsed = parseNeighborMessage(ethernet.payload);
    if (!parsed.ok || parsed.message.type !== ICMPV6_NEIGHBOR_ADVERTISEMENT || !sameAddress(parsed.message.target, address)) return undefined;
    return formatMac(parsed.message.linkLayerAddress ?? ethernet.source);
  }
  return undefined;
}

function sameAddress(bytes: Uint8Array, address: string): boolean {
  const ip = parseIP(address);
  return !!ip && Buffer.from(ipToBytes(ip)).equals(Buffer.from(bytes));
}
