import { describe, expect, test } from 'bun:test';
import { handleArpFrame, handleNdpFrame, unsolicitedAdvertisementFrame, type FrameOutcome, type LinkState } from './answer.ts';
import { ARP_REPLY, ARP_REQUEST, arpProbeFrame, gratuitousArpFrames, parseArp } from './arp.ts';
import { ETHERTYPE_ARP, formatMac, parseEthernet, parseMac } from './ethernet.ts';
import { icmpv6Checksum, neighborSolicitationFrame, parseNeighborMessage, solicitedNodeAddress } from './ndp.ts';
import { ipToBytes, parseIP } from '../ip.ts';

const hex = (text: string) => Uint8Array.from(Buffer.from(text.replace(/\s+/g, ''), 'hex'));
const bytesOf = (ip: string) => ipToBytes(parseIP(ip)!);

// Captured with tcpdump between two network namespaces: `ndisc6 2001:db8::b` from 02:00:00:00:00:0a
// and the kernel's answer from 02:00:00:00:00:0b; `arping 198.51.100.11` likewise; and the kernel's
// own Duplicate Address Detection probe (with its nonce option) for fe80::ff:fe00:a.
const TARGET_B = '20010db8 00000000 00000000 0000000b';
const LINK_LOCAL_A = 'fe800000 00000000 000000ff fe00000a';
const KERNEL_NS = hex(`3333ff00000b 02000000000a 86dd 60087a94 0020 3aff ${LINK_LOCAL_A} ff020000 00000000 00000001 ff00000b
  8700 4c3b 00000000 ${TARGET_B} 0101 02000000000a`);
const KERNEL_NA = hex(`02000000000a 02000000000b 86dd 60000000 0020 3aff ${TARGET_B} ${LINK_LOCAL_A}
  8800 ba85 60000000 ${TARGET_B} 0201 02000000000b`);
const KERNEL_DAD_NS = hex(`3333ff00000a 02000000000a 86dd 60000000 0020 3aff 00000000000000000000000000000000 ff0200000000000000000001ff00000a
  8700 32ef 00000000 fe80000000000000000000fffe00000a 0e01 8daa8f3e1f32`);
const KERNEL_ARP_REQUEST = hex(`ffffffffffff 02000000000a 0806 0001 0800 06 04 0001 02000000000a c633640a 000000000000 c633640b 000000000000000000000000000000000000`);
const KERNEL_ARP_REPLY = hex(`02000000000a 02000000000b 0806 0001 0800 06 04 0002 02000000000b c633640b 02000000000a c633640a`);

const MAC_B = parseMac('02:00:00:00:00:0b')!;
const linkB = (...addresses: string[]): LinkState => ({ mac: MAC_B, addresses: new Set(addresses) });

function answer(outcome: FrameOutcome): Uint8Array {
  if (outcome.kind !== 'answer') throw new Error(`expected an answer, got ${JSON.stringify(outcome)}`);
  return outcome.reply;
}

/** Rewrites the ICMPv6 checksum of an IPv6 frame after a test changed it. */
function fixChecksum(frame: Uint8Array): Uint8Array {
  const out = frame.slice();
  const length = (out[18]! << 8) | out[19]!;
  out[56] = out[57] = 0;
  const sum = icmpv6Checksum(out.subarray(22, 38), out.subarray(38, 54), out.subarray(54, 54 + length));
  out[56] = sum >> 8;
  out[57] = sum & 0xff;
  return out;
}

