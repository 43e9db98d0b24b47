import { afterAll, describe, expect, test } from 'bun:test';
import { heapStats } from 'bun:jsc';
import { ptr } from 'bun:ffi';
import fc from 'fast-check';
import { ipToBytes, parseIP } from '../../src/net/ip.ts';
import { handleArpFrame, handleNdpFrame, type FrameOutcome, type LinkState } from '../../src/net/l2/answer.ts';
import { ARP_REPLY, ARP_REQUEST, arpProbeFrame, gratuitousArpFrames, parseArp, serializeArp } from '../../src/net/l2/arp.ts';
import { BROADCAST_MAC, ETHERTYPE_ARP, ZERO_MAC, buildEthernet, isMulticastMac, parseEthernet, parseMac } from '../../src/net/l2/ethernet.ts';
import { ICMPV6_NEIGHBOR_ADVERTISEMENT, icmpv6Checksum, neighborAdvertisementFrame, neighborSolicitationFrame, parseNeighborMessage } from '../../src/net/l2/ndp.ts';
import { MALFORMED_REASONS, MARTIAN_REASONS, RefusalTally } from '../../src/net/l2/refusals.ts';
import { BFD_SOCKET_ERROR_CODES, BfdEndpoint } from '../../src/net/bfd/endpoint.ts';
import { BFD_DISCARD_REASONS, BfdState, decodeControlPacket, encodeControlPacket, type ControlPacket } from '../../src/net/bfd/packet.ts';
import { BfdSession } from '../../src/net/bfd/session.ts';
import { IP_TTL, IPPROTO_IP, libc } from '../../src/util/libc.ts';
import { FakeClock } from '../fakes/fake-clock.ts';
import { seedFromEnv } from '../harness/seeded-random.ts';

/**
 * Seeded fuzzing of what a host on the LAN (ARP, NDP) or a BFD neighbour can send (issue 34): the
 * project's own encoders build valid frames and packets, which are then swept field by field
 * through 0, 1, max and off-by-one, truncated, extended, corrupted at random and given martian
 * senders; pure random bytes too. Every input must end in one of the intended outcomes, with a
 * reason of the fixed sets (refusals.ts, BFD_DISCARD_REASONS) and nothing thrown; and what is kept
 * per reason must not grow with the number of inputs.
 *
 * A new seed each run, printed; EDGE_CCM_FUZZ_SEED=N replays one. The BGP decoders have their own file.
 */
const SEED = seedFromEnv('EDGE_CCM_FUZZ_SEED');
console.log(`l2/bfd fuzz: seed ${SEED} (replay with EDGE_CCM_FUZZ_SEED=${SEED})`);
const RUNS = { seed: SEED, numRuns: 3_000 };
/** Frames per run: each run hands a batch to the handlers. */
const BATCH = 100;

const bytesOf = (ip: string) => ipToBytes(parseIP(ip)!);
const OUR_MAC = parseMac('02:00:00:00:00:0b')!;
const CLIENT_MAC = parseMac('02:00:00:00:00:0a')!;
const LINK: LinkState = { mac: OUR_MAC, addresses: new Set(['198.51.100.11', '2001:db8::b', 'fe80::ff:fe00:b']) };
const CLIENT_V4 = bytesOf('198.51.100.10');
const CLIENT_V6 = bytesOf('fe80::ff:fe00:a');
/** 0, 1, max and off-by-one of a byte, and the group bit. */
const EDGE_BYTES = [0, 1, 2, 0x7f, 0x80, 0xfe, 0xff];

/** The issue's 60-byte frame: ARP with hardware type 0 and protocol type 0 from 02:00:00:00:00:09. */
const ISSUE_FRAME = Uint8Array.from(Buffer.from('ffffffffffff02000000000908060000000006040001020000000009c6336414000000000000c633640a000000000000000000000000000000000000', 'hex'));

