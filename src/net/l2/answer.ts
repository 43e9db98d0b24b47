import { formatIP, ipFromBytes } from '../ip.ts';
import { ARP_REQUEST, arpReplyFrame, parseArp } from './arp.ts';
import { ETHERTYPE_ARP, ETHERTYPE_IPV6, formatMac, macEquals, parseEthernet } from './ethernet.ts';
import { ALL_NODES_ADDRESS, ICMPV6_NEIGHBOR_ADVERTISEMENT, multicastMac, neighborAdvertisementFrame, parseNeighborMessage } from './ndp.ts';

/**
 * What to do with one received frame, decided without any socket: answer it (the reply frame), note
 * that another station claims an address we announce, ignore it, or count it as malformed.
 */
export interface LinkState {
  mac: Uint8Array;
  /** Canonical address texts (formatIP) this link answers for. */
  addresses: ReadonlySet<string>;
}

export type FrameOutcome =
  | { kind: 'answer'; address: string; reply: Uint8Array }
  | { kind: 'claim'; address: string; mac: string }
  | { kind: 'ignored' }
  | { kind: 'malformed'; reason: string };

const IGNORED: FrameOutcome = { kind: 'ignored' };

export function handleArpFrame(frame: Uint8Array, link: LinkState): FrameOutcome {
  const ethernet = parseEthernet(frame);
  if (!ethernet) return { kind: 'malformed', reason: `frame of ${frame.length} bytes, shorter than an Ethernet header` };
  if (ethernet.etherType !== ETHERTYPE_ARP || macEquals(ethernet.source, link.mac)) return IGNORED;
  const parsed = parseArp(ethernet.payload);
  if (!parsed.ok) return { kind: 'malformed', reason: parsed.reason };
  const arp = parsed.packet;
  if (macEquals(arp.senderMac, link.mac)) return IGNORED;
  const sender = addressText(arp.senderIp);
  // Someone else speaking from an address we announce: a former announcer, or a host outside the cluster.
  if (link.addresses.has(sender)) return { kind: 'claim', address: sender, mac: formatMac(arp.senderMac) };
  if (arp.operation !== ARP_REQUEST) return IGNORED;
  const target = addressText(arp.targetIp);
  if (!link.addresses.has(target)) return IGNORED;
  return { kind: 'answer', address: target, reply: arpReplyFrame(arp, link.mac) };
}

export function handleNdpFrame(frame: Uint8Array, link: LinkState): FrameOutcome {
  const ethernet = parseEthernet(frame);
  if (!ethernet) return { kind: 'malformed', reason: `frame of ${frame.length} bytes, shorter than an Ethernet header` };
  if (ethernet.etherType !== ETHERTYPE_IPV6 || macEquals(ethernet.source, link.mac)) return IGNORED;
  const parsed = parseNeighborMessage(ethernet.payload);
  if (!parsed.ok) return parsed.malformed ? { kind: 'malformed', reason: parsed.reason } : IGNORED;
  const message = parsed.message;
  const target = addressText(message.target);
  if (!link.addresses.has(target)) return IGNORED;
  if (message.type === ICMPV6_NEIGHBOR_ADVERTISEMENT) {
    return { kind: 'claim', address: target, mac: formatMac(message.linkLayerAddress ?? ethernet.source) };
  }
  // From :: it is another host's Duplicate Address Detection: the answer goes to all nodes,
  // unsolicited (RFC 4861 §7.2.4), and tells it the address is taken.
  const dad = message.source.every((byte) => byte === 0);
  const reply = neighborAdvertisementFrame({
    ourMac: link.mac,
    target: message.target,
    destination: dad ? ALL_NODES_ADDRESS : message.source,
    destinationMac: dad ? multicastMac(ALL_NODES_ADDRESS) : (message.linkLayerAddress ?? ethernet.source),
    solicited: !dad,
  });
  return { kind: 'answer', address: target, reply };
}

/** The unsolicited advertisement a new owner sends to all nodes (RFC 4861 §7.2.6). */
export function unsolicitedAdvertisementFrame(target: Uint8Array, ourMac: Uint8Array): Uint8Array {
  return neighborAdvertisementFrame({
    ourMac,
    target,
    destination: ALL_NODES_ADDRESS,
    destinationMac: multicastMac(ALL_NODES_ADDRESS),
    solicited: false,
  });
}

function addressText(bytes: Uint8Array): string {
  return formatIP(ipFromBytes(bytes)!);
}
