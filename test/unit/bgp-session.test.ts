import { afterEach, expect, test } from 'bun:test';
import { formatIP, formatPrefix } from '../../src/net/ip.ts';
import { Afi, CeaseSubcode, ErrorCode, Safi } from '../../src/net/bgp/constants.ts';
import type { NotificationMessage } from '../../src/net/bgp/message.ts';
import { BgpSpeaker, type SpeakerConfig, type StateChange } from '../../src/net/bgp/speaker.ts';
import type { UpdateMessage } from '../../src/net/bgp/update.ts';
import { eventually } from '../harness/eventually.ts';
import { type ScriptedConnection, ScriptedPeer } from '../fakes/bgp-scripted-peer.ts';

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