describe('NDP', () => {
  test('the answer to a kernel Neighbor Solicitation is the kernel\'s own Neighbor Advertisement, byte for byte', () => {
    expect(KERNEL_NS.length).toBe(86);
    expect(answer(handleNdpFrame(KERNEL_NS, linkB('2001:db8::b')))).toEqual(KERNEL_NA);
  });

  test('a kernel advertisement parses with its flags and target link-layer address', () => {
    const parsed = parseNeighborMessage(parseEthernet(KERNEL_NA)!.payload);
    if (!parsed.ok) throw new Error(parsed.detail);
    expect(parsed.message).toMatchObject({ type: 136, solicited: true, override: true, router: false });
    expect(formatMac(parsed.message.linkLayerAddress!)).toBe('02:00:00:00:00:0b');
  });

  test('Duplicate Address Detection for an announced address is answered to all nodes, unsolicited', () => {
    const reply = answer(handleNdpFrame(KERNEL_DAD_NS, linkB('fe80::ff:fe00:a')));
    expect(formatMac(reply.subarray(0, 6))).toBe('33:33:00:00:00:01');
    const parsed = parseNeighborMessage(parseEthernet(reply)!.payload);
    if (!parsed.ok) throw new Error(parsed.detail);
    expect(parsed.message).toMatchObject({ solicited: false, override: true });
  });

  test('a solicitation for an address not announced here, or on a link without addresses, is not answered', () => {
    expect(handleNdpFrame(KERNEL_NS, linkB('2001:db8::c')).kind).toBe('ignored');
    expect(handleNdpFrame(KERNEL_NS, linkB()).kind).toBe('ignored');
  });

  test('what RFC 4861 §7.1.1 makes invalid is counted as malformed under a fixed reason, never answered', () => {
    const cases: [string, Uint8Array, string, string][] = [
      ['flipped bit', (() => { const f = KERNEL_NS.slice(); f[70]! ^= 1; return f; })(), 'ndp-checksum', 'wrong ICMPv6 checksum'],
      ['hop limit 64', fixChecksum(Object.assign(KERNEL_NS.slice(), { 21: 64 })), 'ndp-hop-limit', 'hop limit 64'],
      ['code 1', fixChecksum(Object.assign(KERNEL_NS.slice(), { 55: 1 })), 'ndp-code', 'code 1'],
      ['zero-length option', fixChecksum(Object.assign(KERNEL_NS.slice(), { 79: 0 })), 'ndp-option', 'zero-length option'],
      ['option past the end', fixChecksum(Object.assign(KERNEL_NS.slice(), { 79: 2 })), 'ndp-option', 'runs past the message'],
      ['payload length beyond the frame', Object.assign(KERNEL_NS.slice(), { 19: 0x40 }), 'ipv6-payload-length', 'beyond the'],
      ['multicast target', fixChecksum(Object.assign(KERNEL_NS.slice(), { 62: 0xff })), 'ndp-multicast-target', 'multicast target'],
      ['IP version 4', Object.assign(KERNEL_NS.slice(), { 14: 0x40 }), 'ipv6-version', 'IP version 4'],
    ];
    for (const [name, frame, reason, detail] of cases) {
      const outcome = handleNdpFrame(frame, linkB('2001:db8::b'));
      expect({ name, kind: outcome.kind, reason: outcome.kind === 'malformed' ? (outcome.reason as string) : undefined }).toEqual({ name, kind: 'malformed', reason });
      expect(outcome.kind === 'malformed' && outcome.detail).toContain(detail);
    }
  });

  test('a solicitation from a multicast, loopback or IPv4-mapped source is a martian: not answered (RFC 4291 2.7, as Linux)', () => {
    const withSource = (source: string) => {
      const frame = KERNEL_NS.slice();
      frame.set(bytesOf(source), 22);
      return fixChecksum(frame);
    };
    for (const source of ['ff02::1', 'ff05::2', '::1', '::ffff:198.51.100.10']) {
      expect({ source, outcome: handleNdpFrame(withSource(source), linkB('2001:db8::b')) }).toMatchObject({ source, outcome: { kind: 'martian', reason: 'ipv6-source' } });
    }
    // An advertisement from a multicast source is no claim either.
    const na = KERNEL_NA.slice();
    na.set(bytesOf('ff02::1'), 22);
    expect(handleNdpFrame(fixChecksum(na), { mac: parseMac('02:00:00:00:00:0c')!, addresses: new Set(['2001:db8::b']) })).toMatchObject({ kind: 'martian', reason: 'ipv6-source' });
  });

  test('a solicitation whose answer would go to a multicast or zero MAC is a martian; DAD still goes to all nodes', () => {
    const withLinkLayer = (mac: string) => fixChecksum(Object.assign(KERNEL_NS.slice(), Object.fromEntries([...parseMac(mac)!].map((b, i) => [80 + i, b]))));
    for (const mac of ['ff:ff:ff:ff:ff:ff', '33:33:00:00:00:01', '01:00:5e:00:00:01', '00:00:00:00:00:00']) {
      expect({ mac, outcome: handleNdpFrame(withLinkLayer(mac), linkB('2001:db8::b')) }).toMatchObject({ mac, outcome: { kind: 'martian', reason: 'ndp-sender-mac' } });
    }
    // No option: the frame's source is the asker's address, and a group one is refused the same way.
    const noOption = fixChecksum(Object.assign(KERNEL_NS.slice(0, 78), { 19: 24 }));
    expect(answer(handleNdpFrame(noOption, linkB('2001:db8::b'))).subarray(0, 6)).toEqual(parseMac('02:00:00:00:00:0a')!);
    const fromGroup = Object.assign(noOption.slice(), { 6: 0x01 });
    expect(handleNdpFrame(fromGroup, linkB('2001:db8::b'))).toMatchObject({ kind: 'martian', reason: 'ndp-sender-mac' });
    // A DAD probe from a group frame source is still answered, to all nodes, as Linux answers it.
    const dadFromGroup = Object.assign(KERNEL_DAD_NS.slice(), { 6: 0x01 });
    expect(answer(handleNdpFrame(dadFromGroup, linkB('fe80::ff:fe00:a'))).subarray(0, 6)).toEqual(parseMac('33:33:00:00:00:01')!);
  });

  test('an advertisement for an announced address from another station is a claim', () => {
    expect(handleNdpFrame(KERNEL_NA, { mac: parseMac('02:00:00:00:00:0c')!, addresses: new Set(['2001:db8::b']) })).toEqual({
      kind: 'claim',
      address: '2001:db8::b',
      mac: '02:00:00:00:00:0b',
    });
  });

  test('an unsolicited advertisement goes to all nodes with Override and the target link-layer address', () => {
    const frame = unsolicitedAdvertisementFrame(bytesOf('2001:db8::1:200'), MAC_B);
    const parsed = parseNeighborMessage(parseEthernet(frame)!.payload);
    if (!parsed.ok) throw new Error(parsed.detail);
    expect(parsed.message).toMatchObject({ type: 136, solicited: false, override: true });
    expect(formatMac(parsed.message.linkLayerAddress!)).toBe('02:00:00:00:00:0b');
    expect(formatMac(frame.subarray(0, 6))).toBe('33:33:00:00:00:01');
  });

  test('a DAD probe we build is a valid solicitation to the solicited-node group', () => {
    const frame = neighborSolicitationFrame(bytesOf('2001:db8::1:200'), MAC_B);
    const parsed = parseNeighborMessage(parseEthernet(frame)!.payload);
    if (!parsed.ok) throw new Error(parsed.detail);
    expect(parsed.message.destination).toEqual(solicitedNodeAddress(bytesOf('2001:db8::1:200')));
    expect(formatMac(frame.subarray(0, 6))).toBe('33:33:ff:01:02:00');
  });
});