const ARP_SEEDS: Uint8Array[] = [
  buildEthernet(BROADCAST_MAC, CLIENT_MAC, ETHERTYPE_ARP, serializeArp({ operation: ARP_REQUEST, senderMac: CLIENT_MAC, senderIp: CLIENT_V4, targetMac: ZERO_MAC, targetIp: bytesOf('198.51.100.11') })),
  buildEthernet(OUR_MAC, CLIENT_MAC, ETHERTYPE_ARP, serializeArp({ operation: ARP_REPLY, senderMac: CLIENT_MAC, senderIp: bytesOf('198.51.100.11'), targetMac: OUR_MAC, targetIp: CLIENT_V4 })),
  arpProbeFrame(bytesOf('198.51.100.11'), CLIENT_MAC),
  ...gratuitousArpFrames(bytesOf('198.51.100.11'), CLIENT_MAC),
  ISSUE_FRAME,
];
const NDP_SEEDS: Uint8Array[] = [
  neighborSolicitationFrame(bytesOf('2001:db8::b'), CLIENT_MAC, CLIENT_V6),
  neighborSolicitationFrame(bytesOf('fe80::ff:fe00:b'), CLIENT_MAC),
  neighborAdvertisementFrame({ ourMac: CLIENT_MAC, target: bytesOf('2001:db8::b'), destination: CLIENT_V6, destinationMac: OUR_MAC, solicited: true }),
  neighborAdvertisementFrame({ ourMac: CLIENT_MAC, target: bytesOf('2001:db8::b'), destination: bytesOf('ff02::1'), destinationMac: parseMac('33:33:00:00:00:01')!, solicited: false }),
];

/** Rewrites the ICMPv6 checksum of an IPv6 frame, so that a mutation reaches the checks behind it. */
function fixChecksum(frame: Uint8Array): Uint8Array {
  if (frame.length < 58) return frame;
  const length = Math.min((frame[18]! << 8) | frame[19]!, frame.length - 54);
  frame[56] = frame[57] = 0;
  const sum = icmpv6Checksum(frame.subarray(22, 38), frame.subarray(38, 54), frame.subarray(54, 54 + length));
  frame[56] = sum >> 8;
  frame[57] = sum & 0xff;
  return frame;
}

/** A seed frame changed: bytes set (edge values or any), then maybe truncated or extended, maybe its checksum made right again. */
function mutated(seeds: Uint8Array[]): fc.Arbitrary<Uint8Array> {
  return fc
    .record({
      seed: fc.constantFrom(...seeds),
      edits: fc.array(fc.tuple(fc.nat(100), fc.oneof(fc.constantFrom(...EDGE_BYTES), fc.integer({ min: 0, max: 255 }))), { maxLength: 6 }),
      cut: fc.option(fc.nat(100), { freq: 4 }),
      extra: fc.option(fc.uint8Array({ maxLength: 40 }), { freq: 6 }),
      fix: fc.boolean(),
    })
    .map(({ seed, edits, cut, extra, fix }) => {
      let frame: Uint8Array = seed.slice();
      for (const [at, value] of edits) frame[at % frame.length] = value;
      if (cut !== null) frame = frame.subarray(0, cut % (frame.length + 1));
      if (extra) frame = Uint8Array.from([...frame, ...extra]);
      return fix && frame[12] === 0x86 ? fixChecksum(frame) : frame;
    });
}

/** A valid request or solicitation for an announced address, from a sender no station can be: never answered. */
const martianArp = fc
  .record({
    mac: fc.constantFrom(BROADCAST_MAC, ZERO_MAC, parseMac('01:00:5e:00:00:01')!, parseMac('33:33:00:00:00:01')!, undefined),
    ip: fc.constantFrom('224.0.0.1', '239.1.2.3', '255.255.255.255', '127.0.0.1', '127.255.0.9', '0.0.0.9', '0.255.255.255', undefined),
  })
  .filter((m) => m.mac !== undefined || m.ip !== undefined)
  .map(({ mac, ip }) => {
    const frame = ARP_SEEDS[0]!.slice();
    if (mac) frame.set(mac, 22);
    if (ip) frame.set(bytesOf(ip), 28);
    return frame;
  });
const martianNdp = fc.constantFrom('ff02::1', 'ff05::1:3', '::1', '::ffff:198.51.100.10').map((source) => {
  const frame = NDP_SEEDS[0]!.slice();
  frame.set(bytesOf(source), 22);
  return fixChecksum(frame);
});

