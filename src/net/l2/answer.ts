import { formatIP, ipFromBytes } from '../ip.ts';
import { ARP_REQUEST, arpReplyFrame, parseArp } from './arp.ts';
import { ETHERTYPE_ARP, ETHERTYPE_IPV6, formatMac, isMulticastMac, macEquals, parseEthernet, ZERO_MAC } from './ethernet.ts';
import { ALL_NODES_ADDRESS, ICMPV6_NEIGHBOR_ADVERTISEMENT, multicastMac, neighborAdvertisementFrame, parseNeighborMessage } from './ndp.ts';
import type { MartianReason, Refusal } from './refusals.ts';

/**
 * What to do with one received frame, decided without any socket: answer it (the reply frame), note
 * that another station claims an address we announce, ignore it, or refuse it as malformed or as
 * a martian (a sender no station can be), with one of a fixed set of reasons (refusals.ts).
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
  | Refusal;

const IGNORED: FrameOutcome = { kind: 'ignored' };
const SHORT_FRAME = (frame: Uint8Array): FrameOutcome => ({ kind: 'malformed', reason: 'ethernet-short', detail: `frame of ${frame.length} bytes, shorter than an Ethernet header` });
const martian = (reason: MartianReason, detail: string): FrameOutcome => ({ kind: 'martian', reason, detail });

export function handleArpFrame(frame: Uint8Array, link: LinkState): FrameOutcome {
  const ethernet = parseEthernet(frame);
  if (!ethernet) return SHORT_FRAME(frame);
  if (ethernet.etherType !== ETHERTYPE_ARP || macEquals(ethernet.source, link.mac)) return IGNORED;
  const parsed = parseArp(ethernet.payload);
  if (!parsed.ok) return { kind: 'malformed', reason: parsed.reason, detail: parsed.detail };
  const arp = parsed.packet;
  if (macEquals(arp.senderMac, link.mac)) return IGNORED;
  // A reply goes to the sender's hardware address: never to a group, never to nobody.
  if (!isStationMac(arp.senderMac) || !isStationMac(ethernet.source)) {
    return martian('arp-sender-mac', `ARP from hardware address ${formatMac(arp.senderMac)} in a frame from ${formatMac(ethernet.source)}`);
  }
  if (isMartianIPv4Sender(arp.senderIp)) return martian('arp-sender-ip', `ARP from ${addressText(arp.senderIp)}`);
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
  if (!ethernet) return SHORT_FRAME(frame);
  if (ethernet.etherType !== ETHERTYPE_IPV6 || macEquals(ethernet.source, link.mac)) return IGNORED;
  const parsed = parseNeighborMessage(ethernet.payload);
  if (!parsed.ok) return parsed.malformed ? { kind: 'malformed', reason: parsed.reason, detail: parsed.detail } : IGNORED;
  const message = parsed.message;
  if (isMartianIPv6Source(message.source)) return martian('ipv6-source', `Neighbor Discovery from ${addressText(message.source)}`);
  const target = addressText(message.target);
  if (!link.addresses.has(target)) return IGNORED;
  if (message.type === ICMPV6_NEIGHBOR_ADVERTISEMENT) {
    return { kind: 'claim', address: target, mac: formatMac(message.linkLayerAddress ?? ethernet.source) };
  }
  // From :: it is another host's Duplicate Address Detection: the answer goes to all nodes,
  // unsolicited (RFC 4861 §7.2.4), and tells it the address is taken (as Linux's ndisc_recv_ns does).
  const dad = message.source.every((byte) => byte === 0);
  // Otherwise the answer goes to the asker's link-layer address: never to a group, never to nobody.
  const askerMac = message.linkLayerAddress ?? ethernet.source;
  if (!dad && !isStationMac(askerMac)) return martian('ndp-sender-mac', `Neighbor Solicitation to be answered at ${formatMac(askerMac)}`);
  const reply = neighborAdvertisementFrame({
    ourMac: link.mac,
    target: message.target,
    destination: dad ? ALL_NODES_ADDRESS : message.source,
    destinationMac: dad ? multicastMac(ALL_NODES_ADDRESS) : askerMac,
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

/** A single station's address: not broadcast, not multicast, not all zeros. */
function isStationMac(mac: Uint8Array): boolean {
  return !isMulticastMac(mac) && !macEquals(mac, ZERO_MAC);
}

/**
 * The sender addresses Linux's route lookup calls martian (ip_route_input: multicast, limited
 * broadcast, 0/8, loopback), so arp_process never answers them. 0.0.0.0 itself is an ARP probe
 * (RFC 5227 2.1.1), answered as Linux answers it: to the prober's hardware address.
 */
function isMartianIPv4Sender(ip: Uint8Array): boolean {
  const first = ip[0]!;
  if (first >= 224 && first <= 239) return true; // multicast
  if (ip.every((b) => b === 255)) return true; // limited broadcast
  if (first === 127) return true; // loopback
  return first === 0 && !ip.every((b) => b === 0); // this network, other than the probe's 0.0.0.0
}

/** An IPv6 source Linux's ip6_rcv drops off the wire: multicast (RFC 4291 2.7), ::1, or IPv4-mapped. */
function isMartianIPv6Source(ip: Uint8Array): boolean {
  if (ip[0] === 0xff) return true;
  const zeroesTo = (end: number) => ip.subarray(0, end).every((b) => b === 0);
  if (zeroesTo(15) && ip[15] === 1) return true;
  return zeroesTo(10) && ip[10] === 0xff && ip[11] === 0xff;
}
