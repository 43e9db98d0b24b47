import { expect, test } from 'bun:test';
import { formatIP, formatPrefix, parseIP, parsePrefix } from '../ip.ts';
import { AdjRibOut, type PeerView } from './adj-rib-out.ts';
import { Afi, AS_TRANS, MessageType, Safi } from './constants.ts';
import { BgpError } from './errors.ts';
import { decodeMessage, encodeNotification, encodeRouteRefresh, Framer, frame, type Message } from './message.ts';
import { type Capabilities, decodeOpen, emptyCapabilities, encodeOpenBody } from './open.ts';
import { parseAnnouncements, pickNextHop } from './routes.ts';
import { decodeUpdate, encodeUpdateBody, endOfRib, endOfRibFamily, packAnnouncements, packWithdrawals, type UpdateContext, type UpdateMessage } from './update.ts';
import { ACCEPTED, MALFORMED, RFC7606 } from '../../../test/fakes/bgp-malformed-corpus.ts';

const CTX4: UpdateContext = { fourOctetAs: true, addPath: { 4: false, 6: false } };

function decodeAll(bytes: Uint8Array, ctx = CTX4): Message[] {
  return new Framer().push(bytes).map((raw) => decodeMessage(raw, ctx));
}

function ip(text: string) {
  const v = parseIP(text);
  if (!v) throw new Error(text);
  return v;
}

function prefix(text: string) {
  const p = parsePrefix(text);
  if (!p) throw new Error(text);
  return p;
}

test('OPEN: every capability survives a round trip', () => {
  const capabilities: Capabilities = {
    multiprotocol: [
      { afi: Afi.IPV4, safi: Safi.UNICAST },
      { afi: Afi.IPV6, safi: Safi.UNICAST },
    ],
    routeRefresh: true,
    enhancedRouteRefresh: true,
    fourOctetAs: 4200000001,
    addPath: [
      { afi: Afi.IPV4, safi: Safi.UNICAST, send: true, receive: false },
      { afi: Afi.IPV6, safi: Safi.UNICAST, send: true, receive: true },
    ],
    gracefulRestart: { restartState: true, notification: false, restartTimeSeconds: 300, families: [{ afi: Afi.IPV4, safi: Safi.UNICAST, forwardingPreserved: true }] },
    unknown: [{ code: 73, value: new Uint8Array([5, 104, 111, 115, 116, 0]) }],
  };
  const bytes = frame(MessageType.OPEN, encodeOpenBody({ myAs: AS_TRANS, holdTime: 90, bgpId: 0xc6336401, capabilities }));
  const [open] = decodeAll(bytes);
  expect(open).toEqual({ type: 'open', version: 4, myAs: AS_TRANS, holdTime: 90, bgpId: 0xc6336401, capabilities });
});

test('UPDATE: IPv4 with 4-octet AS_PATH, LOCAL_PREF, communities; IPv6 in MP_REACH with path identifiers', () => {
  const v4: Omit<UpdateMessage, 'type'> = {
    withdrawn: [{ prefix: prefix('203.0.113.0/24') }],
    attributes: { origin: 0, asPath: [{ type: 2, asns: [4200000001, 65010] }], nextHop: ip('198.51.100.11'), localPref: 200, communities: [0xfdf20007], unknown: [] },
    nlri: [{ prefix: prefix('198.51.100.128/25') }, { prefix: prefix('0.0.0.0/0') }],
  };
  expect(decodeUpdate(encodeUpdateBody(v4, CTX4), CTX4)).toEqual({ type: 'update', ...v4 });
  const ctx6: UpdateContext = { fourOctetAs: true, addPath: { 4: false, 6: true } };
  const v6: Omit<UpdateMessage, 'type'> = {
    withdrawn: [],
    attributes: {
      origin: 0,
      asPath: [],
      mpReach: { afi: Afi.IPV6, safi: Safi.UNICAST, nextHops: [ip('2001:db8::11')], nlri: [{ prefix: prefix('2001:db8:1::/64'), pathId: 7 }, { prefix: prefix('2001:db8:2::1/128'), pathId: 8 }] },
      mpUnreach: { afi: Afi.IPV6, safi: Safi.UNICAST, withdrawn: [{ prefix: prefix('2001:db8:3::/48'), pathId: 9 }] },
      unknown: [],
    },
    nlri: [],
  };
  expect(decodeUpdate(encodeUpdateBody(v6, ctx6), ctx6)).toEqual({ type: 'update', ...v6 });
});

