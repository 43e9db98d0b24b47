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
const V6_NEXT_HOP = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x11];
/** MP_REACH_NLRI for IPv6 unicast: next hop 2001:db8::11, NLRI 2001:db8:1::/48. */
const attr = (flags: number, type: number, value: number[]) => [flags, type, value.length, ...value];
const MP_REACH_V6 = attr(0x80, 14, [0, 2, 1, 16, ...V6_NEXT_HOP, 0, 48, 0x20, 0x01, 0x0d, 0xb8, 0, 1]);
const MP_UNREACH_V6 = attr(0x80, 15, [0, 2, 1, 48, 0x20, 0x01, 0x0d, 0xb8, 0, 2]);
/** MP_REACH_NLRI for IPv4 unicast with the given next hop bytes and NLRI 203.0.113.0/24. */
function mpReachV4(nextHop: number[]): number[] {
  return attr(0x80, 14, [0, 1, 1, nextHop.length, ...nextHop, 0, 24, 203, 0, 113]);
}

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
  { name: 'unrecognized well-known attribute', when: 'established', bytes: update(updateBody([...VALID_ATTRS, 0x40, 99, 1, 7])), code: ErrorCode.UPDATE_MESSAGE, subcode: UpdateError.UNRECOGNIZED_WELL_KNOWN_ATTRIBUTE, data: [0x40, 99, 1, 7] },
  { name: 'MP_REACH_NLRI twice (RFC 7606 3.g)', when: 'established', bytes: update(updateBody([...MP_REACH_V6, ...MP_REACH_V6, ...ORIGIN, ...AS_PATH], [])), code: ErrorCode.UPDATE_MESSAGE, subcode: UpdateError.MALFORMED_ATTRIBUTE_LIST },
  { name: 'MP_UNREACH_NLRI twice (RFC 7606 3.g)', when: 'established', bytes: update(updateBody([...MP_UNREACH_V6, ...MP_UNREACH_V6], [])), code: ErrorCode.UPDATE_MESSAGE, subcode: UpdateError.MALFORMED_ATTRIBUTE_LIST },
  { name: 'MP_REACH_NLRI for IPv4 with a next hop of 8 bytes (RFC 7606 7.11)', when: 'established', bytes: update(updateBody([...mpReachV4([198, 51, 100, 9, 198, 51, 100, 10]), ...ORIGIN, ...AS_PATH], [])), code: ErrorCode.UPDATE_MESSAGE, subcode: UpdateError.OPTIONAL_ATTRIBUTE_ERROR },
  { name: 'MP_REACH_NLRI for IPv6 with a next hop of 4 bytes', when: 'established', bytes: update(updateBody([...attr(0x80, 14, [0, 2, 1, 4, 198, 51, 100, 9, 0]), ...ORIGIN, ...AS_PATH], [])), code: ErrorCode.UPDATE_MESSAGE, subcode: UpdateError.OPTIONAL_ATTRIBUTE_ERROR },
  { name: 'MP_REACH_NLRI whose NLRI cannot be parsed (RFC 7606 5.3)', when: 'established', bytes: update(updateBody([...attr(0x80, 14, [0, 2, 1, 16, ...V6_NEXT_HOP, 0, 129, 0x20]), ...ORIGIN, ...AS_PATH], [])), code: ErrorCode.UPDATE_MESSAGE, subcode: UpdateError.OPTIONAL_ATTRIBUTE_ERROR },
  { name: 'MP_UNREACH_NLRI whose NLRI cannot be parsed', when: 'established', bytes: update(updateBody(attr(0x80, 15, [0, 2, 1, 64, 0x20]), [])), code: ErrorCode.UPDATE_MESSAGE, subcode: UpdateError.OPTIONAL_ATTRIBUTE_ERROR },
  { name: 'NLRI prefix length 33', when: 'established', bytes: update(updateBody(VALID_ATTRS, [33, 203, 0, 113, 1, 1])), code: ErrorCode.UPDATE_MESSAGE, subcode: UpdateError.INVALID_NETWORK_FIELD },
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

/**
 * Malformed UPDATEs RFC 7606 handles without a reset: the session stays up, the routes in the
 * UPDATE count as withdrawn (treat-as-withdraw) or the attribute is dropped. `counts`: what
 * each adds to the peer's update-error counters.
 */
