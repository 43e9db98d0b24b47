import type { IP, IPFamily } from '../ip.ts';
import { Afi, AS_TRANS, AsPathSegment, AttrFlag, AttrType, ErrorCode, HEADER_LENGTH, MAX_MESSAGE_LENGTH, Safi, UpdateError } from './constants.ts';
import { BgpError } from './errors.ts';
import { ADDRESS_BYTES, errorOf, type Nlri, nlriLength, readAddress, readNlriList, writeAddress, writeNlri } from './nlri.ts';
import { MALFORMED_ACTION, type UpdateFault } from './update-faults.ts';
import { Reader, Writer } from './wire.ts';

/** What the session negotiated that changes the UPDATE encoding in one direction. */
export interface UpdateContext {
  /** RFC 6793: both sides speak 4-octet AS numbers, so AS_PATH carries 4-octet ASes. */
  fourOctetAs: boolean;
  /** RFC 7911: the NLRI of this family carry path identifiers in this direction. */
  addPath: Record<IPFamily, boolean>;
  /** Receiving from an external peer: attributes only iBGP may carry are discarded (RFC 7606 7.2, 7.5, 7.9, 7.10). */
  ebgp?: boolean;
}

export interface AsPathSegmentValue {
  type: number;
  asns: number[];
}

export interface UnknownAttribute {
  flags: number;
  type: number;
  value: Uint8Array;
}

export interface MpReach {
  afi: number;
  safi: number;
  /** The global next hop, and for IPv6 optionally the link-local one after it (RFC 2545). */
  nextHops: IP[];
  /** Empty for an AFI/SAFI this speaker does not know. */
  nlri: Nlri[];
}

export interface MpUnreach {
  afi: number;
  safi: number;
  withdrawn: Nlri[];
}

export interface PathAttributes {
  origin?: number;
  asPath?: AsPathSegmentValue[];
  nextHop?: IP;
  med?: number;
  localPref?: number;
  atomicAggregate?: boolean;
  communities?: number[];
  as4Path?: AsPathSegmentValue[];
  mpReach?: MpReach;
  mpUnreach?: MpUnreach;
  /**
   * Attributes this speaker does not interpret. Optional transitive ones would be passed on
   * with the Partial bit set by a speaker that re-advertises; this one only originates routes,
   * so they are read, kept here, and never sent.
   */
  unknown: UnknownAttribute[];
}

export interface UpdateMessage {
  type: 'update';
  /** IPv4 unicast withdrawals in the classic field. */
  withdrawn: Nlri[];
  attributes: PathAttributes;
  /** IPv4 unicast announcements in the classic field. */
  nlri: Nlri[];
  /** What RFC 7606 let pass without a reset (absent when nothing was wrong). */
  faults?: UpdateFault[];
  /**
   * RFC 7606 treat-as-withdraw: the routes of `nlri` and of `attributes.mpReach` are to be read as
   * withdrawn, not announced (absent when false).
   */
  treatAsWithdraw?: true;
}

const MAX_BODY = MAX_MESSAGE_LENGTH - HEADER_LENGTH;

export function familyOf(afi: number, safi: number): IPFamily | undefined {
  if (safi !== Safi.UNICAST) return undefined;
  return afi === Afi.IPV4 ? 4 : afi === Afi.IPV6 ? 6 : undefined;
}

export function afiOf(family: IPFamily): number {
  return family === 4 ? Afi.IPV4 : Afi.IPV6;
}

/** End-of-RIB (RFC 4724 2): an empty UPDATE for IPv4 unicast, an empty MP_UNREACH for others. */
export function endOfRibFamily(u: UpdateMessage): IPFamily | undefined {
  const a = u.attributes;
  if (u.withdrawn.length > 0 || u.nlri.length > 0) return undefined;
  const attributeCount = Object.keys(a).filter((k) => k !== 'unknown').length + a.unknown.length;
  if (attributeCount === 0) return 4;
  if (attributeCount === 1 && a.mpUnreach && a.mpUnreach.withdrawn.length === 0) return familyOf(a.mpUnreach.afi, a.mpUnreach.safi);
  return undefined;
}

