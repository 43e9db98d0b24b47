import { afterEach, expect, test } from 'bun:test';
import { formatIP, formatPrefix } from '../ip.ts';
import { Afi, CeaseSubcode, ErrorCode, Safi } from './constants.ts';
import type { NotificationMessage } from './message.ts';
import { BgpSpeaker, type SpeakerConfig, type StateChange } from './speaker.ts';
import type { UpdateMessage } from './update.ts';
import { eventually } from '../../../test/harness/eventually.ts';
import { type ScriptedConnection, ScriptedPeer } from '../../../test/fakes/bgp-scripted-peer.ts';
import { ACCEPTED, MALFORMED, PEER_ASN, RFC7606 } from '../../../test/fakes/bgp-malformed-corpus.ts';

const speakers: BgpSpeaker[] = [];
const peers: ScriptedPeer[] = [];
afterEach(async () => {
  for (const s of speakers.splice(0)) await s.stop();
  for (const p of peers.splice(0)) p.stop();
});

const LOCAL_ASN = 4200000001;

function peer(): ScriptedPeer {
  const p = ScriptedPeer.listen();
  peers.push(p);
  return p;
}

async function speaker(config: Partial<SpeakerConfig> & Pick<SpeakerConfig, 'peers'>, changes?: StateChange[]): Promise<BgpSpeaker> {
  const s = await BgpSpeaker.start(
    { localAsn: LOCAL_ASN, routerId: '198.51.100.1', listen: false, gracefulRestart: { restartTimeSeconds: 120 }, ...config },
    { onStateChange: (c) => changes?.push(c) },
  );
  speakers.push(s);
  return s;
}

function peerConfig(p: ScriptedPeer, asn = 65010, extra: object = {}) {
  return { address: '127.0.0.1', asn, port: p.port, connectRetry: { minSeconds: 0.05, maxSeconds: 0.2 }, ...extra };
}

/** Every (prefix, next hop, path id) the speaker announced minus what it withdrew, in order. */
function announced(conn: ScriptedConnection): Map<string, string> {
  const table = new Map<string, string>();
  for (const u of conn.of('update')) apply(table, u);
  return table;
}

function apply(table: Map<string, string>, u: UpdateMessage): void {
  const key = (n: { prefix: Parameters<typeof formatPrefix>[0]; pathId?: number }) => `${formatPrefix(n.prefix)}${n.pathId === undefined ? '' : `#${n.pathId}`}`;
  for (const n of u.withdrawn) table.delete(key(n));
  for (const n of u.attributes.mpUnreach?.withdrawn ?? []) table.delete(key(n));
  for (const n of u.nlri) table.set(key(n), formatIP(u.attributes.nextHop!));
  for (const n of u.attributes.mpReach?.nlri ?? []) table.set(key(n), formatIP(u.attributes.mpReach!.nextHops[0]!));
}

function endOfRibs(conn: ScriptedConnection): number {
  return conn.of('update').filter((u) => u.withdrawn.length === 0 && u.nlri.length === 0 && (Object.keys(u.attributes).length === 1 || (u.attributes.mpUnreach && u.attributes.mpUnreach.withdrawn.length === 0))).length;
}