const anyFrame = fc.oneof(
  { arbitrary: mutated(ARP_SEEDS), weight: 4 },
  { arbitrary: mutated(NDP_SEEDS), weight: 4 },
  { arbitrary: fc.uint8Array({ maxLength: 120 }), weight: 1 },
);

const KINDS = ['answer', 'claim', 'ignored', 'malformed', 'martian'];

/** What every outcome must be: one of the kinds, a reason of the fixed sets, an answer only for an announced address and never to a group (but DAD's all-nodes). */
function checkOutcome(frame: Uint8Array, outcome: FrameOutcome): void {
  const where = () => `frame ${Buffer.from(frame).toString('hex')} -> ${JSON.stringify(outcome)}`;
  if (!KINDS.includes(outcome.kind)) throw new Error(`unknown outcome: ${where()}`);
  if (outcome.kind === 'malformed' && !(MALFORMED_REASONS as readonly string[]).includes(outcome.reason)) throw new Error(`reason outside the fixed set: ${where()}`);
  if (outcome.kind === 'martian' && !(MARTIAN_REASONS as readonly string[]).includes(outcome.reason)) throw new Error(`reason outside the fixed set: ${where()}`);
  if (outcome.kind === 'claim' && !LINK.addresses.has(outcome.address)) throw new Error(`claim for an address not announced: ${where()}`);
  if (outcome.kind !== 'answer') return;
  if (!LINK.addresses.has(outcome.address)) throw new Error(`answer for an address not announced: ${where()}`);
  const reply = parseEthernet(outcome.reply)!;
  if (reply.etherType === ETHERTYPE_ARP) {
    const arp = parseArp(reply.payload);
    if (!arp.ok || arp.packet.operation !== ARP_REPLY || isMulticastMac(reply.destination)) throw new Error(`bad ARP reply: ${where()}`);
  } else {
    const na = parseNeighborMessage(reply.payload);
    if (!na.ok || na.message.type !== ICMPV6_NEIGHBOR_ADVERTISEMENT) throw new Error(`bad advertisement: ${where()}`);
    const toAllNodes = Buffer.from(na.message.destination).equals(Buffer.from(bytesOf('ff02::1')));
    if (isMulticastMac(reply.destination) !== toAllNodes || (toAllNodes && na.message.solicited)) throw new Error(`advertisement to a group other than DAD's all-nodes: ${where()}`);
  }
}

const handle = (frame: Uint8Array) => (frame[12] === 0x86 && frame[13] === 0xdd ? handleNdpFrame : handleArpFrame)(frame, LINK);

