import { describe, expect, test } from 'bun:test';
import fc from 'fast-check';
import { handleArpFrame, type LinkState } from './answer.ts';
import { ARP_REPLY, ARP_REQUEST, serializeArp } from './arp.ts';
import { arpFilter, MAX_FILTERED_ADDRESSES } from './arp-filter.ts';
import { BROADCAST_MAC, buildEthernet, ETHERTYPE_ARP, parseMac } from './ethernet.ts';
import type { BpfInstruction } from './packet-socket.ts';
import { formatIP, ipToBytes, parseIP } from '../ip.ts';

/**
 * Classic BPF as the kernel runs a socket filter (net/core/filter.c, the opcodes arpFilter uses):
 * the bytes to keep, 0 to drop; a load past the frame's end drops it. The kernel's own run of the
 * same programs is test/integration/l2-idle.test.ts's.
 */
function runFilter(program: readonly BpfInstruction[], frame: Uint8Array): number {
  let a = 0;
  const view = new DataView(frame.buffer, frame.byteOffset, frame.byteLength);
  for (let pc = 0; pc < program.length; pc++) {
    const { code, jt, jf, k } = program[pc]!;
    switch (code) {
      case 0x80: a = frame.length; break;
      case 0x20: if (k + 4 > frame.length) return 0; a = view.getUint32(k); break;
      case 0x28: if (k + 2 > frame.length) return 0; a = view.getUint16(k); break;
      case 0x30: if (k + 1 > frame.length) return 0; a = frame[k]!; break;
      case 0x15: pc += a === k ? jt : jf; break;
      case 0x35: pc += a >= k ? jt : jf; break;
      case 0x06: return k;
      default: throw new Error(`opcode 0x${code.toString(16)} is not interpreted here`);
    }
  }
  throw new Error('the program ran off its end (the kernel refuses such a program)');
}

const OUR_MAC = parseMac('02:00:00:00:00:0b')!;
const POOL = ['198.51.100.1', '198.51.100.2', '198.51.100.3', '203.0.113.9', '0.0.0.0', '255.255.255.255', '127.0.0.1', '224.0.0.1'];
const bytesOf = (ip: string) => ipToBytes(parseIP(ip)!);
const macs = fc.constantFrom('02:00:00:00:00:0a', '02:00:00:00:00:0b', 'ff:ff:ff:ff:ff:ff', '00:00:00:00:00:00', '01:00:5e:00:00:01').map((m) => parseMac(m)!);

/** ARP frames as a LAN carries them, and as an attacker would bend them: fields from small pools, then perhaps cut or corrupted. */
const frames = fc.record({
  operation: fc.constantFrom(ARP_REQUEST, ARP_REPLY, 0, 3, 0x0101),
  source: macs, senderMac: macs, targetMac: macs,
  senderIp: fc.constantFrom(...POOL), targetIp: fc.constantFrom(...POOL),
  etherType: fc.constantFrom(ETHERTYPE_ARP, ETHERTYPE_ARP, 0x0800),
  corrupt: fc.option(fc.tuple(fc.integer({ min: 0, max: 59 }), fc.integer({ min: 0, max: 255 }))),
  length: fc.option(fc.integer({ min: 0, max: 64 })),
}).map((f) => {
  const arp = serializeArp({ operation: f.operation, senderMac: f.senderMac, senderIp: bytesOf(f.senderIp), targetMac: f.targetMac, targetIp: bytesOf(f.targetIp) });
  const frame = buildEthernet(BROADCAST_MAC, f.source, f.etherType, arp).slice();
  if (f.corrupt) frame[f.corrupt[0] % frame.length] = f.corrupt[1];
  return f.length === null ? frame : frame.subarray(0, Math.min(f.length, frame.length));
});

const announced = fc.subarray(POOL.slice(0, 4), { minLength: 0, maxLength: 4 });