test('session: OPEN with every capability, the table and End-of-RIB per family once established', async () => {
  const p = peer();
  const changes: StateChange[] = [];
  const s = await speaker({ peers: [peerConfig(p)] }, changes);
  s.setAnnouncements([
    { prefix: '198.51.100.128/25', nextHops: ['198.51.100.11'] },
    { prefix: '2001:db8:1::/64', nextHops: ['2001:db8::11'], communities: ['65010:7'] },
  ]);
  const conn = await p.connection(0);
  const open = await conn.waitFor('OPEN', (m) => m.type === 'open');
  if (open.type !== 'open') throw new Error('not an OPEN');
  expect(open.myAs).toBe(23456); // AS_TRANS: the local AS needs 4 octets
  expect(open.capabilities.fourOctetAs).toBe(LOCAL_ASN);
  expect(open.capabilities.multiprotocol).toEqual([
    { afi: Afi.IPV4, safi: Safi.UNICAST },
    { afi: Afi.IPV6, safi: Safi.UNICAST },
  ]);
  expect(open.capabilities.routeRefresh).toBe(true);
  expect(open.capabilities.addPath).toEqual([
    { afi: Afi.IPV4, safi: Safi.UNICAST, send: true, receive: false },
    { afi: Afi.IPV6, safi: Safi.UNICAST, send: true, receive: false },
  ]);
  expect(open.capabilities.gracefulRestart).toMatchObject({ restartState: true, restartTimeSeconds: 120 });
  expect(open.capabilities.gracefulRestart?.families.every((f) => f.forwardingPreserved)).toBe(true);
  conn.sendOpen({ asn: 65010 });
  conn.sendKeepalive();
  await eventually('two End-of-RIB markers', () => endOfRibs(conn) === 2);
  expect(Object.fromEntries(announced(conn))).toEqual({ '198.51.100.128/25': '198.51.100.11', '2001:db8:1::/64': '2001:db8::11' });
  const v6 = conn.of('update').find((u) => u.attributes.mpReach?.nlri.length)!;
  expect(v6.attributes.communities).toEqual([((65010 << 16) | 7) >>> 0]);
  expect(v6.attributes.asPath).toEqual([{ type: 2, asns: [LOCAL_ASN] }]);
  expect(v6.attributes.localPref).toBeUndefined(); // eBGP
  const stats = s.stats().peers[0]!;
  expect(stats).toMatchObject({ state: 'established', prefixesAnnounced: 2, flaps: 0, notificationsSent: 0 });
  expect(stats.negotiated).toMatchObject({ families: [4, 6], addPath: [], fourOctetAs: true, gracefulRestart: false, holdTimeSeconds: 90 });
  expect(changes.map((c) => c.to)).toContain('established');
});

async function established(s: BgpSpeaker, address: string): Promise<void> {
  await eventually(`session with ${address} established`, () => s.stats().peers.find((p) => p.address === address)?.state === 'established');
}

test('malformed corpus: each gets its NOTIFICATION and a reset of that session only; the speaker reconnects; the other peer never notices', async () => {
  const victim = peer();
  const bystander = ScriptedPeer.listen('127.0.0.2');
  peers.push(bystander);
  const s = await speaker({ peers: [peerConfig(victim), { ...peerConfig(bystander), address: '127.0.0.2' }] });
  s.setAnnouncements([{ prefix: '203.0.113.0/24', nextHops: ['198.51.100.11'] }]);
  const other = await bystander.connection(0);
  await other.establish({ asn: 65010 });
  let n = 0;
  for (const c of MALFORMED) {
    const conn = await victim.connection(n++);
    await conn.waitFor('the speaker OPEN', (m) => m.type === 'open');
    if (c.when !== 'open') conn.sendOpen({ asn: PEER_ASN });
    if (c.when === 'established') {
      conn.sendKeepalive();
      await established(s, '127.0.0.1');
    } else if (c.when === 'openconfirm') await conn.waitFor('the speaker KEEPALIVE', (m) => m.type === 'keepalive');
    conn.send(c.bytes);
    const reply = (await conn.waitFor(`NOTIFICATION for "${c.name}"`, (m) => m.type === 'notification')) as NotificationMessage;
    expect({ case: c.name, code: reply.code, subcode: reply.subcode }).toEqual({ case: c.name, code: c.code, subcode: c.subcode });
    if (c.data) expect([...reply.data]).toEqual(c.data);
    await conn.waitClosed();
  }
  // After the last reset the speaker comes back and the session works again.
  const again = await victim.connection(n);
  await again.establish({ asn: PEER_ASN });
  for (const a of ACCEPTED) again.send(a.bytes);
  await eventually('the accepted UPDATEs counted', () => s.stats().peers[0]!.updatesReceived === ACCEPTED.length);
  const stats = s.stats().peers;
  expect(stats[0]).toMatchObject({ state: 'established', notificationsSent: MALFORMED.length });
  // The UPDATE errors that still reset (RFC 7606 leaves them a reset), counted by kind.
  const updateResets = MALFORMED.filter((c) => c.when === 'established' && c.code === ErrorCode.UPDATE_MESSAGE).length;
  expect(stats[0]!.updateErrors.session_reset).toBe(updateResets);
  expect(again.of('notification')).toEqual([]);
  expect(stats[1]).toMatchObject({ state: 'established', flaps: 0, notificationsSent: 0, notificationsReceived: 0 });
  expect(other.closed).toBe(false);
  expect(other.of('notification')).toEqual([]);
  // ... and still gets table changes.
  s.setAnnouncements([{ prefix: '203.0.113.0/24', nextHops: ['198.51.100.12'] }]);
  await eventually('the change at the bystander', () => announced(other).get('203.0.113.0/24') === '198.51.100.12');
}, 120_000);