// Flags (optional, transitive) each known attribute must carry (RFC 4271 5, 6.3, and the RFC of each).
const EXPECTED_FLAGS: Record<number, number> = {
  [AttrType.ORIGIN]: AttrFlag.TRANSITIVE,
  [AttrType.AS_PATH]: AttrFlag.TRANSITIVE,
  [AttrType.NEXT_HOP]: AttrFlag.TRANSITIVE,
  [AttrType.MULTI_EXIT_DISC]: AttrFlag.OPTIONAL,
  [AttrType.LOCAL_PREF]: AttrFlag.TRANSITIVE,
  [AttrType.ATOMIC_AGGREGATE]: AttrFlag.TRANSITIVE,
  [AttrType.AGGREGATOR]: AttrFlag.OPTIONAL | AttrFlag.TRANSITIVE,
  [AttrType.COMMUNITIES]: AttrFlag.OPTIONAL | AttrFlag.TRANSITIVE,
  [AttrType.ORIGINATOR_ID]: AttrFlag.OPTIONAL,
  [AttrType.CLUSTER_LIST]: AttrFlag.OPTIONAL,
  [AttrType.MP_REACH_NLRI]: AttrFlag.OPTIONAL,
  [AttrType.MP_UNREACH_NLRI]: AttrFlag.OPTIONAL,
  [AttrType.EXTENDED_COMMUNITIES]: AttrFlag.OPTIONAL | AttrFlag.TRANSITIVE,
  [AttrType.AS4_PATH]: AttrFlag.OPTIONAL | AttrFlag.TRANSITIVE,
  [AttrType.AS4_AGGREGATOR]: AttrFlag.OPTIONAL | AttrFlag.TRANSITIVE,
  [AttrType.IPV6_EXTENDED_COMMUNITIES]: AttrFlag.OPTIONAL | AttrFlag.TRANSITIVE,
  [AttrType.LARGE_COMMUNITY]: AttrFlag.OPTIONAL | AttrFlag.TRANSITIVE,
};

const FIXED_LENGTH: Record<number, number> = {
  [AttrType.ORIGIN]: 1,
  [AttrType.NEXT_HOP]: 4,
  [AttrType.MULTI_EXIT_DISC]: 4,
  [AttrType.LOCAL_PREF]: 4,
  [AttrType.ATOMIC_AGGREGATE]: 0,
  [AttrType.ORIGINATOR_ID]: 4,
  [AttrType.AS4_AGGREGATOR]: 8,
};

/** Attributes whose length must be a non-zero multiple of their element (RFC 7606 7.8, 7.10, 7.14, 7.15; RFC 8092 6). */
const ELEMENT_LENGTH: Record<number, { size: number; emptyOk: boolean }> = {
  [AttrType.COMMUNITIES]: { size: 4, emptyOk: false },
  [AttrType.CLUSTER_LIST]: { size: 4, emptyOk: false },
  [AttrType.EXTENDED_COMMUNITIES]: { size: 8, emptyOk: true },
  [AttrType.IPV6_EXTENDED_COMMUNITIES]: { size: 20, emptyOk: true },
  [AttrType.LARGE_COMMUNITY]: { size: 12, emptyOk: false },
};

/** Only iBGP (and confederation) peers may send these; from an external peer they are discarded. */
const IBGP_ONLY = new Set<number>([AttrType.LOCAL_PREF, AttrType.ORIGINATOR_ID, AttrType.CLUSTER_LIST]);

const ATTR_NAMES: Record<number, string> = Object.fromEntries(Object.entries(AttrType).map(([k, v]) => [v, k]));

function attrName(type: number): string {
  return ATTR_NAMES[type] ?? `type ${type}`;
}

function updateError(subcode: number, data?: Uint8Array) {
  return (what: string) => new BgpError(ErrorCode.UPDATE_MESSAGE, subcode, `UPDATE: ${what}`, data);
}

/**
 * Decodes a received UPDATE body with RFC 7606 error handling: the errors that still reset the
 * session are thrown (a BgpError with its NOTIFICATION), the others are listed in `faults`
 * and, for treat-as-withdraw, flagged in `treatAsWithdraw`.
 */
