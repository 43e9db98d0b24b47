/**
 * Seeded fuzzing of what a BGP peer can send: the framer and decoders, then the Peer/Connection
 * session layer over a fake socket, then a ROUTE-REFRESH flood by a peer that never reads.
 * Bounded in time (EDGE_CCM_FUZZ_SECONDS, default 30 in all); the seed is printed and
 * EDGE_CCM_FUZZ_SEED replays a run. Asserts: every rejection is the project's BgpError with a
 * NOTIFICATION we may send; nothing else escapes a session; the write queue stays under its cap
 * and does not grow with the number of requests.
 */
import { expect, test } from 'bun:test';
import { parseIP } from '../../src/net/ip.ts';
import { Afi, CeaseSubcode, ErrorCode, FsmError, HeaderError, MAX_MESSAGE_LENGTH, MessageType, OpenError, Safi, UpdateError } from '../../src/net/bgp/constants.ts';
import { BgpError } from '../../src/net/bgp/errors.ts';
import { decodeMessage, encodeKeepalive, encodeNotification, encodeRouteRefresh, Framer, frame } from '../../src/net/bgp/message.ts';
import { encodeUpdateBody, type UpdateContext } from '../../src/net/bgp/update.ts';
import { ACCEPTED, MALFORMED, RFC7606 } from '../fakes/bgp-malformed-corpus.ts';
import { mulberry32, seedFromEnv } from '../harness/seeded-random.ts';
import { establish, type FakeWire, PEER_ASN, peerOpen, session, table } from '../fakes/bgp-fake-session.ts';

const SEED = seedFromEnv('EDGE_CCM_FUZZ_SEED');
const SECONDS = Number(process.env.EDGE_CCM_FUZZ_SECONDS ?? 30);
console.log(`BGP fuzz seed ${SEED} (replay: EDGE_CCM_FUZZ_SEED=${SEED})`);

/** The NOTIFICATIONs this speaker may send: codes and subcodes the RFCs define. */
const SENDABLE: Record<number, Set<number>> = {
  [ErrorCode.MESSAGE_HEADER]: new Set(Object.values(HeaderError)),
  [ErrorCode.OPEN_MESSAGE]: new Set([0, ...Object.values(OpenError)]),
  [ErrorCode.UPDATE_MESSAGE]: new Set(Object.values(UpdateError)),
  [ErrorCode.HOLD_TIMER_EXPIRED]: new Set([0]),
  [ErrorCode.FSM]: new Set(Object.values(FsmError)),
  [ErrorCode.CEASE]: new Set(Object.values(CeaseSubcode)),
  [ErrorCode.SEND_HOLD_TIMER_EXPIRED]: new Set([0]),
};

function sendable(code: number, subcode: number): boolean {
  return SENDABLE[code]?.has(subcode) ?? false;
}

function ip(text: string) {
  const v = parseIP(text);
  if (!v) throw new Error(text);
  return v;
}

/** Well-formed messages from the project's own encoders, and the corpora's hand-made ones. */
function seeds(r: () => number): Uint8Array[] {
  const ctx: UpdateContext = { fourOctetAs: true, addPath: { 4: false, 6: false } };
  const v4 = { prefix: { family: 4 as const, first: 0xcb007100n, last: 0xcb0071ffn, bits: 24 } };
  const v6 = { prefix: { family: 6 as const, first: 0x20010db8000100000000000000000000n, last: 0x20010db80001ffffffffffffffffffffn, bits: 48 } };
  const update = (u: Parameters<typeof encodeUpdateBody>[0]) => frame(MessageType.UPDATE, encodeUpdateBody(u, ctx));
  return [
    peerOpen(r),
    encodeKeepalive(),
    encodeNotification(6, 2),
    encodeRouteRefresh(Afi.IPV4, Safi.UNICAST),
    update({ withdrawn: [], attributes: { origin: 0, asPath: [{ type: 2, asns: [PEER_ASN, 4200000002] }], nextHop: ip('198.51.100.9'), med: 5, localPref: 100, atomicAggregate: true, communities: [0xfdf20007], as4Path: [{ type: 2, asns: [PEER_ASN] }], unknown: [{ flags: 0xc0, type: 200, value: new Uint8Array([1, 2, 3]) }] }, nlri: [v4] }),
    update({ withdrawn: [], attributes: { origin: 1, asPath: [], mpReach: { afi: Afi.IPV6, safi: Safi.UNICAST, nextHops: [ip('2001:db8::9'), ip('fe80::9')], nlri: [v6] }, unknown: [] }, nlri: [] }),
    update({ withdrawn: [v4], attributes: { unknown: [], mpUnreach: { afi: Afi.IPV6, safi: Safi.UNICAST, withdrawn: [v6] } }, nlri: [] }),
    ...MALFORMED.map((c) => c.bytes),
    ...RFC7606.map((c) => c.bytes),
    ...ACCEPTED.map((c) => c.bytes),
  ];
}