test('RFC 7606 over TCP: every malformed UPDATE that RFC 7606 does not reset for leaves the session Established, our routes announced, and is counted by kind', async () => {
  const p = peer();
  const s = await speaker({ peers: [peerConfig(p, PEER_ASN)] });
  s.setAnnouncements([
    { prefix: '203.0.113.0/24', nextHops: ['198.51.100.11'] },
    { prefix: '2001:db8:1::/64', nextHops: ['2001:db8::11'] },
  ]);
  const conn = await p.connection(0);
  await conn.establish({ asn: PEER_ASN });
  await eventually('two End-of-RIB markers', () => endOfRibs(conn) === 2);
  const before = conn.of('update').length;
  const cases = RFC7606.filter((c) => !c.ibgp); // this peer is external
  for (const c of cases) conn.send(c.bytes);
  const expected = { treat_as_withdraw: 0, attribute_discard: 0, repeated_attribute: 0, session_reset: 0 };
  for (const c of cases) for (const [k, n] of Object.entries(c.counts)) expected[k as keyof typeof expected] += n;
  await eventually('every UPDATE counted', () => s.stats().peers[0]!.updatesReceived === cases.length);
  const stats = s.stats().peers[0]!;
  expect(stats.updateErrors).toEqual(expected);
  expect(stats).toMatchObject({ state: 'established', flaps: 0, notificationsSent: 0 });
  expect(conn.of('notification')).toEqual([]);
  expect(conn.closed).toBe(false);
  // Nothing withdrawn or re-sent: the peer still has our routes as announced.
  expect(conn.of('update').length).toBe(before);
  expect(Object.fromEntries(announced(conn))).toEqual({ '203.0.113.0/24': '198.51.100.11', '2001:db8:1::/64': '2001:db8::11' });
  // ... and the session still carries changes.
  s.setAnnouncements([{ prefix: '203.0.113.0/24', nextHops: ['198.51.100.12'] }]);
  await eventually('the change', () => announced(conn).get('203.0.113.0/24') === '198.51.100.12' && !announced(conn).has('2001:db8:1::/64'));
}, 60_000);

test('hold timer: a peer silent for the negotiated hold time gets NOTIFICATION 4/0', async () => {
  const p = peer();
  const s = await speaker({ peers: [peerConfig(p)] });
  const conn = await p.connection(0);
  await conn.establish({ asn: 65010, holdTime: 3 });
  expect(s.stats().peers[0]!.negotiated?.holdTimeSeconds).toBe(3);
  // Keepalives from the speaker every hold/3 while we stay silent.
  await eventually('two keepalives after the handshake', () => conn.of('keepalive').length >= 3, 15_000);
  const n = (await conn.waitFor('hold timer NOTIFICATION', (m) => m.type === 'notification')) as NotificationMessage;
  expect([n.code, n.subcode]).toEqual([ErrorCode.HOLD_TIMER_EXPIRED, 0]);
  expect(s.stats().peers[0]!.flaps).toBe(1);
});