export function decodeUpdate(body: Uint8Array, ctx: UpdateContext): UpdateMessage {
  const malformed = updateError(UpdateError.MALFORMED_ATTRIBUTE_LIST);
  const r = new Reader(body, malformed);
  const withdrawnLength = r.u16('withdrawn routes length');
  const withdrawnReader = r.sub(withdrawnLength, `withdrawn routes length ${withdrawnLength} overruns the message`);
  const withdrawn = readNlriList(withdrawnReader, 4, ctx.addPath[4], updateError(UpdateError.INVALID_NETWORK_FIELD));
  const attrsLength = r.u16('total path attribute length');
  const attrsReader = r.sub(attrsLength, `total path attribute length ${attrsLength} overruns the message`);
  const faults: UpdateFault[] = [];
  const attributes = decodeAttributes(body, attrsReader, ctx, faults);
  // Read before any treat-as-withdraw is decided: it needs the NLRI parsed (RFC 7606 3.j, 5.3).
  const nlri = readNlriList(r, 4, ctx.addPath[4], updateError(UpdateError.INVALID_NETWORK_FIELD));
  if (nlri.length > 0 || attributes.mpReach) {
    const required = [AttrType.ORIGIN, AttrType.AS_PATH, ...(nlri.length > 0 ? [AttrType.NEXT_HOP] : [])];
    const present: Record<number, unknown> = { [AttrType.ORIGIN]: attributes.origin, [AttrType.AS_PATH]: attributes.asPath, [AttrType.NEXT_HOP]: attributes.nextHop };
    // An attribute already faulted is not "missing": its fault says what it was.
    const faulted = new Set(faults.map((f) => f.attribute));
    for (const type of required) {
      if (present[type] === undefined && !faulted.has(type)) faults.push({ action: 'treat_as_withdraw', attribute: type, what: `well-known attribute ${attrName(type)} (${type}) is missing` });
    }
  }
  const out: UpdateMessage = { type: 'update', withdrawn, attributes, nlri };
  if (faults.length > 0) out.faults = faults;
  if (faults.some((f) => f.action === 'treat_as_withdraw')) out.treatAsWithdraw = true;
  return out;
}

/** Runs `read`; a BgpError it throws (the value is malformed) becomes a fault with `action`. */
function readOr(faults: UpdateFault[], type: number, action: UpdateFault['action'], read: () => void): void {
  try {
    read();
  } catch (e) {
    if (!(e instanceof BgpError)) throw e;
    faults.push({ action, attribute: type, what: e.message });
  }
}