export interface Rfc7606Case {
  name: string;
  bytes: Uint8Array;
  treatAsWithdraw: boolean;
  /** Only from an internal peer (from an external one the attribute is discarded first). */
  ibgp?: true;
  counts: Partial<Record<'treat_as_withdraw' | 'attribute_discard' | 'repeated_attribute', number>>;
}

const TAW = { treatAsWithdraw: true, counts: { treat_as_withdraw: 1 } };
const DISCARD = { treatAsWithdraw: false, counts: { attribute_discard: 1 } };
const MED = [0x80, 4, 4, 0, 0, 0, 5];

export const RFC7606: Rfc7606Case[] = [
  { name: 'ORIGIN of length 2 (7.1)', bytes: update(updateBody([0x40, 1, 2, 0, 0, ...AS_PATH, ...NEXT_HOP])), ...TAW },
  { name: 'ORIGIN value 3 (7.1)', bytes: update(updateBody([0x40, 1, 1, 3, ...AS_PATH, ...NEXT_HOP])), ...TAW },
  { name: 'ORIGIN flagged optional (3.c)', bytes: update(updateBody([0xc0, 1, 1, 0, ...AS_PATH, ...NEXT_HOP])), ...TAW },
  { name: 'ORIGIN with the partial bit (3.c)', bytes: update(updateBody([0x60, 1, 1, 0, ...AS_PATH, ...NEXT_HOP])), ...TAW },
  { name: 'ORIGIN missing with NLRI (3.d)', bytes: update(updateBody([...AS_PATH, ...NEXT_HOP])), ...TAW },
  { name: 'AS_PATH missing with NLRI (3.d)', bytes: update(updateBody([...ORIGIN, ...NEXT_HOP])), ...TAW },
  { name: 'NEXT_HOP missing with NLRI (3.d)', bytes: update(updateBody([...ORIGIN, ...AS_PATH])), ...TAW },
  { name: 'AS_PATH segment overruns the attribute (7.2)', bytes: update(updateBody([...ORIGIN, 0x40, 2, 6, 2, 3, 0, 0, 0xfd, 0xf2, ...NEXT_HOP])), ...TAW },
  { name: 'AS_PATH segment of zero ASes (7.2)', bytes: update(updateBody([...ORIGIN, 0x40, 2, 2, 2, 0, ...NEXT_HOP])), ...TAW },
  { name: 'AS_PATH with one byte after the last segment (7.2)', bytes: update(updateBody([...ORIGIN, 0x40, 2, 7, 2, 1, 0, 0, 0xfd, 0xf2, 2, ...NEXT_HOP])), ...TAW },
  { name: 'AS_PATH segment type 7 (7.2)', bytes: update(updateBody([...ORIGIN, 0x40, 2, 6, 7, 1, 0, 0, 0xfd, 0xf2, ...NEXT_HOP])), ...TAW },
  { name: 'AS_PATH with AS 0 (RFC 7607)', bytes: update(updateBody([...ORIGIN, 0x40, 2, 6, 2, 1, 0, 0, 0, 0, ...NEXT_HOP])), ...TAW },
  { name: 'AS_PATH with a confederation segment from an external peer (7.2)', bytes: update(updateBody([...ORIGIN, 0x40, 2, 6, 3, 1, 0, 0, 0xfd, 0xf2, ...NEXT_HOP])), ...TAW },
  { name: 'NEXT_HOP of length 5 (7.3)', bytes: update(updateBody([...ORIGIN, ...AS_PATH, 0x40, 3, 5, 198, 51, 100, 9, 0])), ...TAW },
  { name: 'MULTI_EXIT_DISC of length 3 (7.4)', bytes: update(updateBody([...VALID_ATTRS, 0x80, 4, 3, 0, 0, 5])), ...TAW },
  { name: 'LOCAL_PREF of length 2 from an internal peer (7.5)', bytes: update(updateBody([...VALID_ATTRS, 0x40, 5, 2, 0, 100])), ...TAW, ibgp: true },
  { name: 'COMMUNITIES of length 6 (7.8)', bytes: update(updateBody([...VALID_ATTRS, 0xc0, 8, 6, 0xfd, 0xf2, 0, 7, 0, 1])), ...TAW },
  { name: 'COMMUNITIES of length 0 (7.8)', bytes: update(updateBody([...VALID_ATTRS, 0xc0, 8, 0])), ...TAW },
  { name: 'COMMUNITIES flagged non-transitive (3.c)', bytes: update(updateBody([...VALID_ATTRS, 0x80, 8, 4, 0xfd, 0xf2, 0, 7])), ...TAW },
  { name: 'EXTENDED_COMMUNITIES of length 7 (7.14)', bytes: update(updateBody([...VALID_ATTRS, 0xc0, 16, 7, 0, 2, 0xfd, 0xf2, 0, 0, 0])), ...TAW },
  { name: 'LARGE_COMMUNITY of length 8 (RFC 8092 6)', bytes: update(updateBody([...VALID_ATTRS, 0xc0, 32, 8, 0, 0, 0xfd, 0xf2, 0, 0, 0, 1])), ...TAW },
  { name: 'attribute length overruns the path attributes (4)', bytes: update(updateBody([...ORIGIN, ...AS_PATH, 0x40, 3, 4, 198, 51])), ...TAW },
  { name: 'two bytes left after the last attribute (4)', bytes: update(updateBody([...VALID_ATTRS, 0x40, 6])), ...TAW },
  { name: 'MP_REACH_NLRI flagged transitive: its routes withdrawn (3.c)', bytes: update(updateBody([0xc0, ...MP_REACH_V6.slice(1), ...ORIGIN, ...AS_PATH], [])), ...TAW },
  { name: 'withdrawal only with a malformed MED (no routes to withdraw, still counted)', bytes: update(updateBody([0x80, 4, 2, 0, 0], [], [24, 203, 0, 113])), ...TAW },
  { name: 'ATOMIC_AGGREGATE of length 1 (7.6)', bytes: update(updateBody([...VALID_ATTRS, 0x40, 6, 1, 0])), ...DISCARD },
  { name: 'AGGREGATOR of length 5 (7.7)', bytes: update(updateBody([...VALID_ATTRS, 0xc0, 7, 5, 0, 0, 0xfd, 0xf2, 1])), ...DISCARD },
  { name: 'AGGREGATOR with AS 0 (RFC 7607)', bytes: update(updateBody([...VALID_ATTRS, 0xc0, 7, 8, 0, 0, 0, 0, 198, 51, 100, 9])), ...DISCARD },
  { name: 'AS4_PATH segment overruns the attribute (RFC 6793 6)', bytes: update(updateBody([...VALID_ATTRS, 0xc0, 17, 6, 2, 2, 0, 0, 0xfd, 0xf2])), ...DISCARD },
  { name: 'AS4_AGGREGATOR of length 7 (RFC 6793 6)', bytes: update(updateBody([...VALID_ATTRS, 0xc0, 18, 7, 0, 0, 0xfd, 0xf2, 198, 51, 100])), ...DISCARD },
  { name: 'LOCAL_PREF from an external peer (7.5)', bytes: update(updateBody([...VALID_ATTRS, 0x40, 5, 4, 0, 0, 0, 100])), ...DISCARD },
  { name: 'MULTI_EXIT_DISC twice: the first kept (3.g)', bytes: update(updateBody([...VALID_ATTRS, ...MED, ...MED])), treatAsWithdraw: false, counts: { repeated_attribute: 1 } },
  { name: 'ORIGIN three times, the repeats malformed: the first kept (3.g)', bytes: update(updateBody([...VALID_ATTRS, 0x40, 1, 2, 9, 9, 0xc0, 1, 1, 7])), treatAsWithdraw: false, counts: { repeated_attribute: 2 } },
];

/** Well-formed but unusual: accepted without a NOTIFICATION, the session stays up. */
export const ACCEPTED: { name: string; bytes: Uint8Array }[] = [
  { name: 'unknown optional transitive attribute (kept, not an error)', bytes: update(updateBody([...VALID_ATTRS, 0xc0, 200, 3, 1, 2, 3])) },
  { name: 'unknown optional non-transitive attribute (ignored)', bytes: update(updateBody([...VALID_ATTRS, 0x80, 201, 2, 9, 9])) },
  { name: 'unknown optional attribute with an extended length', bytes: update(updateBody([...VALID_ATTRS, 0xd0, 202, 0, 2, 5, 5])) },
  { name: 'withdrawal only', bytes: update(updateBody([], [], [24, 203, 0, 113])) },
];

export { PEER_ASN };