test('a peer without the 4-octet capability gets AS_TRANS in OPEN and AS_PATH, the real AS in AS4_PATH', async () => {
  const p = peer();
  const s = await speaker({ peers: [peerConfig(p)] });
  s.setAnnouncements([{ prefix: '203.0.113.0/24', nextHops: ['198.51.100.11'] }]);
  const conn = await p.connection(0);
  await conn.waitFor('OPEN', (m) => m.type === 'open');
  const caps = { ...(await import('./open.ts')).emptyCapabilities(), multiprotocol: [{ afi: Afi.IPV4, safi: Safi.UNICAST }], fourOctetAs: undefined };
  conn.sendOpen({ asn: 65010, caps });
  conn.sendKeepalive();
  const u = await conn.waitFor('the announcement', (m) => m.type === 'update' && m.nlri.length > 0);
  if (u.type !== 'update') throw new Error('not an UPDATE');
  expect(u.attributes.asPath).toEqual([{ type: 2, asns: [23456] }]);
  expect(u.attributes.as4Path).toEqual([{ type: 2, asns: [LOCAL_ASN] }]);
  expect(s.stats().peers[0]!.negotiated).toMatchObject({ fourOctetAs: false, families: [4] });
});

test('ADD-PATH: a peer that can receive gets one path per next hop; route refresh re-sends them', async () => {
  const p = peer();
  const s = await speaker({ peers: [peerConfig(p)] });
  s.setAnnouncements([{ prefix: '203.0.113.10/32', nextHops: ['198.51.100.11', '198.51.100.12', '198.51.100.13'] }]);
  const conn = await p.connection(0);
  await conn.waitFor('OPEN', (m) => m.type === 'open');
  conn.sendOpen({ asn: 65010, caps: { addPath: [{ afi: Afi.IPV4, safi: Safi.UNICAST, send: false, receive: true }] } });
  conn.sendKeepalive();
  await eventually('three paths', () => announced(conn).size === 3);
  expect([...announced(conn).values()].sort()).toEqual(['198.51.100.11', '198.51.100.12', '198.51.100.13']);
  expect(s.stats().peers[0]!.negotiated?.addPath).toEqual([4]);
  s.setAnnouncements([{ prefix: '203.0.113.10/32', nextHops: ['198.51.100.11', '198.51.100.13'] }]);
  await eventually('the leaving next hop withdrawn', () => announced(conn).size === 2);
  expect([...announced(conn).values()].sort()).toEqual(['198.51.100.11', '198.51.100.13']);
  const before = conn.of('update').length;
  conn.send((await import('./message.ts')).encodeRouteRefresh(Afi.IPV4, Safi.UNICAST));
  await eventually('the refresh', () => conn.of('update').length > before);
  const refreshed = conn.of('update').slice(before).flatMap((u) => u.nlri);
  expect(refreshed).toHaveLength(2);
});

test('collision: with connections both ways, the one opened by the higher BGP identifier survives (RFC 4271 6.8)', async () => {
  for (const [peerId, survivor] of [
    [0xcb007101, 'in'],
    [0x01010101, 'out'],
  ] as const) {
    const p = peer();
    const s = await speaker({ listen: { port: 0, addresses: ['127.0.0.1'] }, peers: [peerConfig(p)] });
    const out = await p.connection(0);
    await out.waitFor('OPEN on the speaker connection', (m) => m.type === 'open');
    const inbound = await ScriptedPeer.dial('127.0.0.1', s.listenPorts[0]!);
    await inbound.waitFor('OPEN on our connection', (m) => m.type === 'open');
    out.sendOpen({ asn: 65010, bgpId: peerId });
    await out.waitFor('KEEPALIVE (OpenConfirm)', (m) => m.type === 'keepalive');
    inbound.sendOpen({ asn: 65010, bgpId: peerId });
    const [loser, winner] = survivor === 'in' ? [out, inbound] : [inbound, out];
    const n = (await loser.waitFor('Cease on the losing connection', (m) => m.type === 'notification')) as NotificationMessage;
    expect([n.code, n.subcode]).toEqual([ErrorCode.CEASE, CeaseSubcode.CONNECTION_COLLISION_RESOLUTION]);
    await loser.waitClosed();
    winner.sendKeepalive();
    await established(s, '127.0.0.1');
    expect(winner.closed).toBe(false);
    await s.stop();
    inbound.close();
  }
});