function decodeAttributes(body: Uint8Array, r: Reader, ctx: UpdateContext, faults: UpdateFault[]): PathAttributes {
  const attrs: PathAttributes = { unknown: [] };
  const seen = new Set<number>();
  while (r.remaining > 0) {
    const start = r.position;
    // RFC 7606 4: too few bytes left for an attribute header, or a value overrunning the path
    // attributes, is treat-as-withdraw; the total attribute length still locates the NLRI.
    if (r.remaining < 3) {
      faults.push({ action: 'treat_as_withdraw', what: `${r.remaining} bytes left after the last path attribute, too few for another` });
      break;
    }
    const flags = r.u8('attribute flags');
    const type = r.u8('attribute type');
    const extended = (flags & AttrFlag.EXTENDED_LENGTH) !== 0;
    if (extended && r.remaining < 2) {
      faults.push({ action: 'treat_as_withdraw', attribute: type, what: `attribute ${attrName(type)}: extended length needs 2 bytes, ${r.remaining} left` });
      break;
    }
    const length = extended ? r.u16('attribute length') : r.u8('attribute length');
    if (length > r.remaining) {
      faults.push({ action: 'treat_as_withdraw', attribute: type, what: `attribute ${attrName(type)} of length ${length} overruns the path attributes (${r.remaining} bytes left)` });
      break;
    }
    const whole = body.subarray(start, r.position + length);
    const v = r.sub(length, 'attribute value', updateError(UpdateError.ATTRIBUTE_LENGTH_ERROR, whole));
    const name = attrName(type);
    if (seen.has(type)) {
      if (type === AttrType.MP_REACH_NLRI || type === AttrType.MP_UNREACH_NLRI) throw updateError(UpdateError.MALFORMED_ATTRIBUTE_LIST)(`attribute ${name} appears twice`);
      faults.push({ action: 'repeated_attribute', attribute: type, what: `attribute ${name} appears again: the first is kept` });
      continue;
    }
    seen.add(type);
    const expected = EXPECTED_FLAGS[type];
    if (expected === undefined) {
      if ((flags & AttrFlag.OPTIONAL) === 0) throw updateError(UpdateError.UNRECOGNIZED_WELL_KNOWN_ATTRIBUTE, whole)(`unrecognized well-known attribute type ${type}`);
      attrs.unknown.push({ flags, type, value: v.bytes_(length, 'value').slice() });
      continue;
    }
    // RFC 4271 4.3: Partial is 0 on well-known and optional non-transitive attributes.
    const partialWrong = (flags & AttrFlag.PARTIAL) !== 0 && expected !== (AttrFlag.OPTIONAL | AttrFlag.TRANSITIVE);
    if ((flags & (AttrFlag.OPTIONAL | AttrFlag.TRANSITIVE)) !== expected || partialWrong) {
      const what = `attribute ${name} has flags 0x${flags.toString(16)} (optional/transitive must be 0x${expected.toString(16)}${partialWrong ? ', partial 0' : ''})`;
      faults.push({ action: 'treat_as_withdraw', attribute: type, what });
      // The MP attributes are still read: treat-as-withdraw needs their NLRI (RFC 7606 3.j).
      if (type !== AttrType.MP_REACH_NLRI && type !== AttrType.MP_UNREACH_NLRI) continue;
    }
    if (ctx.ebgp && IBGP_ONLY.has(type)) {
      faults.push({ action: 'attribute_discard', attribute: type, what: `attribute ${name} from an external peer` });
      continue;
    }
    const action = MALFORMED_ACTION[type];
    const fixed = FIXED_LENGTH[type];
    if (action && fixed !== undefined && length !== fixed) {
      faults.push({ action, attribute: type, what: `attribute ${name} has length ${length}, expected ${fixed}` });
      continue;
    }
    const element = ELEMENT_LENGTH[type];
    if (action && element && (length % element.size !== 0 || (length === 0 && !element.emptyOk))) {
      faults.push({ action, attribute: type, what: `attribute ${name} length ${length} is not a ${element.emptyOk ? '' : 'non-zero '}multiple of ${element.size}` });
      continue;
    }
    switch (type) {
      case AttrType.ORIGIN: {
        const origin = v.u8('ORIGIN');
        if (origin > 2) faults.push({ action: 'treat_as_withdraw', attribute: type, what: `ORIGIN ${origin} is not IGP, EGP or INCOMPLETE` });
        else attrs.origin = origin;
        break;
      }
      case AttrType.AS_PATH:
        readOr(faults, type, 'treat_as_withdraw', () => {
          attrs.asPath = readAsPath(v, ctx.fourOctetAs ? 4 : 2, 'AS_PATH', ctx.ebgp === true);
        });
        break;
      case AttrType.AS4_PATH:
        readOr(faults, type, 'attribute_discard', () => {
          attrs.as4Path = readAsPath(v, 4, 'AS4_PATH', false);
        });
        break;
      case AttrType.NEXT_HOP:
        attrs.nextHop = readAddress(v.bytes_(4, 'NEXT_HOP'), 4);
        break;
      case AttrType.MULTI_EXIT_DISC:
        attrs.med = v.u32('MULTI_EXIT_DISC');
        break;
      case AttrType.LOCAL_PREF:
        attrs.localPref = v.u32('LOCAL_PREF');
        break;
      case AttrType.ATOMIC_AGGREGATE:
        attrs.atomicAggregate = true;
        break;
      case AttrType.AGGREGATOR: {
        const size = ctx.fourOctetAs ? 8 : 6;
        if (length !== size) faults.push({ action: 'attribute_discard', attribute: type, what: `AGGREGATOR has length ${length}, expected ${size}` });
        else if ((size === 8 ? v.u32('AGGREGATOR AS') : v.u16('AGGREGATOR AS')) === 0) faults.push({ action: 'attribute_discard', attribute: type, what: 'AGGREGATOR AS is 0 (RFC 7607)' });
        break;
      }
      case AttrType.AS4_AGGREGATOR:
        if (v.u32('AS4_AGGREGATOR AS') === 0) faults.push({ action: 'attribute_discard', attribute: type, what: 'AS4_AGGREGATOR AS is 0 (RFC 7607)' });
        break;
      case AttrType.COMMUNITIES: {
        const list: number[] = [];
        while (v.remaining > 0) list.push(v.u32('community'));
        attrs.communities = list;
        break;
      }
      case AttrType.MP_REACH_NLRI:
        attrs.mpReach = readMpReach(v, whole, ctx);
        break;
      case AttrType.MP_UNREACH_NLRI: {
        const err = updateError(UpdateError.OPTIONAL_ATTRIBUTE_ERROR, whole);
        const sub = new Reader(whole, err, whole.length - length);
        const afi = sub.u16('MP_UNREACH AFI');
        const safi = sub.u8('MP_UNREACH SAFI');
        const family = familyOf(afi, safi);
        attrs.mpUnreach = { afi, safi, withdrawn: family ? readNlriList(sub, family, ctx.addPath[family], (w) => err(`MP_UNREACH_NLRI: ${w}`)) : [] };
        break;
      }
      default:
        // Checked, not interpreted (route reflection, extended and large communities): kept as unknown.
        attrs.unknown.push({ flags, type, value: v.bytes_(length, 'value').slice() });
    }
  }
  return attrs;
}