test('UPDATE to a 2-octet-only peer: AS_TRANS in AS_PATH, the real AS in AS4_PATH (RFC 6793)', () => {
  const ctx: UpdateContext = { fourOctetAs: false, addPath: { 4: false, 6: false } };
  const body = encodeUpdateBody({ withdrawn: [], attributes: { origin: 0, asPath: [{ type: 2, asns: [4200000001] }], nextHop: ip('198.51.100.11'), unknown: [] }, nlri: [{ prefix: prefix('203.0.113.0/24') }] }, ctx);
  const u = decodeUpdate(body, ctx);
  expect(u.attributes.asPath).toEqual([{ type: 2, asns: [AS_TRANS] }]);
  expect(u.attributes.as4Path).toEqual([{ type: 2, asns: [4200000001] }]);
});

test('End-of-RIB: an empty UPDATE for IPv4, an empty MP_UNREACH for IPv6', () => {
  expect(endOfRibFamily(decodeUpdate(endOfRib(4, CTX4), CTX4))).toBe(4);
  expect(endOfRibFamily(decodeUpdate(endOfRib(6, CTX4), CTX4))).toBe(6);
  expect(endOfRib(4, CTX4).length).toBe(4);
});

test('packing: 10,000 /32s and 5,000 IPv6 /64s fill UPDATEs up to 4096 bytes and decode back to every prefix', () => {
  const v4 = Array.from({ length: 10_000 }, (_, i) => ({ prefix: { family: 4 as const, first: 0xc6336400n + BigInt(i) * 1n, last: 0xc6336400n + BigInt(i), bits: 32 } }));
  const bodies = packAnnouncements(4, { origin: 0, asPath: [], unknown: [] }, ip('198.51.100.11'), v4, CTX4);
  expect(bodies.length).toBeLessThanOrEqual(Math.ceil((10_000 * 5) / 4000));
  const decoded = bodies.flatMap((b) => {
    expect(b.length + 19).toBeLessThanOrEqual(4096);
    return decodeUpdate(b, CTX4).nlri;
  });
  expect(decoded.map((n) => n.prefix.first)).toEqual(v4.map((n) => n.prefix.first));
  const v6 = Array.from({ length: 5_000 }, (_, i) => ({ prefix: prefix(`2001:db8:${i.toString(16)}::/64`), pathId: i }));
  const ctx6: UpdateContext = { fourOctetAs: true, addPath: { 4: false, 6: true } };
  const six = packAnnouncements(6, { origin: 0, asPath: [], unknown: [] }, ip('2001:db8::11'), v6, ctx6);
  expect(six.every((b) => b.length + 19 <= 4096)).toBe(true);
  expect(six.flatMap((b) => decodeUpdate(b, ctx6).attributes.mpReach!.nlri)).toEqual(v6);
  const withdrawals = packWithdrawals(6, v6, ctx6);
  expect(withdrawals.every((b) => b.length + 19 <= 4096)).toBe(true);
  expect(withdrawals.flatMap((b) => decodeUpdate(b, ctx6).attributes.mpUnreach!.withdrawn)).toEqual(v6);
});

test('NOTIFICATION and ROUTE-REFRESH round trip', () => {
  expect(decodeAll(encodeNotification(3, 1, new Uint8Array([1, 2])))).toEqual([{ type: 'notification', code: 3, subcode: 1, data: new Uint8Array([1, 2]) }]);
  expect(decodeAll(encodeRouteRefresh(Afi.IPV6, Safi.UNICAST))).toEqual([{ type: 'route-refresh', afi: 2, subtype: 0, safi: 1 }]);
});

test('the framer cuts a stream fed byte by byte into the same messages', () => {
  const stream = new Uint8Array([...encodeRouteRefresh(1, 1), ...encodeNotification(6, 2)]);
  const f = new Framer();
  const raws = [...stream].flatMap((b) => f.push(new Uint8Array([b])));
  expect(raws.map((r) => r.type)).toEqual([MessageType.ROUTE_REFRESH, MessageType.NOTIFICATION]);
});