test('two speakers with TCP-MD5 and source addresses establish; a peer without the key cannot connect', async () => {
  const a = await speaker({ listen: { port: 0, addresses: ['127.0.0.1'] }, peers: [{ address: '127.0.0.2', asn: 65020, password: 's3cret', passive: true }, { address: '127.0.0.3', asn: 65030, password: 's3cret', passive: true }] });
  const port = a.listenPorts[0]!;
  const b = await BgpSpeaker.start({ localAsn: 65020, routerId: '198.51.100.2', listen: false, peers: [{ address: '127.0.0.1', asn: LOCAL_ASN, port, password: 's3cret', sourceAddress: '127.0.0.2' }] });
  speakers.push(b);
  const c = await BgpSpeaker.start({
    localAsn: 65030,
    routerId: '198.51.100.3',
    listen: false,
    peers: [{ address: '127.0.0.1', asn: LOCAL_ASN, port, sourceAddress: '127.0.0.3', connectTimeoutSeconds: 1, connectRetry: { minSeconds: 0.1, maxSeconds: 0.1 } }],
  });
  speakers.push(c);
  await established(a, '127.0.0.2');
  await established(b, '127.0.0.1');
  // The kernel drops unsigned SYNs from an address with a key: the connect times out.
  await eventually('the unsigned connect to time out', () => c.stats().peers[0]!.lastError?.includes('timed out'));
  expect(a.stats().peers.find((p) => p.address === '127.0.0.3')!.state).toBe('active');
  // Given the key, it gets in.
  c.reconfigure({ localAsn: 65030, routerId: '198.51.100.3', listen: false, peers: [{ address: '127.0.0.1', asn: LOCAL_ASN, port, password: 's3cret', sourceAddress: '127.0.0.3' }] });
  await established(c, '127.0.0.1');
  await established(a, '127.0.0.3');
});

test('reconfigure: a removed peer gets Cease 6/3, a changed one 6/6 and a new session, an added one connects', async () => {
  const p1 = peer();
  const p2 = ScriptedPeer.listen('127.0.0.2');
  const p3 = ScriptedPeer.listen('127.0.0.3');
  peers.push(p2, p3);
  const base = { localAsn: LOCAL_ASN, routerId: '198.51.100.1', listen: false as const };
  const s = await speaker({ peers: [peerConfig(p1), { ...peerConfig(p2), address: '127.0.0.2' }] });
  const c1 = await p1.connection(0);
  const c2 = await p2.connection(0);
  await c1.establish({ asn: 65010 });
  await c2.establish({ asn: 65010 });
  s.reconfigure({ ...base, peers: [{ ...peerConfig(p2), address: '127.0.0.2', holdTimeSeconds: 30 }, { ...peerConfig(p3), address: '127.0.0.3' }] });
  const gone = (await c1.waitFor('Cease to the removed peer', (m) => m.type === 'notification')) as NotificationMessage;
  expect([gone.code, gone.subcode]).toEqual([ErrorCode.CEASE, CeaseSubcode.PEER_DECONFIGURED]);
  const changed = (await c2.waitFor('Cease to the changed peer', (m) => m.type === 'notification')) as NotificationMessage;
  expect([changed.code, changed.subcode]).toEqual([ErrorCode.CEASE, CeaseSubcode.OTHER_CONFIGURATION_CHANGE]);
  const c2b = await p2.connection(1);
  const open = await c2b.waitFor('the new OPEN', (m) => m.type === 'open');
  expect(open.type === 'open' && open.holdTime).toBe(30);
  const c3 = await p3.connection(0);
  await c3.establish({ asn: 65010 });
  expect(s.stats().peers.map((p) => p.address).sort()).toEqual(['127.0.0.2', '127.0.0.3']);
  expect(() => s.reconfigure({ ...base, peers: [{ address: 'nope', asn: 0 }] })).toThrow(/peers\[0\]\.address.*\n.*peers\[0\]\.asn/);
});