describe('ARP and NDP handlers', () => {
  test('mutated, truncated and random frames: only the intended outcomes, reasons of the fixed sets, nothing thrown', () => {
    const seen = new Set<string>();
    fc.assert(
      fc.property(fc.array(anyFrame, { minLength: BATCH, maxLength: BATCH }), (frames) => {
        for (const frame of frames) {
          const outcome = handle(frame);
          checkOutcome(frame, outcome);
          seen.add(outcome.kind);
        }
      }),
      RUNS,
    );
    // The generators reach every outcome (a fuzz that only ever hits one check proves little).
    expect([...seen].sort()).toEqual(KINDS);
  });

  test('requests and solicitations from martian senders are never answered', () => {
    fc.assert(
      fc.property(fc.oneof(martianArp, martianNdp), (frame) => {
        const outcome = handle(frame);
        if (outcome.kind !== 'martian') throw new Error(`${Buffer.from(frame).toString('hex')} -> ${outcome.kind}`);
      }),
      { ...RUNS, numRuns: 2_000 },
    );
  });

  test('what is kept does not grow with the number of malformed frames: a fixed set of counters, at most one report per reason per window', () => {
    let random = SEED >>> 0 || 1;
    // The high byte of a 32-bit LCG (its low bits repeat every few hundred draws).
    const byte = () => (random = (Math.imul(random, 1103515245) + 12345) >>> 0) >>> 24;
    let now = 0;
    const tally = new RefusalTally(10_000, () => now);
    let reports = 0;
    let refused = 0;
    const feed = (n: number) => {
      for (let i = 0; i < n; i++) {
        // The issue's frame with its hardware and protocol fields varied (every frame a new reason text
        // before), and IPv6 packets with a payload length beyond what arrived.
        const frame = i % 2 ? ISSUE_FRAME.slice() : NDP_SEEDS[0]!.slice();
        if (i % 2) frame.set([byte(), byte(), byte(), byte(), byte(), byte()], 14);
        else frame.set([byte(), byte()], 18);
        const outcome = handle(frame);
        if (outcome.kind !== 'malformed' && outcome.kind !== 'martian') continue;
        refused += 1;
        if (tally.count(outcome)) reports += 1;
      }
    };
    const shape = () => JSON.stringify([Object.keys(tally.malformedReasons), Object.keys(tally.martianReasons)]);
    feed(1_000);
    const shapeAfterFew = shape();
    const heap = () => {
      Bun.gc(true);
      const h = heapStats();
      return h.heapSize + h.extraMemorySize;
    };
    const heapBefore = heap();
    feed(200_000);
    now += 60_000; // a new window: every reason may be reported once more
    feed(1_000);
    const grown = heap() - heapBefore;
    expect(shape()).toBe(shapeAfterFew);
    expect(Object.keys(tally.malformedReasons).length).toBe(MALFORMED_REASONS.length);
    expect(refused).toBeGreaterThan(200_000); // all but the few whose random length fits
    expect(tally.malformedFrames + tally.martianFrames).toBe(refused);
    expect(reports).toBeLessThanOrEqual(2 * (MALFORMED_REASONS.length + MARTIAN_REASONS.length));
    // Coarse: a map keyed by the old reason texts held about 9 MB per 100,000 frames like these.
    expect(grown).toBeLessThan(2 * 1024 * 1024);
  });
});