describe('arpFilter', () => {
  test('drops only frames handleArpFrame ignores or counts as martian: nothing to answer, claim or count as malformed is lost', () => {
    fc.assert(fc.property(frames, announced, (frame, addresses) => {
      const link: LinkState = { mac: OUR_MAC, addresses: new Set(addresses.map((a) => formatIP(parseIP(a)!))) };
      if (runFilter(arpFilter(addresses), frame) > 0) return;
      expect(['ignored', 'martian']).toContain(handleArpFrame(frame, link).kind);
    }), { numRuns: 5_000 });
  });

  test('drops every well-formed request and reply about addresses it does not announce', () => {
    fc.assert(fc.property(announced, fc.constantFrom(ARP_REQUEST, ARP_REPLY), fc.constantFrom(...POOL), fc.constantFrom(...POOL), (addresses, operation, sender, target) => {
      fc.pre(!addresses.includes(sender) && !addresses.includes(target));
      const frame = buildEthernet(BROADCAST_MAC, parseMac('02:00:00:00:00:0a')!, ETHERTYPE_ARP, serializeArp({ operation, senderMac: parseMac('02:00:00:00:00:0a')!, senderIp: bytesOf(sender), targetMac: BROADCAST_MAC, targetIp: bytesOf(target) }));
      expect(runFilter(arpFilter(addresses), frame)).toBe(0);
    }));
  });

  test('reads any address as formatIP writes it: a request for it is kept, one for its neighbour dropped', () => {
    fc.assert(fc.property(fc.ipV4(), (text) => {
      const ip = parseIP(text)!;
      const neighbour = { family: 4 as const, value: ip.value ^ 1n };
      const request = (target: Uint8Array) => buildEthernet(BROADCAST_MAC, parseMac('02:00:00:00:00:0a')!, ETHERTYPE_ARP, serializeArp({ operation: ARP_REQUEST, senderMac: parseMac('02:00:00:00:00:0a')!, senderIp: bytesOf('198.51.100.254'), targetMac: BROADCAST_MAC, targetIp: target }));
      const filter = arpFilter([formatIP(ip)]);
      expect(runFilter(filter, request(ipToBytes(ip)))).toBeGreaterThan(0);
      if (formatIP(neighbour) !== '198.51.100.254') expect(runFilter(filter, request(ipToBytes(neighbour)))).toBe(0);
    }));
  });

  test('keeps frames naming an announced address as sender or target, and a frame padded to 60 bytes', () => {
    const request = buildEthernet(BROADCAST_MAC, parseMac('02:00:00:00:00:0a')!, ETHERTYPE_ARP, serializeArp({ operation: ARP_REQUEST, senderMac: parseMac('02:00:00:00:00:0a')!, senderIp: bytesOf('198.51.100.254'), targetMac: BROADCAST_MAC, targetIp: bytesOf('198.51.100.2') }));
    const padded = new Uint8Array(60);
    padded.set(request);
    const filter = arpFilter(['198.51.100.2']);
    expect(runFilter(filter, request)).toBeGreaterThan(0);
    expect(runFilter(filter, padded)).toBeGreaterThan(0);
    expect(runFilter(arpFilter(['198.51.100.254']), request)).toBeGreaterThan(0);
    expect(runFilter(arpFilter(['198.51.100.3']), request)).toBe(0);
    // No address (a standby socket): only what userspace would count as malformed.
    expect(runFilter(arpFilter([]), request)).toBe(0);
  });

  test('within the kernel\'s 4096 instructions up to MAX_FILTERED_ADDRESSES; above it, every frame (no filter)', () => {
    const many = (n: number) => Array.from({ length: n }, (_, i) => `198.51.${i >> 8}.${i & 0xff}`);
    expect(arpFilter(many(MAX_FILTERED_ADDRESSES)).length).toBeLessThanOrEqual(4096);
    const unfiltered = arpFilter(many(MAX_FILTERED_ADDRESSES + 1));
    expect(unfiltered).toHaveLength(1);
    expect(runFilter(unfiltered, new Uint8Array(1))).toBeGreaterThan(0);
  });
});