const EDGES = [0, 1, 2, 3, 4, 0x7f, 0x80, 0xfe, 0xff];

/** One mutation of `input`; most keep the header's length right so the body reaches the decoders. */
function mutate(input: Uint8Array, r: () => number, pool: Uint8Array[]): Uint8Array {
  let b = Uint8Array.from(input);
  const pick = (n: number) => Math.floor(r() * n);
  const rounds = 1 + pick(4);
  for (let i = 0; i < rounds; i++) {
    const at = pick(Math.max(b.length, 1));
    switch (pick(7)) {
      case 0: // a byte set to an edge value or its neighbour
        if (b.length) b[at] = (EDGES[pick(EDGES.length)]! + (pick(3) - 1)) & 0xff;
        break;
      case 1: // a random byte
        if (b.length) b[at] = pick(256);
        break;
      case 2: // truncation
        b = b.slice(0, at);
        break;
      case 3: // bytes inserted
        b = new Uint8Array([...b.subarray(0, at), ...Array.from({ length: 1 + pick(8) }, () => pick(256)), ...b.subarray(at)]);
        break;
      case 4: // bytes removed
        b = new Uint8Array([...b.subarray(0, at), ...b.subarray(at + 1 + pick(8))]);
        break;
      case 5: {
        // a body spliced from another seed
        const other = pool[pick(pool.length)]!;
        b = new Uint8Array([...b.subarray(0, at), ...other.subarray(Math.min(19, other.length))]).slice(0, MAX_MESSAGE_LENGTH);
        break;
      }
      case 6: // a flag bit flipped
        if (b.length) b[at]! ^= 1 << pick(8);
        break;
    }
  }
  // Keep the header's marker and length right most of the time: the decoders behind the framer are the target.
  if (b.length >= 19 && r() < 0.85) {
    b.fill(0xff, 0, 16);
    b = b.slice(0, MAX_MESSAGE_LENGTH);
    b[16] = b.length >> 8;
    b[17] = b.length & 0xff;
  }
  return b;
}

function checkError(e: unknown, what: () => string): void {
  if (!(e instanceof BgpError)) throw new Error(`${what()}: not a BgpError: ${e instanceof Error ? e.stack : String(e)}`);
  if (!sendable(e.code, e.subcode)) throw new Error(`${what()}: NOTIFICATION ${e.code}/${e.subcode} is not one to send`);
  if (encodeNotification(e.code, e.subcode, e.data).length > MAX_MESSAGE_LENGTH) throw new Error(`${what()}: NOTIFICATION too long`);
}

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

test(`decoders: mutated messages are decoded or rejected with a sendable BgpError, never anything else`, () => {
  const r = mulberry32(SEED);
  const pool = seeds(r);
  const until = performance.now() + SECONDS * 0.4 * 1000;
  let inputs = 0;
  let rejected = 0;
  let faulted = 0;
  while (performance.now() < until) {
    const input = mutate(pool[Math.floor(r() * pool.length)]!, r, pool);
    const ctx: UpdateContext = { fourOctetAs: r() < 0.7, addPath: { 4: r() < 0.2, 6: r() < 0.2 }, ebgp: r() < 0.7 };
    inputs++;
    const framer = new Framer();
    try {
      for (let at = 0; at < input.length; ) {
        const n = 1 + Math.floor(r() * input.length);
        for (const raw of framer.push(input.subarray(at, at + n))) {
          const m = decodeMessage(raw, ctx);
          if (m.type === 'update' && m.faults) {
            faulted++;
            // treat-as-withdraw is flagged exactly when a fault asks for it
            expect(m.treatAsWithdraw === true).toBe(m.faults.some((f) => f.action === 'treat_as_withdraw'));
          }
        }
        at += n;
      }
    } catch (e) {
      rejected++;
      checkError(e, () => `input ${hex(input)}`);
    }
  }
  console.log(`decoders: ${inputs} inputs, ${rejected} rejected, ${faulted} UPDATEs handled by RFC 7606`);
  expect(inputs).toBeGreaterThan(1000);
});

/** The NOTIFICATIONs the speaker wrote, decoded from what the fake socket took. */
function notifications(wire: FakeWire): { code: number; subcode: number }[] {
  const out: { code: number; subcode: number }[] = [];
  const framer = new Framer();
  for (const chunk of wire.written) {
    for (const raw of framer.push(chunk)) if (raw.type === MessageType.NOTIFICATION) out.push({ code: raw.body[0]!, subcode: raw.body[1]! });
  }
  return out;
}