describe('BFD', () => {
  const base: ControlPacket = {
    diag: 0, state: BfdState.Down, poll: false, final: false, controlPlaneIndependent: false, demand: false,
    detectMult: 3, myDiscriminator: 22, yourDiscriminator: 0, desiredMinTxUs: 1_000_000, requiredMinRxUs: 200_000, requiredMinEchoRxUs: 0,
  };
  const seeds = [
    encodeControlPacket(base),
    encodeControlPacket({ ...base, state: BfdState.Init, yourDiscriminator: 11 }),
    encodeControlPacket({ ...base, state: BfdState.Up, yourDiscriminator: 11, poll: true, desiredMinTxUs: 50_000, requiredMinRxUs: 50_000 }),
    encodeControlPacket({ ...base, state: BfdState.Up, yourDiscriminator: 11, final: true }),
    encodeControlPacket({ ...base, state: BfdState.AdminDown, diag: 7, yourDiscriminator: 11 }),
  ];
  const datagram = fc.oneof(
    { arbitrary: fc
      .record({
        seed: fc.constantFrom(...seeds),
        edits: fc.array(fc.tuple(fc.nat(40), fc.oneof(fc.constantFrom(...EDGE_BYTES, 0x20, 0x24, 24, 26, 23, 25), fc.integer({ min: 0, max: 255 }))), { maxLength: 5 }),
        cut: fc.option(fc.nat(30), { freq: 4 }),
        extra: fc.option(fc.uint8Array({ maxLength: 40 }), { freq: 4 }),
      })
      .map(({ seed, edits, cut, extra }) => {
        let d: Uint8Array = seed.slice();
        if (extra) d = Uint8Array.from([...d, ...extra]);
        for (const [at, value] of edits) d[at % d.length] = value;
        return cut !== null ? d.subarray(0, cut % (d.length + 1)) : d;
      }), weight: 5 },
    { arbitrary: fc.uint8Array({ maxLength: 64 }), weight: 1 },
  );

  test('the decoder: a packet that encodes back to itself, or a discard reason of the fixed set; nothing thrown', () => {
    const seen = new Set<string>();
    fc.assert(
      fc.property(datagram, (d) => {
        const decoded = decodeControlPacket(d);
        if ('error' in decoded) {
          if (!(BFD_DISCARD_REASONS as readonly string[]).includes(decoded.error)) throw new Error(`reason outside the fixed set: ${decoded.error}`);
          seen.add(decoded.error);
          return;
        }
        seen.add('packet');
        if (decoded.packet.poll && decoded.packet.final) return; // never sent by us; the encoder refuses it
        expect(decodeControlPacket(encodeControlPacket(decoded.packet))).toEqual(decoded);
      }),
      { ...RUNS, numRuns: 100_000 },
    );
    expect(seen.has('packet') && seen.size).toBeGreaterThanOrEqual(8);
  });

  test('a session fed any valid packet, at any time: sends only valid packets, keeps at most two timers, never throws', () => {
    const packets = datagram.map((d) => decodeControlPacket(d)).filter((r): r is { packet: ControlPacket } => 'packet' in r);
    fc.assert(
      fc.property(fc.array(fc.tuple(packets, fc.nat(3_000)), { minLength: 1, maxLength: 60 }), (steps) => {
        const clock = new FakeClock(1_000);
        let sent = 0;
        const session = new BfdSession({
          localDiscriminator: 11,
          timers: { desiredMinTxMs: 50, requiredMinRxMs: 50, detectMult: 3 },
          clock,
          random: () => 0.5,
          send: (bytes) => {
            const d = decodeControlPacket(bytes);
            if ('error' in d) throw new Error(`the session sent a packet it would discard: ${d.detail}`);
            sent += 1;
          },
        });
        session.start();
        for (const [{ packet }, wait] of steps) {
          session.receive(packet);
          clock.advance(wait);
          if (clock.pendingTimers > 2) throw new Error(`${clock.pendingTimers} timers armed`);
          if (!(session.state in BfdState)) throw new Error(`state ${session.state}`);
        }
        const stats = session.stats();
        if (![stats.txIntervalMs, stats.detectionTimeMs].every(Number.isFinite)) throw new Error(JSON.stringify(stats));
        return sent > 0;
      }),
      { ...RUNS, numRuns: 10_000 },
    );
  });

  const endpoints: BfdEndpoint[] = [];
  afterAll(async () => {
    for (const e of endpoints) await e.close();
  });

  test('the endpoint over real UDP: every datagram counted once under a fixed reason or by a session; the counters keep their shape', async () => {
    const endpoint = await BfdEndpoint.open({ port: 0, address: '127.0.0.1' });
    endpoints.push(endpoint);
    await endpoint.addSession('127.0.0.1', { port: 9, local: '127.0.0.1', timers: { desiredMinTxMs: 1000, requiredMinRxMs: 1000, detectMult: 3 } });
    const shape = () => JSON.stringify([Object.keys(endpoint.stats().discarded), Object.keys(endpoint.stats().socketErrors)]);
    const shapeBefore = shape();
    const sender = await Bun.udpSocket({ hostname: '127.0.0.1', port: 0 });
    try {
      expect(libc().setsockopt((sender as unknown as { fd: number }).fd, IPPROTO_IP, IP_TTL, ptr(new Int32Array([255])), 4)).toBe(0);
      const inputs = fc.sample(datagram.filter((d) => d.length > 0), { seed: SEED, numRuns: 20_000 });
      const counted = () => {
        const s = endpoint.stats();
        return Object.values(s.discarded).reduce((a, b) => a + b, 0) + s.sessions.reduce((a, x) => a + x.received, 0);
      };
      // Paced, so that loopback's socket buffer never drops one: each must be counted.
      for (let i = 0; i < inputs.length; i += 100) {
        for (const d of inputs.slice(i, i + 100)) sender.send(d, endpoint.port, '127.0.0.1');
        const want = Math.min(i + 100, inputs.length);
        const deadline = performance.now() + 5_000;
        while (counted() < want && performance.now() < deadline) await Bun.sleep(2);
      }
      expect(counted()).toBe(inputs.length);
    } finally {
      sender.close();
    }
    expect(shape()).toBe(shapeBefore);
    expect(Object.keys(endpoint.stats().discarded)).toEqual([...BFD_DISCARD_REASONS]);
    expect(Object.keys(endpoint.stats().socketErrors)).toEqual([...BFD_SOCKET_ERROR_CODES]);
  });
});
