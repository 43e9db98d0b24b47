import { ErrorCode, FsmError, HeaderError, MessageType, OpenError, UpdateError } from '../../src/net/bgp/constants.ts';
import { frame } from '../../src/net/bgp/message.ts';
import { emptyCapabilities, encodeOpenBody } from '../../src/net/bgp/open.ts';

/**
 * Messages a broken or hostile peer may send, each with the NOTIFICATION RFC 4271 6 (and RFC
 * 6608 for FSM errors) requires in answer. `when`: in place of the peer's OPEN, between its
 * OPEN and KEEPALIVE, or once the session is established. Used by the codec test (what the
 * decoder throws) and the session test (what goes on the wire, and that only that session resets).
 */
export interface MalformedCase {
  name: string;
  when: 'open' | 'openconfirm' | 'established';
  bytes: Uint8Array;
  code: number;
  subcode: number;
  data?: number[];
  /** The error comes from the session FSM or the configuration, not from decoding alone. */
  session?: boolean;
}

const PEER_ASN = 65010;

export function header(length: number, type: number, marker = 0xff): Uint8Array {
  const out = new Uint8Array(Math.max(length, 19));
  out.fill(marker, 0, 16);
  out[16] = length >> 8;
  out[17] = length & 0xff;
  out[18] = type;
  return out;
}

const ORIGIN = [0x40, 1, 1, 0];
const AS_PATH = [0x40, 2, 6, 2, 1, 0, 0, PEER_ASN >> 8, PEER_ASN & 0xff];
const NEXT_HOP = [0x40, 3, 4, 198, 51, 100, 9];
const NLRI = [24, 203, 0, 113];

/** An UPDATE body from its parts; the two length fields are computed unless given. */
export function updateBody(attrs: number[], nlri: number[] = NLRI, withdrawn: number[] = [], lengths: { withdrawn?: number; attrs?: number } = {}): Uint8Array {
  const w = lengths.withdrawn ?? withdrawn.length;
  const a = lengths.attrs ?? attrs.length;
  return new Uint8Array([w >> 8, w & 0xff, ...withdrawn, a >> 8, a & 0xff, ...attrs, ...nlri]);
}

export const VALID_ATTRS = [...ORIGIN, ...AS_PATH, ...NEXT_HOP];

export function peerOpen(o: { asn?: number; holdTime?: number; bgpId?: number; version?: number } = {}): Uint8Array {
  const body = encodeOpenBody({
    myAs: o.asn ?? PEER_ASN,
    holdTime: o.holdTime ?? 90,
    bgpId: o.bgpId ?? 0xcb007101,
    capabilities: { ...emptyCapabilities(), fourOctetAs: o.asn ?? PEER_ASN },
  });
  if (o.version !== undefined) body[0] = o.version;
  return frame(MessageType.OPEN, body);
}

const update = (body: Uint8Array) => frame(MessageType.UPDATE, body);

