import { ETHERTYPE_IPV6, MAC_LENGTH, buildEthernet } from './ethernet.ts';
import type { MalformedReason } from './refusals.ts';

/**
 * IPv6 Neighbor Discovery (RFC 4861) Neighbor Solicitations and Advertisements inside their IPv6
 * header, with the validity checks of §7.1.1 and §7.1.2 that a receiver must apply.
 */
const IPV6_HEADER_LENGTH = 40;
const NEXT_HEADER_ICMPV6 = 58;
/** NDP messages are only valid when no router forwarded them (RFC 4861 §7.1). */
const NDP_HOP_LIMIT = 255;
export const ICMPV6_NEIGHBOR_SOLICITATION = 135;
export const ICMPV6_NEIGHBOR_ADVERTISEMENT = 136;
/** Type, code, checksum, flags/reserved and the 16-byte target. */
const NEIGHBOR_MESSAGE_LENGTH = 24;
const OPTION_SOURCE_LINK_LAYER_ADDRESS = 1;
const OPTION_TARGET_LINK_LAYER_ADDRESS = 2;
const FLAG_ROUTER = 0x80;
const FLAG_SOLICITED = 0x40;
const FLAG_OVERRIDE = 0x20;

export const ALL_NODES_ADDRESS = new Uint8Array([0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
export const UNSPECIFIED_ADDRESS = new Uint8Array(16);

export interface NeighborMessage {
  type: typeof ICMPV6_NEIGHBOR_SOLICITATION | typeof ICMPV6_NEIGHBOR_ADVERTISEMENT;
  source: Uint8Array;
  destination: Uint8Array;
  target: Uint8Array;
  /** Advertisements only. */
  router: boolean;
  solicited: boolean;
  override: boolean;
  /** The source (NS) or target (NA) link-layer address option, when present. */
  linkLayerAddress?: Uint8Array;
}

/** Not NDP at all is ignored (`detail` says what it was); broken NDP is malformed, with its reason. */
export type NdpParse =
  | { ok: true; message: NeighborMessage }
  | { ok: false; malformed: false; detail: string }
  | { ok: false; malformed: true; reason: MalformedReason; detail: string };

const ignored = (detail: string): NdpParse => ({ ok: false, malformed: false, detail });
const malformed = (reason: MalformedReason, detail: string): NdpParse => ({ ok: false, malformed: true, reason, detail });

/** Parses the IPv6 packet in an Ethernet payload as an NS or NA; anything else is ignored, a broken one malformed. */
export function parseNeighborMessage(packet: Uint8Array): NdpParse {
  if (packet.length < IPV6_HEADER_LENGTH) return malformed('ipv6-short', `IPv6 packet of ${packet.length} bytes, shorter than its header`);
  if (packet[0]! >> 4 !== 6) return malformed('ipv6-version', `IP version ${packet[0]! >> 4} in an IPv6 frame`);
  const payloadLength = (packet[4]! << 8) | packet[5]!;
  if (IPV6_HEADER_LENGTH + payloadLength > packet.length) {
    return malformed('ipv6-payload-length', `IPv6 payload length ${payloadLength} beyond the ${packet.length - IPV6_HEADER_LENGTH} bytes received`);
  }
  // Neighbor Discovery is never sent with extension headers in front of it: those are not ours.
  if (packet[6] !== NEXT_HEADER_ICMPV6) return ignored(`IPv6 next header ${packet[6]}`);
  const source = packet.subarray(8, 24);
  const destination = packet.subarray(24, 40);
  const icmp = packet.subarray(IPV6_HEADER_LENGTH, IPV6_HEADER_LENGTH + payloadLength);
  if (icmp.length < 4) return malformed('icmpv6-short', `ICMPv6 message of ${icmp.length} bytes`);
  const type = icmp[0]!;
  if (type !== ICMPV6_NEIGHBOR_SOLICITATION && type !== ICMPV6_NEIGHBOR_ADVERTISEMENT) return ignored(`ICMPv6 type ${type}`);
  const name = type === ICMPV6_NEIGHBOR_SOLICITATION ? 'Neighbor Solicitation' : 'Neighbor Advertisement';
  if (packet[7] !== NDP_HOP_LIMIT) return malformed('ndp-hop-limit', `${name} with hop limit ${packet[7]}, not 255`);
  if (icmp[1] !== 0) return malformed('ndp-code', `${name} with code ${icmp[1]}`);
  if (icmp.length < NEIGHBOR_MESSAGE_LENGTH) return malformed('ndp-short', `${name} of ${icmp.length} bytes, shorter than ${NEIGHBOR_MESSAGE_LENGTH}`);
  if (icmpv6Checksum(source, destination, icmp) !== 0) return malformed('ndp-checksum', `${name} with a wrong ICMPv6 checksum`);
  const target = icmp.subarray(8, 24);
  if (target[0] === 0xff) return malformed('ndp-multicast-target', `${name} for a multicast target`);
  const flags = icmp[4]!;
  const message: NeighborMessage = {
    type,
    source,
    destination,
    target,
    router: type === ICMPV6_NEIGHBOR_ADVERTISEMENT && (flags & FLAG_ROUTER) !== 0,
    solicited: type === ICMPV6_NEIGHBOR_ADVERTISEMENT && (flags & FLAG_SOLICITED) !== 0,
    override: type === ICMPV6_NEIGHBOR_ADVERTISEMENT && (flags & FLAG_OVERRIDE) !== 0,
  };
  const wanted = type === ICMPV6_NEIGHBOR_SOLICITATION ? OPTION_SOURCE_LINK_LAYER_ADDRESS : OPTION_TARGET_LINK_LAYER_ADDRESS;
  for (let at = NEIGHBOR_MESSAGE_LENGTH; at < icmp.length; ) {
    if (icmp.length - at < 2) return malformed('ndp-option', `${name} with a truncated option at byte ${at}`);
    const length = icmp[at + 1]! * 8;
    if (length === 0) return malformed('ndp-option', `${name} with a zero-length option at byte ${at}`);
    if (at + length > icmp.length) return malformed('ndp-option', `${name} option at byte ${at} runs past the message`);
    if (icmp[at] === wanted && length >= 2 + MAC_LENGTH) message.linkLayerAddress = icmp.subarray(at + 2, at + 2 + MAC_LENGTH);
    at += length;
  }
  const unspecifiedSource = isUnspecified(source);
  if (type === ICMPV6_NEIGHBOR_SOLICITATION && unspecifiedSource) {
    if (!isSolicitedNodeAddress(destination)) return malformed('ndp-dad-destination', 'Neighbor Solicitation from :: not sent to a solicited-node address');
    if (message.linkLayerAddress) return malformed('ndp-dad-option', 'Neighbor Solicitation from :: with a source link-layer address');
  }
  if (type === ICMPV6_NEIGHBOR_ADVERTISEMENT && destination[0] === 0xff && message.solicited) {
    return malformed('ndp-solicited-to-multicast', 'solicited Neighbor Advertisement sent to a multicast address');
  }
  return { ok: true, message };
}

export interface AdvertisementOptions {
  /** Source MAC and the target link-layer address option. */
  ourMac: Uint8Array;
  target: Uint8Array;
  destination: Uint8Array;
  destinationMac: Uint8Array;
  solicited: boolean;
}

/**
 * A Neighbor Advertisement frame for `target` with the Override flag (this node now owns it) and
 * the target link-layer address option. Its IPv6 source is the target itself: the only address
 * of this link the responder is sure of, and as valid as any (RFC 4861 §7.2.4 asks for an
 * address of the interface; receivers do not check it).
 */
export function neighborAdvertisementFrame(options: AdvertisementOptions): Uint8Array {
  const icmp = new Uint8Array(NEIGHBOR_MESSAGE_LENGTH + 8);
  icmp[0] = ICMPV6_NEIGHBOR_ADVERTISEMENT;
  icmp[4] = FLAG_OVERRIDE | (options.solicited ? FLAG_SOLICITED : 0);
  icmp.set(options.target, 8);
  icmp[24] = OPTION_TARGET_LINK_LAYER_ADDRESS;
  icmp[25] = 1;
  icmp.set(options.ourMac, 26);
  const packet = ipv6Packet(options.target, options.destination, icmp);
  return buildEthernet(options.destinationMac, options.ourMac, ETHERTYPE_IPV6, packet);
}

/**
 * A Neighbor Solicitation frame for `target`: with `source` unspecified, the Duplicate Address
 * Detection probe of RFC 4862 §5.4.2 (no link-layer option), sent to the solicited-node group.
 */
export function neighborSolicitationFrame(target: Uint8Array, ourMac: Uint8Array, source: Uint8Array = UNSPECIFIED_ADDRESS): Uint8Array {
  const withOption = !isUnspecified(source);
  const icmp = new Uint8Array(NEIGHBOR_MESSAGE_LENGTH + (withOption ? 8 : 0));
  icmp[0] = ICMPV6_NEIGHBOR_SOLICITATION;
  icmp.set(target, 8);
  if (withOption) {
    icmp[24] = OPTION_SOURCE_LINK_LAYER_ADDRESS;
    icmp[25] = 1;
    icmp.set(ourMac, 26);
  }
  const destination = solicitedNodeAddress(target);
  return buildEthernet(multicastMac(destination), ourMac, ETHERTYPE_IPV6, ipv6Packet(source, destination, icmp));
}

function ipv6Packet(source: Uint8Array, destination: Uint8Array, icmp: Uint8Array): Uint8Array {
  const packet = new Uint8Array(IPV6_HEADER_LENGTH + icmp.length);
  packet[0] = 0x60;
  packet[4] = icmp.length >> 8;
  packet[5] = icmp.length & 0xff;
  packet[6] = NEXT_HEADER_ICMPV6;
  packet[7] = NDP_HOP_LIMIT;
  packet.set(source, 8);
  packet.set(destination, 24);
  const checksum = icmpv6Checksum(source, destination, icmp);
  icmp[2] = checksum >> 8;
  icmp[3] = checksum & 0xff;
  packet.set(icmp, IPV6_HEADER_LENGTH);
  return packet;
}

/**
 * The ICMPv6 checksum (RFC 4443 §2.3) over the IPv6 pseudo-header and `icmp`: with the checksum
 * field zeroed, the value to write there; over a received message, 0 when it is correct.
 */
export function icmpv6Checksum(source: Uint8Array, destination: Uint8Array, icmp: Uint8Array): number {
  let sum = sum16(source) + sum16(destination) + (icmp.length >>> 16) + (icmp.length & 0xffff) + NEXT_HEADER_ICMPV6 + sum16(icmp);
  while (sum > 0xffff) sum = (sum & 0xffff) + (sum >>> 16);
  return ~sum & 0xffff;
}

function sum16(bytes: Uint8Array): number {
  let sum = 0;
  for (let i = 0; i + 1 < bytes.length; i += 2) sum += (bytes[i]! << 8) | bytes[i + 1]!;
  if (bytes.length % 2 === 1) sum += bytes[bytes.length - 1]! << 8;
  return sum;
}

/** ff02::1:ffXX:XXXX, the group a Neighbor Solicitation for `address` is sent to (RFC 4291 §2.7.1). */
export function solicitedNodeAddress(address: Uint8Array): Uint8Array {
  const group = new Uint8Array([0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0, 0, 0]);
  group.set(address.subarray(13, 16), 13);
  return group;
}

/** 33:33 and the low 32 bits of an IPv6 multicast address (RFC 2464 §7). */
export function multicastMac(group: Uint8Array): Uint8Array {
  return new Uint8Array([0x33, 0x33, group[12]!, group[13]!, group[14]!, group[15]!]);
}

function isSolicitedNodeAddress(address: Uint8Array): boolean {
  const prefix = [0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff];
  return prefix.every((byte, i) => address[i] === byte);
}

function isUnspecified(address: Uint8Array): boolean {
  return address.every((byte) => byte === 0);
}
