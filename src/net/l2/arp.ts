import { BROADCAST_MAC, ETHERTYPE_ARP, MAC_LENGTH, ZERO_MAC, buildEthernet } from './ethernet.ts';
import type { MalformedReason } from './refusals.ts';

/** ARP for IPv4 over Ethernet (RFC 826) and the announcements of RFC 5227. */
export const ARP_REQUEST = 1;
export const ARP_REPLY = 2;
export const HTYPE_ETHERNET = 1;
export const PTYPE_IPV4 = 0x0800;
/** The fixed size of an Ethernet/IPv4 ARP packet; more bytes are the frame's padding. */
export const ARP_PACKET_LENGTH = 28;

export interface ArpPacket {
  operation: number;
  senderMac: Uint8Array;
  senderIp: Uint8Array;
  targetMac: Uint8Array;
  targetIp: Uint8Array;
}

export type ArpParse = { ok: true; packet: ArpPacket } | { ok: false; reason: MalformedReason; detail: string };

/** Parses an Ethernet/IPv4 ARP packet; any other shape is refused with the reason (and what was found, for a log line). */
export function parseArp(payload: Uint8Array): ArpParse {
  if (payload.length < ARP_PACKET_LENGTH) return { ok: false, reason: 'arp-short', detail: `ARP packet of ${payload.length} bytes, shorter than ${ARP_PACKET_LENGTH}` };
  const view = new DataView(payload.buffer, payload.byteOffset, payload.byteLength);
  const htype = view.getUint16(0);
  const ptype = view.getUint16(2);
  const hlen = payload[4]!;
  const plen = payload[5]!;
  if (htype !== HTYPE_ETHERNET || ptype !== PTYPE_IPV4 || hlen !== MAC_LENGTH || plen !== 4) {
    return { ok: false, reason: 'arp-not-ethernet-ipv4', detail: `ARP for hardware ${htype}/${hlen} and protocol 0x${ptype.toString(16)}/${plen}, not Ethernet/IPv4` };
  }
  const operation = view.getUint16(6);
  if (operation !== ARP_REQUEST && operation !== ARP_REPLY) return { ok: false, reason: 'arp-operation', detail: `ARP operation ${operation}` };
  return {
    ok: true,
    packet: {
      operation,
      senderMac: payload.subarray(8, 14),
      senderIp: payload.subarray(14, 18),
      targetMac: payload.subarray(18, 24),
      targetIp: payload.subarray(24, 28),
    },
  };
}

export function serializeArp(packet: ArpPacket): Uint8Array {
  const out = new Uint8Array(ARP_PACKET_LENGTH);
  const view = new DataView(out.buffer);
  view.setUint16(0, HTYPE_ETHERNET);
  view.setUint16(2, PTYPE_IPV4);
  out[4] = MAC_LENGTH;
  out[5] = 4;
  view.setUint16(6, packet.operation);
  out.set(packet.senderMac, 8);
  out.set(packet.senderIp, 14);
  out.set(packet.targetMac, 18);
  out.set(packet.targetIp, 24);
  return out;
}

/** The reply to `request` saying `ourMac` has the address asked for, sent straight to the asker. */
export function arpReplyFrame(request: ArpPacket, ourMac: Uint8Array): Uint8Array {
  const reply = serializeArp({
    operation: ARP_REPLY,
    senderMac: ourMac,
    senderIp: request.targetIp,
    targetMac: request.senderMac,
    targetIp: request.senderIp,
  });
  return buildEthernet(request.senderMac, ourMac, ETHERTYPE_ARP, reply);
}

/**
 * Gratuitous ARP for `ip`, broadcast, in both forms: a request with sender = target address (the
 * ARP Announcement of RFC 5227 §2.3, which every current stack and switch learns from) and a reply
 * with the same addresses (what some older stacks only learn from; MetalLB sends both for the same
 * reason). Linux updates an existing neighbour entry from either.
 */
export function gratuitousArpFrames(ip: Uint8Array, ourMac: Uint8Array): Uint8Array[] {
  return [ARP_REQUEST, ARP_REPLY].map((operation) =>
    buildEthernet(
      BROADCAST_MAC,
      ourMac,
      ETHERTYPE_ARP,
      serializeArp({ operation, senderMac: ourMac, senderIp: ip, targetMac: operation === ARP_REQUEST ? ZERO_MAC : BROADCAST_MAC, targetIp: ip }),
    ),
  );
}

/** An ARP Probe (RFC 5227 §2.1.1): who has `ip`, asked with sender address 0.0.0.0 so nobody's cache changes. */
export function arpProbeFrame(ip: Uint8Array, ourMac: Uint8Array): Uint8Array {
  return buildEthernet(
    BROADCAST_MAC,
    ourMac,
    ETHERTYPE_ARP,
    serializeArp({ operation: ARP_REQUEST, senderMac: ourMac, senderIp: new Uint8Array(4), targetMac: ZERO_MAC, targetIp: ip }),
  );
}