function readAsPath(v: Reader, asSize: 2 | 4, name: string, ebgp: boolean): AsPathSegmentValue[] {
  const segments: AsPathSegmentValue[] = [];
  const malformed = (what: string) => new BgpError(ErrorCode.UPDATE_MESSAGE, UpdateError.MALFORMED_AS_PATH, `UPDATE: ${name}: ${what}`);
  const s = new Reader(new Uint8Array(v.bytes_(v.remaining, name)), malformed);
  while (s.remaining > 0) {
    const type = s.u8('segment type');
    if (type < AsPathSegment.AS_SET || type > AsPathSegment.AS_CONFED_SET) throw malformed(`segment type ${type} is unknown`);
    // RFC 7606 7.2: confederation segments from an external (non-confederation) peer.
    if (ebgp && type >= AsPathSegment.AS_CONFED_SEQUENCE) throw malformed(`confederation segment (type ${type}) from an external peer`);
    const count = s.u8('segment length');
    if (count === 0) throw malformed('segment of zero ASes');
    if (count * asSize > s.remaining) throw malformed(`segment of ${count} ${asSize}-octet ASes overruns the attribute (${s.remaining} bytes left)`);
    const asns: number[] = [];
    for (let i = 0; i < count; i++) {
      const asn = asSize === 4 ? s.u32('AS') : s.u16('AS');
      if (asn === 0) throw malformed('AS 0 in the path (RFC 7607)');
      asns.push(asn);
    }
    segments.push({ type, asns });
  }
  return segments;
}

/**
 * MP_REACH_NLRI (RFC 4760 3). The next hop length must be what the family uses: 4 for IPv4
 * (RFC 8950's IPv6 next hop for IPv4 NLRI is not negotiated by this speaker), 16 or 32 (a
 * global and a link-local address, RFC 2545) for IPv6; anything else is malformed (RFC 7606
 * 7.11), which resets the session (no AFI/SAFI disable here).
 */
function readMpReach(v: Reader, whole: Uint8Array, ctx: UpdateContext): MpReach {
  const err = updateError(UpdateError.OPTIONAL_ATTRIBUTE_ERROR, whole);
  const value = v.bytes_(v.remaining, 'MP_REACH_NLRI');
  const r = new Reader(value, (w) => err(`MP_REACH_NLRI: ${w}`));
  const afi = r.u16('AFI');
  const safi = r.u8('SAFI');
  const nextHopLength = r.u8('next hop length');
  const nh = r.bytes_(nextHopLength, 'next hop');
  r.u8('reserved');
  const family = familyOf(afi, safi);
  if (!family) return { afi, safi, nextHops: [], nlri: [] };
  const size = ADDRESS_BYTES[family];
  const allowed = family === 4 ? [size] : [size, 2 * size];
  if (!allowed.includes(nextHopLength)) {
    throw err(`MP_REACH_NLRI: next hop length ${nextHopLength} for IPv${family} is not ${allowed.join(' or ')}`);
  }
  const nextHops = [readAddress(nh.subarray(0, size), family)];
  if (nextHopLength === 2 * size) nextHops.push(readAddress(nh.subarray(size), family));
  return { afi, safi, nextHops, nlri: readNlriList(r, family, ctx.addPath[family], (w) => err(`MP_REACH_NLRI: ${w}`)) };
}