describe('ARP', () => {
  test('the answer to a kernel ARP request is the kernel\'s own reply (padded to the Ethernet minimum)', () => {
    const reply = answer(handleArpFrame(KERNEL_ARP_REQUEST, linkB('198.51.100.11')));
    expect(reply.subarray(0, 42)).toEqual(KERNEL_ARP_REPLY);
    expect(reply.length).toBe(60);
    expect(reply.subarray(42).every((b) => b === 0)).toBe(true);
  });

  test('requests for other addresses, replies, and our own frames are not answered', () => {
    expect(handleArpFrame(KERNEL_ARP_REQUEST, linkB('198.51.100.12')).kind).toBe('ignored');
    expect(handleArpFrame(KERNEL_ARP_REPLY, { mac: parseMac('02:00:00:00:00:0c')!, addresses: new Set(['198.51.100.10']) }).kind).toBe('ignored');
    expect(handleArpFrame(KERNEL_ARP_REQUEST, { mac: parseMac('02:00:00:00:00:0a')!, addresses: new Set(['198.51.100.11']) }).kind).toBe('ignored');
  });

  test('an RFC 5227 probe for an announced address is answered (defended)', () => {
    const reply = answer(handleArpFrame(arpProbeFrame(bytesOf('198.51.100.11'), parseMac('02:00:00:00:00:0c')!), linkB('198.51.100.11')));
    const arp = parseArp(parseEthernet(reply)!.payload);
    expect(arp.ok && [arp.packet.operation, formatMac(arp.packet.targetMac)]).toEqual([ARP_REPLY, '02:00:00:00:00:0c']);
  });

  test('a gratuitous ARP for an announced address from another station is a claim, not answered', () => {
    for (const frame of gratuitousArpFrames(bytesOf('198.51.100.11'), parseMac('02:00:00:00:00:0c')!)) {
      expect(handleArpFrame(frame, linkB('198.51.100.11'))).toEqual({ kind: 'claim', address: '198.51.100.11', mac: '02:00:00:00:00:0c' });
    }
  });

  test('gratuitous ARP: a broadcast request (sender = target, target MAC zero) and a broadcast reply', () => {
    const frames = gratuitousArpFrames(bytesOf('198.51.100.200'), MAC_B);
    expect(frames.map((f) => parseArp(parseEthernet(f)!.payload)).map((p) => p.ok && [p.packet.operation, formatMac(p.packet.targetMac)])).toEqual([
      [ARP_REQUEST, '00:00:00:00:00:00'],
      [ARP_REPLY, 'ff:ff:ff:ff:ff:ff'],
    ]);
    for (const frame of frames) {
      const arp = parseArp(parseEthernet(frame)!.payload);
      expect(arp.ok && arp.packet.senderIp).toEqual(bytesOf('198.51.100.200'));
      expect(arp.ok && arp.packet.targetIp).toEqual(bytesOf('198.51.100.200'));
      expect(formatMac(frame.subarray(0, 6))).toBe('ff:ff:ff:ff:ff:ff');
    }
  });

  test('requests from a broadcast, multicast or zero sender MAC are martians, never answered (a reply would go to a group)', () => {
    for (const mac of ['ff:ff:ff:ff:ff:ff', '01:00:5e:00:00:01', '00:00:00:00:00:00']) {
      const request = KERNEL_ARP_REQUEST.slice();
      request.set(parseMac(mac)!, 22);
      expect({ mac, outcome: handleArpFrame(request, linkB('198.51.100.11')) }).toMatchObject({ mac, outcome: { kind: 'martian', reason: 'arp-sender-mac' } });
    }
    const fromGroupFrame = Object.assign(KERNEL_ARP_REQUEST.slice(), { 6: 0x03 });
    expect(handleArpFrame(fromGroupFrame, linkB('198.51.100.11'))).toMatchObject({ kind: 'martian', reason: 'arp-sender-mac' });
  });

  test('requests from a multicast, broadcast, loopback or 0/8 sender address are martians (Linux\'s route lookup refuses them); the probe\'s 0.0.0.0 is answered', () => {
    const from = (ip: string) => Object.assign(KERNEL_ARP_REQUEST.slice(), Object.fromEntries([...bytesOf(ip)].map((b, i) => [28 + i, b])));
    for (const ip of ['224.0.0.1', '239.255.255.255', '255.255.255.255', '127.0.0.1', '127.1.2.3', '0.0.0.9']) {
      expect({ ip, outcome: handleArpFrame(from(ip), linkB('198.51.100.11')) }).toMatchObject({ ip, outcome: { kind: 'martian', reason: 'arp-sender-ip' } });
    }
    expect(handleArpFrame(from('0.0.0.0'), linkB('198.51.100.11')).kind).toBe('answer');
    expect(handleArpFrame(from('240.0.0.1'), linkB('198.51.100.11')).kind).toBe('answer'); // class E: Linux does not call it martian
  });

  test('ARP for other hardware or protocols, or too short, is malformed', () => {
    const ipv6Arp = Object.assign(KERNEL_ARP_REQUEST.slice(), { 16: 0x86, 17: 0xdd });
    const opcode9 = Object.assign(KERNEL_ARP_REQUEST.slice(), { 21: 9 });
    for (const frame of [ipv6Arp, opcode9, KERNEL_ARP_REQUEST.subarray(0, 41), KERNEL_ARP_REQUEST.subarray(0, 10)]) {
      expect(handleArpFrame(frame, linkB('198.51.100.11')).kind).toBe('malformed');
    }
  });
});

describe('every length is checked', () => {
  test('any truncation or random corruption of a valid frame is answered, ignored or malformed; nothing throws', () => {
    let seed = 1;
    const random = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32);
    const frames = [KERNEL_NS, KERNEL_NA, KERNEL_DAD_NS, KERNEL_ARP_REQUEST, KERNEL_ARP_REPLY];
    const kinds = new Set<string>();
    for (const valid of frames) {
      const handle = valid[12] === ETHERTYPE_ARP >> 8 && valid[13] === (ETHERTYPE_ARP & 0xff) ? handleArpFrame : handleNdpFrame;
      const link = linkB('2001:db8::b', '198.51.100.11', 'fe80::ff:fe00:a');
      for (let length = 0; length <= valid.length; length++) kinds.add(handle(valid.subarray(0, length), link).kind);
      for (let i = 0; i < 2000; i++) {
        const frame = valid.slice();
        for (let flips = 1 + Math.floor(random() * 4); flips > 0; flips--) frame[Math.floor(random() * frame.length)] = Math.floor(random() * 256);
        kinds.add(handle(frame, link).kind);
      }
    }
    expect([...kinds].sort()).toEqual(['answer', 'claim', 'ignored', 'malformed', 'martian']);
  });
});