test(`sessions: streams of mutated messages over a fake socket reset only with sendable NOTIFICATIONs; no exception escapes`, async () => {
  const r = mulberry32(SEED ^ 0x5bd1e995);
  const pool = seeds(r);
  const until = performance.now() + SECONDS * 0.4 * 1000;
  let sessions = 0;
  let messages = 0;
  let resets = 0;
  while (performance.now() < until) {
    const h = session();
    sessions++;
    const stream: Uint8Array[] = [];
    if (r() < 0.9) stream.push(r() < 0.9 ? peerOpen(r) : mutate(peerOpen(r), r, pool));
    if (r() < 0.9) stream.push(encodeKeepalive());
    const n = 1 + Math.floor(r() * 12);
    for (let i = 0; i < n; i++) {
      const s = pool[Math.floor(r() * pool.length)]!;
      stream.push(r() < 0.3 ? s : mutate(s, r, pool));
    }
    const bytes = new Uint8Array(stream.reduce((a, b) => a + b.length, 0));
    let at = 0;
    for (const s of stream) {
      bytes.set(s, at);
      at += s.length;
    }
    messages += stream.length;
    // Chunked at random boundaries, as TCP may deliver them.
    for (let i = 0; i < bytes.length; ) {
      const len = 1 + Math.floor(r() * 600);
      try {
        h.conn.onData(bytes.subarray(i, i + len));
      } catch (e) {
        throw new Error(`an exception escaped the session: ${e instanceof Error ? e.stack : String(e)}; stream ${stream.map(hex).join(' ')}`);
      }
      i += len;
    }
    if (h.internalErrors.length > 0) throw new Error(`internal error in a session: ${h.internalErrors[0]}; stream ${stream.map(hex).join(' ')}`);
    for (const n of notifications(h.wire)) {
      resets++;
      if (!sendable(n.code, n.subcode)) throw new Error(`NOTIFICATION ${n.code}/${n.subcode} sent; stream ${stream.map(hex).join(' ')}`);
    }
    h.peer.stop({ subcode: CeaseSubcode.ADMINISTRATIVE_SHUTDOWN });
    if (sessions % 50 === 0) await Bun.sleep(0); // let the fake sockets' close callbacks run
  }
  console.log(`sessions: ${sessions} sessions, ${messages} messages, ${resets} NOTIFICATIONs`);
  expect(sessions).toBeGreaterThan(100);
});

for (const routes of [200, 2000]) {
  test(`ROUTE-REFRESH flood by a peer that never reads (${routes} routes): the queue stays under its cap and does not grow with the requests`, () => {
    const r = mulberry32(SEED + routes);
    // The kernel takes 64 KiB (a send buffer), then the peer reads no more.
    const h = session(64 * 1024);
    h.peer.setRoutes(table(routes));
    establish(h, r);
    expect(h.peer.state).toBe('established');
    const refresh = encodeRouteRefresh(Afi.IPV6, Safi.UNICAST);
    const burst = new Uint8Array(refresh.length * 100);
    for (let i = 0; i < 100; i++) burst.set(refresh, i * refresh.length);
    const samples: number[] = [];
    for (let i = 0; i < 100; i++) {
      h.conn.onData(burst); // 100 requests at a time: 10,000 in all
      expect(h.conn.queuedBytes).toBeLessThanOrEqual(h.conn.maxQueuedBytes);
      samples.push(h.conn.queuedBytes);
    }
    const stats = h.peer.stats();
    console.log(`flood ${routes} routes: queue after 100 requests ${samples[0]} bytes, after 10,000 ${samples.at(-1)} bytes (cap ${h.conn.maxQueuedBytes}); ${stats.routeRefreshesCoalesced} requests coalesced`);
    expect(h.peer.state).toBe('established');
    // No growth: the queue after 10,000 requests is what it was after the first 100.
    expect(samples.at(-1)).toBe(samples[0]);
    expect(stats.routeRefreshesCoalesced).toBeGreaterThanOrEqual(9_990);
    expect(h.internalErrors).toEqual([]);
    h.peer.stop({ subcode: CeaseSubcode.ADMINISTRATIVE_SHUTDOWN });
  });
}

test('a table change to a peer that reads nothing, past the queue cap: Cease 6/8 (out of resources), the queue freed', () => {
  const r = mulberry32(SEED + 1);
  const h = session(0);
  h.peer.setRoutes(table(100));
  establish(h, r);
  expect(h.peer.state).toBe('established');
  h.conn.maxQueuedBytes = 20_000; // a small cap for the test; the real one is at least 4 MiB
  for (let i = 0; i < 50 && h.peer.state === 'established'; i++) h.peer.setRoutes(table(100 + ((i * 37) % 900)));
  expect(h.peer.state).not.toBe('established');
  expect(h.peer.stats().lastError).toMatch(/NOTIFICATION cease \(6\/8\).*write queue full/);
  expect(h.conn.queuedBytes).toBeLessThanOrEqual(20_000 + 4096);
});