export const MALFORMED: MalformedCase[] = [
  { name: 'bad marker', when: 'established', bytes: header(19, MessageType.KEEPALIVE, 0xfe), code: ErrorCode.MESSAGE_HEADER, subcode: HeaderError.CONNECTION_NOT_SYNCHRONIZED },
  { name: 'message length below the header', when: 'established', bytes: header(18, MessageType.KEEPALIVE), code: ErrorCode.MESSAGE_HEADER, subcode: HeaderError.BAD_MESSAGE_LENGTH, data: [0, 18] },
  { name: 'message length above 4096', when: 'established', bytes: header(4097, MessageType.UPDATE).subarray(0, 19), code: ErrorCode.MESSAGE_HEADER, subcode: HeaderError.BAD_MESSAGE_LENGTH, data: [0x10, 0x01] },
  { name: 'KEEPALIVE with a body', when: 'established', bytes: header(21, MessageType.KEEPALIVE), code: ErrorCode.MESSAGE_HEADER, subcode: HeaderError.BAD_MESSAGE_LENGTH, data: [0, 21] },
  { name: 'unknown message type', when: 'established', bytes: header(19, 9), code: ErrorCode.MESSAGE_HEADER, subcode: HeaderError.BAD_MESSAGE_TYPE, data: [9] },
  { name: 'withdrawn routes length overruns the UPDATE', when: 'established', bytes: update(updateBody([], [], [], { withdrawn: 16 })), code: ErrorCode.UPDATE_MESSAGE, subcode: UpdateError.MALFORMED_ATTRIBUTE_LIST },
  { name: 'path attribute length overruns the UPDATE', when: 'established', bytes: update(updateBody(VALID_ATTRS, [], [], { attrs: 200 })), code: ErrorCode.UPDATE_MESSAGE, subcode: UpdateError.MALFORMED_ATTRIBUTE_LIST },
  { name: 'truncated attribute (length past the attributes)', when: 'established', bytes: update(updateBody([...ORIGIN, ...AS_PATH, 0x40, 3, 4, 198, 51])), code: ErrorCode.UPDATE_MESSAGE, subcode: UpdateError.MALFORMED_ATTRIBUTE_LIST },
  { name: 'ORIGIN of length 2', when: 'established', bytes: update(updateBody([0x40, 1, 2, 0, 0, ...AS_PATH, ...NEXT_HOP])), code: ErrorCode.UPDATE_MESSAGE, subcode: UpdateError.ATTRIBUTE_LENGTH_ERROR, data: [0x40, 1, 2, 0, 0] },
  { name: 'ORIGIN value 3', when: 'established', bytes: update(updateBody([0x40, 1, 1, 3, ...AS_PATH, ...NEXT_HOP])), code: ErrorCode.UPDATE_MESSAGE, subcode: UpdateError.INVALID_ORIGIN, data: [0x40, 1, 1, 3] },
  { name: 'ORIGIN flagged optional', when: 'established', bytes: update(updateBody([0xc0, 1, 1, 0, ...AS_PATH, ...NEXT_HOP])), code: ErrorCode.UPDATE_MESSAGE, subcode: UpdateError.ATTRIBUTE_FLAGS_ERROR, data: [0xc0, 1, 1, 0] },
  { name: 'NEXT_HOP missing with NLRI', when: 'established', bytes: update(updateBody([...ORIGIN, ...AS_PATH])), code: ErrorCode.UPDATE_MESSAGE, subcode: UpdateError.MISSING_WELL_KNOWN_ATTRIBUTE, data: [3] },
  { name: 'unrecognized well-known attribute', when: 'established', bytes: update(updateBody([...VALID_ATTRS, 0x40, 99, 1, 7])), code: ErrorCode.UPDATE_MESSAGE, subcode: UpdateError.UNRECOGNIZED_WELL_KNOWN_ATTRIBUTE, data: [0x40, 99, 1, 7] },
  { name: 'AS_PATH segment overruns the attribute', when: 'established', bytes: update(updateBody([...ORIGIN, 0x40, 2, 6, 2, 3, 0, 0, 0xfd, 0xf2, ...NEXT_HOP])), code: ErrorCode.UPDATE_MESSAGE, subcode: UpdateError.MALFORMED_AS_PATH },
  { name: 'NLRI prefix length 33', when: 'established', bytes: update(updateBody(VALID_ATTRS, [33, 203, 0, 113, 1, 1])), code: ErrorCode.UPDATE_MESSAGE, subcode: UpdateError.INVALID_NETWORK_FIELD },
  { name: 'attribute twice', when: 'established', bytes: update(updateBody([...VALID_ATTRS, ...ORIGIN])), code: ErrorCode.UPDATE_MESSAGE, subcode: UpdateError.MALFORMED_ATTRIBUTE_LIST },
  { name: 'OPEN in Established', when: 'established', bytes: peerOpen(), code: ErrorCode.FSM, subcode: FsmError.UNEXPECTED_IN_ESTABLISHED, session: true },
  { name: 'OPEN version 3', when: 'open', bytes: peerOpen({ version: 3 }), code: ErrorCode.OPEN_MESSAGE, subcode: OpenError.UNSUPPORTED_VERSION, data: [0, 4] },
  { name: 'hold time 1', when: 'open', bytes: peerOpen({ holdTime: 1 }), code: ErrorCode.OPEN_MESSAGE, subcode: OpenError.UNACCEPTABLE_HOLD_TIME },
  { name: 'hold time 2', when: 'open', bytes: peerOpen({ holdTime: 2 }), code: ErrorCode.OPEN_MESSAGE, subcode: OpenError.UNACCEPTABLE_HOLD_TIME },
  { name: 'OPEN with an unsupported optional parameter', when: 'open', bytes: frame(MessageType.OPEN, new Uint8Array([4, 0xfd, 0xf2, 0, 90, 203, 0, 113, 1, 3, 1, 1, 0])), code: ErrorCode.OPEN_MESSAGE, subcode: OpenError.UNSUPPORTED_OPTIONAL_PARAMETER },
  { name: 'OPEN shorter than its minimum', when: 'open', bytes: frame(MessageType.OPEN, new Uint8Array([4, 0xfd, 0xf2, 0, 90])), code: ErrorCode.MESSAGE_HEADER, subcode: HeaderError.BAD_MESSAGE_LENGTH },
  { name: 'wrong AS in OPEN', when: 'open', bytes: peerOpen({ asn: 65099 }), code: ErrorCode.OPEN_MESSAGE, subcode: OpenError.BAD_PEER_AS, session: true },
  { name: 'BGP identifier 0', when: 'open', bytes: peerOpen({ bgpId: 0 }), code: ErrorCode.OPEN_MESSAGE, subcode: OpenError.BAD_BGP_IDENTIFIER, session: true },
  { name: 'NOTIFICATION in place of OPEN', when: 'open', bytes: frame(MessageType.NOTIFICATION, new Uint8Array([ErrorCode.CEASE, 2])), code: ErrorCode.FSM, subcode: FsmError.UNEXPECTED_IN_OPEN_SENT, session: true },
  { name: 'KEEPALIVE in place of OPEN', when: 'open', bytes: header(19, MessageType.KEEPALIVE), code: ErrorCode.FSM, subcode: FsmError.UNEXPECTED_IN_OPEN_SENT, session: true },
  { name: 'UPDATE in place of OPEN', when: 'open', bytes: update(updateBody(VALID_ATTRS)), code: ErrorCode.FSM, subcode: FsmError.UNEXPECTED_IN_OPEN_SENT, session: true },
  { name: 'UPDATE in OpenConfirm', when: 'openconfirm', bytes: update(updateBody(VALID_ATTRS)), code: ErrorCode.FSM, subcode: FsmError.UNEXPECTED_IN_OPEN_CONFIRM, session: true },
];

/** Well-formed but unusual: accepted without a NOTIFICATION, the session stays up. */
export const ACCEPTED: { name: string; bytes: Uint8Array }[] = [
  { name: 'unknown optional transitive attribute (kept, not an error)', bytes: update(updateBody([...VALID_ATTRS, 0xc0, 200, 3, 1, 2, 3])) },
  { name: 'unknown optional non-transitive attribute (ignored)', bytes: update(updateBody([...VALID_ATTRS, 0x80, 201, 2, 9, 9])) },
  { name: 'unknown optional attribute with an extended length', bytes: update(updateBody([...VALID_ATTRS, 0xd0, 202, 0, 2, 5, 5])) },
  { name: 'withdrawal only', bytes: update(updateBody([], [], [24, 203, 0, 113])) },
];

export { PEER_ASN };
