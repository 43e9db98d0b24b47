/**
 * The BFD Control packet (RFC 5880 4.1): its fields, encoding and the reception checks of
 * 6.8.6 that need nothing but the packet (the rest need the session: see session.ts).
 * Authentication (the A bit) is not implemented: single-hop sessions are protected by the
 * TTL of 255 instead (RFC 5881 5, GTSM), and a packet asking for authentication is refused.
 */

/** bfd.SessionState and the packet's Sta field (RFC 5880 4.1). */
export enum BfdState {
  AdminDown = 0,
  Down = 1,
  Init = 2,
  Up = 3,
}

/** The Diagnostic codes (RFC 5880 4.1): why the sender's session last left Up. */
export enum BfdDiag {
  None = 0,
  ControlDetectionTimeExpired = 1,
  EchoFunctionFailed = 2,
  NeighborSignaledSessionDown = 3,
  ForwardingPlaneReset = 4,
  PathDown = 5,
  ConcatenatedPathDown = 6,
  AdministrativelyDown = 7,
  ReverseConcatenatedPathDown = 8,
}

export const BFD_VERSION = 1;
/** The mandatory section without authentication. */
export const CONTROL_PACKET_LENGTH = 24;

export interface ControlPacket {
  diag: BfdDiag;
  state: BfdState;
  poll: boolean;
  final: boolean;
  /** C: the sender's BFD does not share fate with its control plane. */
  controlPlaneIndependent: boolean;
  demand: boolean;
  detectMult: number;
  myDiscriminator: number;
  yourDiscriminator: number;
  /** Microseconds, as on the wire. */
  desiredMinTxUs: number;
  requiredMinRxUs: number;
  requiredMinEchoRxUs: number;
}

/**
 * Why a packet is discarded: a fixed set, so a count per reason stays the same size whatever
 * arrives (issue 34). What varies (a length, a version) is the `detail`, for a rate-limited log.
 * The first ten are decodeControlPacket's; the last three the endpoint's (no session matches).
 */
export const BFD_DISCARD_REASONS = [
  'short',
  'version',
  'length-too-short',
  'length-beyond-datagram',
  'authentication',
  'detect-mult-zero',
  'multipoint',
  'my-discriminator-zero',
  'your-discriminator-zero',
  'unknown-your-discriminator',
  'no-session',
  'other-peers-discriminator',
] as const;
export type BfdDiscardReason = (typeof BFD_DISCARD_REASONS)[number];

export interface BfdDiscard {
  error: BfdDiscardReason;
  detail: string;
}

export function encodeControlPacket(p: ControlPacket): Uint8Array {
  if (p.poll && p.final) throw new Error('a BFD packet never carries both Poll and Final (RFC 5880 6.5)');
  const out = new Uint8Array(CONTROL_PACKET_LENGTH);
  const v = new DataView(out.buffer);
  v.setUint8(0, (BFD_VERSION << 5) | (p.diag & 0x1f));
  v.setUint8(1, ((p.state & 0x3) << 6) | (p.poll ? 0x20 : 0) | (p.final ? 0x10 : 0) | (p.controlPlaneIndependent ? 0x08 : 0) | (p.demand ? 0x02 : 0));
  v.setUint8(2, p.detectMult);
  v.setUint8(3, CONTROL_PACKET_LENGTH);
  v.setUint32(4, p.myDiscriminator >>> 0);
  v.setUint32(8, p.yourDiscriminator >>> 0);
  v.setUint32(12, p.desiredMinTxUs >>> 0);
  v.setUint32(16, p.requiredMinRxUs >>> 0);
  v.setUint32(20, p.requiredMinEchoRxUs >>> 0);
  return out;
}

/**
 * The packet in `data`, or why it is discarded (RFC 5880 6.8.6, the checks that need no
 * session): a wrong version, a length too short or longer than what arrived, a Detect Mult of
 * zero, the Multipoint bit, a My Discriminator of zero, a zero Your Discriminator from a sender
 * that is not Down or AdminDown, authentication (not configured here, so refused).
 */
export function decodeControlPacket(data: Uint8Array): { packet: ControlPacket } | BfdDiscard {
  if (data.length < CONTROL_PACKET_LENGTH) return { error: 'short', detail: `${data.length} bytes, shorter than a BFD Control packet (24)` };
  const v = new DataView(data.buffer, data.byteOffset, data.byteLength);
  const version = v.getUint8(0) >> 5;
  if (version !== BFD_VERSION) return { error: 'version', detail: `version ${version}, not 1` };
  const flags = v.getUint8(1);
  const auth = (flags & 0x04) !== 0;
  const length = v.getUint8(3);
  if (length < (auth ? 26 : CONTROL_PACKET_LENGTH)) return { error: 'length-too-short', detail: `Length field ${length} is too short` };
  if (length > data.length) return { error: 'length-beyond-datagram', detail: `Length field ${length} exceeds the ${data.length} bytes received` };
  if (auth) return { error: 'authentication', detail: 'authentication requested (the A bit), which is not configured' };
  const packet: ControlPacket = {
    diag: v.getUint8(0) & 0x1f,
    state: (flags >> 6) as BfdState,
    poll: (flags & 0x20) !== 0,
    final: (flags & 0x10) !== 0,
    controlPlaneIndependent: (flags & 0x08) !== 0,
    demand: (flags & 0x02) !== 0,
    detectMult: v.getUint8(2),
    myDiscriminator: v.getUint32(4),
    yourDiscriminator: v.getUint32(8),
    desiredMinTxUs: v.getUint32(12),
    requiredMinRxUs: v.getUint32(16),
    requiredMinEchoRxUs: v.getUint32(20),
  };
  if (packet.detectMult === 0) return { error: 'detect-mult-zero', detail: 'Detect Mult is zero' };
  if (flags & 0x01) return { error: 'multipoint', detail: 'the Multipoint bit is set' };
  if (packet.myDiscriminator === 0) return { error: 'my-discriminator-zero', detail: 'My Discriminator is zero' };
  if (packet.yourDiscriminator === 0 && packet.state !== BfdState.Down && packet.state !== BfdState.AdminDown) {
    return { error: 'your-discriminator-zero', detail: `Your Discriminator is zero in state ${BfdState[packet.state]}` };
  }
  return { packet };
}