// ---- encoding ----

function writeAttr(w: Writer, flags: number, type: number, value: Uint8Array): void {
  const extended = value.length > 255;
  w.u8(flags | (extended ? AttrFlag.EXTENDED_LENGTH : 0)).u8(type);
  if (extended) w.u16(value.length);
  else w.u8(value.length);
  w.bytes(value);
}

function asPathValue(segments: AsPathSegmentValue[], asSize: 2 | 4): Uint8Array {
  const w = new Writer();
  for (const s of segments) {
    if (s.asns.length > 255) throw new Error(`AS_PATH segment of ${s.asns.length} ASes exceeds 255`);
    w.u8(s.type).u8(s.asns.length);
    for (const a of s.asns) {
      if (asSize === 4) w.u32(a);
      else w.u16(a > 0xffff ? AS_TRANS : a);
    }
  }
  return w.finish();
}

function nlriValue(list: Nlri[]): Uint8Array {
  const w = new Writer();
  for (const n of list) writeNlri(w, n);
  return w.finish();
}

/** The path attributes in type-code order, as RFC 4271 5 recommends. */
function encodeAttributes(a: PathAttributes, ctx: UpdateContext): Uint8Array {
  const w = new Writer();
  const T = AttrFlag.TRANSITIVE;
  const O = AttrFlag.OPTIONAL;
  if (a.origin !== undefined) writeAttr(w, T, AttrType.ORIGIN, new Uint8Array([a.origin]));
  if (a.asPath !== undefined) writeAttr(w, T, AttrType.AS_PATH, asPathValue(a.asPath, ctx.fourOctetAs ? 4 : 2));
  if (a.nextHop !== undefined) {
    const v = new Writer();
    writeAddress(v, a.nextHop);
    writeAttr(w, T, AttrType.NEXT_HOP, v.finish());
  }
  if (a.med !== undefined) writeAttr(w, O, AttrType.MULTI_EXIT_DISC, new Writer().u32(a.med).finish());
  if (a.localPref !== undefined) writeAttr(w, T, AttrType.LOCAL_PREF, new Writer().u32(a.localPref).finish());
  if (a.atomicAggregate) writeAttr(w, T, AttrType.ATOMIC_AGGREGATE, new Uint8Array(0));
  if (a.communities !== undefined && a.communities.length > 0) {
    const v = new Writer();
    for (const c of a.communities) v.u32(c);
    writeAttr(w, O | T, AttrType.COMMUNITIES, v.finish());
  }
  if (a.mpReach) {
    const m = a.mpReach;
    const v = new Writer().u16(m.afi).u8(m.safi);
    const nh = new Writer();
    for (const h of m.nextHops) writeAddress(nh, h);
    const nhBytes = nh.finish();
    v.u8(nhBytes.length).bytes(nhBytes).u8(0).bytes(nlriValue(m.nlri));
    writeAttr(w, O, AttrType.MP_REACH_NLRI, v.finish());
  }
  if (a.mpUnreach) {
    const m = a.mpUnreach;
    writeAttr(w, O, AttrType.MP_UNREACH_NLRI, new Writer().u16(m.afi).u8(m.safi).bytes(nlriValue(m.withdrawn)).finish());
  }
  // RFC 6793 4.2.2: to a 2-octet-only peer, ASes beyond 65535 go in AS4_PATH, AS_TRANS in AS_PATH.
  const as4Path = a.as4Path ?? (!ctx.fourOctetAs && a.asPath?.some((s) => s.asns.some((n) => n > 0xffff)) ? a.asPath : undefined);
  if (as4Path && !ctx.fourOctetAs) writeAttr(w, O | T, AttrType.AS4_PATH, asPathValue(as4Path, 4));
  for (const u of a.unknown) writeAttr(w, u.flags & ~AttrFlag.EXTENDED_LENGTH, u.type, u.value);
  return w.finish();
}

