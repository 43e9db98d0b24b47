/**
 * Ethernet II frames as an AF_PACKET SOCK_RAW socket hands them over and takes them: destination
 * and source MAC, EtherType, payload; no 802.1Q tag (the kernel strips it before a packet socket
 * bound to the VLAN interface sees the frame) and no FCS.
 */
export const ETHERTYPE_ARP = 0x0806;
export const ETHERTYPE_IPV6 = 0x86dd;
export const ETHERNET_HEADER_LENGTH = 14;
/** The shortest frame on the wire without its FCS; shorter ones are padded with zeros. */
export const ETHERNET_MIN_FRAME_LENGTH = 60;
export const MAC_LENGTH = 6;

export const BROADCAST_MAC = new Uint8Array([0xff, 0xff, 0xff, 0xff, 0xff, 0xff]);
export const ZERO_MAC = new Uint8Array(MAC_LENGTH);

export interface EthernetFrame {
  destination: Uint8Array;
  source: Uint8Array;
  etherType: number;
  /** Everything after the header, padding included: the protocol inside knows its own length. */
  payload: Uint8Array;
}

export function parseEthernet(frame: Uint8Array): EthernetFrame | undefined {
  if (frame.length < ETHERNET_HEADER_LENGTH) return undefined;
  return {
    destination: frame.subarray(0, 6),
    source: frame.subarray(6, 12),
    etherType: (frame[12]! << 8) | frame[13]!,
    payload: frame.subarray(ETHERNET_HEADER_LENGTH),
  };
}

export function buildEthernet(destination: Uint8Array, source: Uint8Array, etherType: number, payload: Uint8Array): Uint8Array {
  const frame = new Uint8Array(Math.max(ETHERNET_HEADER_LENGTH + payload.length, ETHERNET_MIN_FRAME_LENGTH));
  frame.set(destination, 0);
  frame.set(source, 6);
  frame[12] = etherType >> 8;
  frame[13] = etherType & 0xff;
  frame.set(payload, ETHERNET_HEADER_LENGTH);
  return frame;
}

export function formatMac(mac: Uint8Array): string {
  return [...mac].map((b) => b.toString(16).padStart(2, '0')).join(':');
}

/** "aa:bb:cc:dd:ee:ff" (or with dashes) to bytes; undefined when it is not six hex pairs. */
export function parseMac(text: string): Uint8Array | undefined {
  const parts = text.trim().split(/[:-]/);
  if (parts.length !== MAC_LENGTH || !parts.every((p) => /^[0-9a-fA-F]{2}$/.test(p))) return undefined;
  return Uint8Array.from(parts.map((p) => parseInt(p, 16)));
}

export function macEquals(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((byte, i) => byte === b[i]);
}

/** Group bit set: broadcast or multicast, never a station's own address. */
export function isMulticastMac(mac: Uint8Array): boolean {
  return (mac[0]! & 1) === 1;
}