test('stop: graceful closes without a NOTIFICATION (the peer keeps the routes); otherwise Cease 6/2', async () => {
  for (const graceful of [true, false]) {
    const p = peer();
    const s = await speaker({ peers: [peerConfig(p)] });
    const conn = await p.connection(0);
    await conn.establish({ asn: 65010 });
    await established(s, '127.0.0.1');
    await s.stop({ graceful });
    await conn.waitClosed();
    const notes = conn.of('notification');
    if (graceful) expect(notes).toEqual([]);
    else expect(notes.map((n) => [n.code, n.subcode])).toEqual([[ErrorCode.CEASE, CeaseSubcode.ADMINISTRATIVE_SHUTDOWN]]);
  }
});

test('ADD-PATH turned off for a peer: one stable next hop per prefix and no path identifiers, even when the peer can receive several', async () => {
  const p = peer();
  const s = await speaker({ peers: [{ ...peerConfig(p), addPath: false }] });
  s.setAnnouncements([{ prefix: '203.0.113.10/32', nextHops: ['198.51.100.11', '198.51.100.12', '198.51.100.13'] }]);
  const conn = await p.connection(0);
  const open = await conn.waitFor('OPEN', (m) => m.type === 'open');
  expect(open.type === 'open' && open.capabilities.addPath).toEqual([]);
  conn.sendOpen({ asn: 65010, caps: { addPath: [{ afi: Afi.IPV4, safi: Safi.UNICAST, send: false, receive: true }] } });
  // We never agreed to send path identifiers: read the UPDATEs without them.
  conn.ctx = { fourOctetAs: true, addPath: { 4: false, 6: false } };
  conn.sendKeepalive();
  await eventually('two End-of-RIB markers', () => endOfRibs(conn) === 2);
  expect(conn.decodeError).toBeUndefined();
  expect([...announced(conn).keys()]).toEqual(['203.0.113.10/32']);
  expect(s.stats().peers[0]!.negotiated?.addPath).toEqual([]);
});

test('refused (a leader past its renew deadline): no connection made or accepted, no UPDATE sent; the session it had is closed without a NOTIFICATION; allowed again, it connects', async () => {
  let refused: string | undefined = 'the leader lease was not renewed within the renew deadline';
  const p = peer();
  const s = await BgpSpeaker.start(
    { localAsn: LOCAL_ASN, routerId: '198.51.100.1', listen: { port: 0, addresses: ['127.0.0.1'] }, peers: [{ ...peerConfig(p), passive: false }] },
    { refusal: () => refused },
  );
  speakers.push(s);
  s.setAnnouncements([{ prefix: '198.51.100.128/25', nextHops: ['198.51.100.11'] }]);
  // Its connect attempts are refused (said in its stats), none reaches the peer.
  await eventually('a connect attempt refused', () => s.stats().peers[0]!.lastError?.includes('not renewed'));
  expect(p.connections).toEqual([]);
  // The peer's own connection is closed unanswered: no OPEN.
  const inbound = await ScriptedPeer.dial('127.0.0.1', s.listenPorts[0]!);
  await inbound.waitClosed();
  expect(inbound.of('open')).toEqual([]);

  refused = undefined;
  const conn = await p.connection(0);
  await conn.establish({ asn: 65010 });
  await established(s, '127.0.0.1');
  await eventually('the table sent', () => announced(conn).size === 1);
  const updates = conn.of('update').length;

  // Refused again while established: the next table is not sent; the connection is closed
  // without a NOTIFICATION (graceful restart: the router keeps the routes as stale).
  refused = 'the leader lease was not renewed within the renew deadline';
  s.setAnnouncements([{ prefix: '198.51.100.0/25', nextHops: ['198.51.100.11'] }]);
  await conn.waitClosed();
  expect(conn.of('update').length).toBe(updates);
  expect(conn.of('notification')).toEqual([]);
});