export function encodeUpdateBody(u: Omit<UpdateMessage, 'type'>, ctx: UpdateContext): Uint8Array {
  const w = new Writer();
  const withdrawn = nlriValue(u.withdrawn);
  w.u16(withdrawn.length).bytes(withdrawn);
  const attrs = encodeAttributes(u.attributes, ctx);
  w.u16(attrs.length).bytes(attrs);
  w.bytes(nlriValue(u.nlri));
  const body = w.finish();
  if (body.length > MAX_BODY) throw new Error(`UPDATE of ${body.length + HEADER_LENGTH} bytes exceeds ${MAX_MESSAGE_LENGTH}`);
  return body;
}

/** Splits `list` into runs whose encoded NLRI fit `budget` bytes each. */
function chunks(list: Nlri[], budget: number): Nlri[][] {
  const out: Nlri[][] = [];
  let current: Nlri[] = [];
  let used = 0;
  for (const n of list) {
    const size = nlriLength(n);
    if (used + size > budget && current.length > 0) {
      out.push(current);
      current = [];
      used = 0;
    }
    current.push(n);
    used += size;
  }
  if (current.length > 0) out.push(current);
  return out;
}

/**
 * UPDATE bodies announcing `nlri` (all of `family`) with the same attributes, as many prefixes
 * per message as fit in 4096 bytes: IPv4 in the classic NLRI field with NEXT_HOP, IPv6 in
 * MP_REACH_NLRI with `nextHop` as its next hop (RFC 4760).
 */
export function packAnnouncements(family: IPFamily, attrs: Omit<PathAttributes, 'nextHop' | 'mpReach' | 'mpUnreach'>, nextHop: IP, nlri: Nlri[], ctx: UpdateContext): Uint8Array[] {
  if (nlri.length === 0) return [];
  if (family === 4) {
    const base = { ...attrs, nextHop };
    const fixed = 4 + encodeAttributes(base, ctx).length;
    return chunks(nlri, MAX_BODY - fixed).map((part) => encodeUpdateBody({ withdrawn: [], attributes: base, nlri: part }, ctx));
  }
  const empty = { ...attrs, mpReach: { afi: Afi.IPV6, safi: Safi.UNICAST, nextHops: [nextHop], nlri: [] } };
  // The MP_REACH attribute always uses the 2-byte (extended) length once NLRI push it past 255.
  const fixed = 4 + encodeAttributes(empty, ctx).length + 1;
  return chunks(nlri, MAX_BODY - fixed).map((part) =>
    encodeUpdateBody({ withdrawn: [], attributes: { ...attrs, mpReach: { ...empty.mpReach, nlri: part } }, nlri: [] }, ctx),
  );
}

/** UPDATE bodies withdrawing `nlri` (all of `family`), packed as densely as announcements. */
export function packWithdrawals(family: IPFamily, nlri: Nlri[], ctx: UpdateContext): Uint8Array[] {
  if (nlri.length === 0) return [];
  if (family === 4) return chunks(nlri, MAX_BODY - 4).map((part) => encodeUpdateBody({ withdrawn: part, attributes: { unknown: [] }, nlri: [] }, ctx));
  const fixed = 4 + 4 + 3; // lengths, attribute header with 2-byte length, AFI/SAFI
  return chunks(nlri, MAX_BODY - fixed).map((part) =>
    encodeUpdateBody({ withdrawn: [], attributes: { unknown: [], mpUnreach: { afi: Afi.IPV6, safi: Safi.UNICAST, withdrawn: part } }, nlri: [] }, ctx),
  );
}

export function endOfRib(family: IPFamily, ctx: UpdateContext): Uint8Array {
  if (family === 4) return encodeUpdateBody({ withdrawn: [], attributes: { unknown: [] }, nlri: [] }, ctx);
  return encodeUpdateBody({ withdrawn: [], attributes: { unknown: [], mpUnreach: { afi: afiOf(family), safi: Safi.UNICAST, withdrawn: [] } }, nlri: [] }, ctx);
}