for (const c of MALFORMED.filter((m) => !m.session)) {
  test(`malformed: ${c.name} -> NOTIFICATION ${c.code}/${c.subcode}`, () => {
    let error: unknown;
    try {
      decodeAll(c.bytes);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(BgpError);
    const e = error as BgpError;
    expect([e.code, e.subcode]).toEqual([c.code, c.subcode]);
    if (c.data) expect([...e.data]).toEqual(c.data);
    expect(e.message.length).toBeGreaterThan(10);
  });
}

for (const c of RFC7606) {
  test(`RFC 7606: ${c.name} -> ${c.treatAsWithdraw ? 'treat-as-withdraw' : Object.keys(c.counts).join(', ')}, no reset`, () => {
    const ctx: UpdateContext = { ...CTX4, ebgp: !c.ibgp };
    const [m] = decodeAll(c.bytes, ctx);
    const u = m as UpdateMessage;
    expect(u.type).toBe('update');
    expect(u.treatAsWithdraw === true).toBe(c.treatAsWithdraw);
    const counts: Record<string, number> = {};
    for (const f of u.faults ?? []) if (f.action !== 'treat_as_withdraw') counts[f.action] = (counts[f.action] ?? 0) + 1;
    if (u.treatAsWithdraw) counts.treat_as_withdraw = 1;
    expect(counts).toEqual(c.counts);
    for (const f of u.faults ?? []) expect(f.what.length).toBeGreaterThan(10);
  });
}

test('RFC 7606: the routes of a treat-as-withdraw UPDATE are still read (to be withdrawn), a discarded attribute is gone, a repeat leaves the first', () => {
  const ctx: UpdateContext = { ...CTX4, ebgp: true };
  const taw = decodeAll(RFC7606.find((c) => c.name.startsWith('ORIGIN value 3'))!.bytes, ctx)[0] as UpdateMessage;
  expect(taw.nlri.map((n) => formatPrefix(n.prefix))).toEqual(['203.0.113.0/24']);
  const mp = decodeAll(RFC7606.find((c) => c.name.startsWith('MP_REACH_NLRI flagged'))!.bytes, ctx)[0] as UpdateMessage;
  expect(mp.treatAsWithdraw).toBe(true);
  expect(mp.attributes.mpReach!.nlri.map((n) => formatPrefix(n.prefix))).toEqual(['2001:db8:1::/48']);
  const discarded = decodeAll(RFC7606.find((c) => c.name.startsWith('AS4_PATH'))!.bytes, ctx)[0] as UpdateMessage;
  expect(discarded.attributes.as4Path).toBeUndefined();
  expect(discarded.attributes.origin).toBe(0);
  const repeated = decodeAll(RFC7606.find((c) => c.name.startsWith('MULTI_EXIT_DISC twice'))!.bytes, ctx)[0] as UpdateMessage;
  expect(repeated.attributes.med).toBe(5);
  const origins = decodeAll(RFC7606.find((c) => c.name.startsWith('ORIGIN three times'))!.bytes, ctx)[0] as UpdateMessage;
  expect(origins.attributes.origin).toBe(0);
});

test('MP_REACH_NLRI next hop lengths: IPv4 only 4, IPv6 16 or 32 (RFC 4760, RFC 2545, RFC 7606 7.11)', () => {
  const reach = (afi: number, nh: number[]) => {
    const value = [0, afi, 1, nh.length, ...nh, 0];
    return frame(MessageType.UPDATE, new Uint8Array([0, 0, 0, value.length + 3 + 4 + 9, 0x80, 14, value.length, ...value, 0x40, 1, 1, 0, 0x40, 2, 6, 2, 1, 0, 0, 0xfd, 0xf2]));
  };
  const ok = (afi: number, n: number) => (decodeAll(reach(afi, Array.from({ length: n }, () => 1)))[0] as UpdateMessage).attributes.mpReach!.nextHops.length;
  expect(ok(1, 4)).toBe(1);
  expect(ok(2, 16)).toBe(1);
  expect(ok(2, 32)).toBe(2);
  for (const [afi, n] of [[1, 8], [1, 16], [1, 0], [2, 4], [2, 8], [2, 24]] as const) {
    expect(() => decodeAll(reach(afi, Array.from({ length: n }, () => 1)))).toThrow(/next hop length/);
  }
});

for (const c of ACCEPTED) {
  test(`accepted: ${c.name}`, () => {
    const [m] = decodeAll(c.bytes);
    expect(m?.type).toBe('update');
  });
}

test('an unknown optional transitive attribute is kept with its flags and value', () => {
  const [m] = decodeAll(ACCEPTED[0]!.bytes);
  expect((m as UpdateMessage).attributes.unknown).toEqual([{ flags: 0xc0, type: 200, value: new Uint8Array([1, 2, 3]) }]);
});

test('OPEN decoding reads AS_TRANS plus the 4-octet capability', () => {
  const open = decodeOpen(encodeOpenBody({ myAs: AS_TRANS, holdTime: 0, bgpId: 1, capabilities: { ...emptyCapabilities(), fourOctetAs: 4200000001 } }));
  expect(open.capabilities.fourOctetAs).toBe(4200000001);
  expect(open.holdTime).toBe(0);
});

// ---- the table and Adj-RIB-Out ----

function view(addPath: boolean, ibgp = false): PeerView {
  const a = { 4: addPath, 6: addPath };
  return { localAsn: 64512, ibgp, families: new Set([4, 6] as const), addPathSend: a, ctx: { fourOctetAs: true, addPath: a } };
}

function paths(bodies: Uint8Array[], ctx: UpdateContext): { announced: string[]; withdrawn: string[] } {
  const announced: string[] = [];
  const withdrawn: string[] = [];
  const name = (n: { prefix: Parameters<typeof formatPrefix>[0]; pathId?: number }) => `${formatPrefix(n.prefix)}${n.pathId === undefined ? '' : `#${n.pathId}`}`;
  for (const b of bodies) {
    const u = decodeUpdate(b, ctx);
    for (const n of u.nlri) announced.push(`${name(n)} via ${formatIP(u.attributes.nextHop!)}`);
    for (const n of u.attributes.mpReach?.nlri ?? []) announced.push(`${name(n)} via ${formatIP(u.attributes.mpReach!.nextHops[0]!)}`);
    for (const n of [...u.withdrawn, ...(u.attributes.mpUnreach?.withdrawn ?? [])]) withdrawn.push(name(n));
  }
  return { announced: announced.sort(), withdrawn: withdrawn.sort() };
}

test('Adj-RIB-Out with ADD-PATH: one path per next hop, and a change sends only what changed', () => {
  const v = view(true);
  const rib = new AdjRibOut(v);
  const table = (hops: string[]) => parseAnnouncements([{ prefix: '203.0.113.10/32', nextHops: hops }, { prefix: '203.0.113.11/32', nextHops: ['198.51.100.11'] }]);
  const first = paths(rib.sync(table(['198.51.100.11', '198.51.100.12'])), v.ctx);
  expect(first.announced).toEqual([
    `203.0.113.10/32#${0xc633640b} via 198.51.100.11`,
    `203.0.113.10/32#${0xc633640c} via 198.51.100.12`,
    `203.0.113.11/32#${0xc633640b} via 198.51.100.11`,
  ]);
  expect(rib.prefixes).toBe(2);
  expect(rib.sync(table(['198.51.100.11', '198.51.100.12']))).toEqual([]);
  expect(paths(rib.sync(table(['198.51.100.11'])), v.ctx)).toEqual({ announced: [], withdrawn: [`203.0.113.10/32#${0xc633640c}`] });
  expect(paths(rib.sync([]), v.ctx).withdrawn).toHaveLength(2);
  expect(rib.prefixes).toBe(0);
});

test('Adj-RIB-Out without ADD-PATH: one stable next hop; removing another next hop sends nothing', () => {
  const v = view(false, true);
  const rib = new AdjRibOut(v);
  const hops = ['198.51.100.11', '198.51.100.12', '198.51.100.13'];
  const [route] = parseAnnouncements([{ prefix: '203.0.113.10/32', nextHops: hops }]);
  const chosen = formatIP(pickNextHop(route!));
  const first = rib.sync([route!]);
  expect(paths(first, v.ctx).announced).toEqual([`203.0.113.10/32 via ${chosen}`]);
  expect(decodeUpdate(first[0]!, v.ctx).attributes.localPref).toBe(100); // iBGP default
  const others = hops.filter((h) => h !== chosen);
  expect(rib.sync(parseAnnouncements([{ prefix: '203.0.113.10/32', nextHops: [chosen, others[0]!] }]))).toEqual([]);
  // The chosen one leaves: the prefix moves (an implicit replacement, no withdrawal).
  const moved = paths(rib.sync(parseAnnouncements([{ prefix: '203.0.113.10/32', nextHops: others }])), v.ctx);
  expect(moved.withdrawn).toEqual([]);
  expect(moved.announced).toHaveLength(1);
});

test('the table refuses bad entries, naming each', () => {
  expect(() =>
    parseAnnouncements([
      { prefix: '203.0.113.1/24', nextHops: ['198.51.100.11'] },
      { prefix: '2001:db8::/64', nextHops: ['198.51.100.11'] },
      { prefix: '203.0.113.0/24', nextHops: [] },
      { prefix: '203.0.113.0/24', nextHops: ['x'], communities: ['65536:1'], localPref: -1 },
    ]),
  ).toThrow(
    /announcements\[0\]\.prefix.*\n.*announcements\[1\]\.nextHops\[0\]: 198\.51\.100\.11 is IPv4.*\n.*announcements\[2\]\.nextHops: at least one.*\n.*announcements\[3\]\.prefix: 203\.0\.113\.0\/24 is already announced by announcements\[2\]/,
  );
});
