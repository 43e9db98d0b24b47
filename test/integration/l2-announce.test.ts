import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { ipToBytes, parseIP } from '../../src/net/ip.ts';
import { electNode } from '../../src/net/l2/election.ts';
import { ARP_REQUEST, serializeArp } from '../../src/net/l2/arp.ts';
import { BROADCAST_MAC, ETHERTYPE_ARP, ZERO_MAC, buildEthernet, parseMac } from '../../src/net/l2/ethernet.ts';
import { icmpv6Checksum, neighborSolicitationFrame } from '../../src/net/l2/ndp.ts';
import { MALFORMED_REASONS, MARTIAN_REASONS, type MalformedReason } from '../../src/net/l2/refusals.ts';
import { eventually } from '../harness/eventually.ts';
import { L2Lab, failoverGap, NODES, SERVICE_IPV4, SERVICE_IPV6, SIDE_IPV4, SIDE_IPV6, UNASSIGNED_IPV4, UNASSIGNED_IPV6, type Attempt, type NodeName } from '../harness/l2-lab.ts';
import { ResponderChild } from '../harness/l2-responder.ts';
import { sendRawFrames, arpFrame } from '../harness/raw-frames.ts';
import { mustRun } from '../harness/netns.ts';

/**
 * The L2 responder with real frames: three nodes and a client on one bridge (l2-lab.ts), one
 * responder per node in its namespace. The test plays the part of the speaker's control loop:
 * it elects an owner per address with electNode over the live nodes and tells each responder
 * what to announce. Answers are observed with the client's own arping, ndisc6 and curl.
 */
const LAN_ADDRESSES = [SERVICE_IPV4, SERVICE_IPV6];
const SIDE_ADDRESSES = [SIDE_IPV4, SIDE_IPV6];
/** arping and ndisc6 wait a second per probe, and a failover takes a few: room for a loaded machine. */
const TEST_TIMEOUT_MS = 120_000;

let site: L2Lab;
const responders = new Map<NodeName, ResponderChild>();
const alive = new Set<NodeName>(NODES);

beforeAll(async () => {
  site = await L2Lab.build();
  for (const node of NODES) responders.set(node, await ResponderChild.start(site.lab, node));
}, 120_000);

afterAll(async () => {
  await site?.destroy();
});

const owner = (address: string) => electNode(address, alive) as NodeName;
const responder = (node: NodeName) => responders.get(node)!;
const macOf = (node: NodeName) => site.nodes[node].lanMac;

/** Each live node announces what it is elected for: LAN addresses on eth0, side addresses on eth1. */
async function announceElected(): Promise<void> {
  for (const node of alive) {
    const problems = await responder(node).announce({
      eth0: LAN_ADDRESSES.filter((a) => owner(a) === node),
      eth1: SIDE_ADDRESSES.filter((a) => owner(a) === node),
    });
    expect(problems).toEqual([]);
  }
  for (const node of alive) await responder(node).settled();
}

async function answersFor(address: string): Promise<Record<string, number>> {
  const result: Record<string, number> = {};
  for (const node of alive) result[node] = (await responder(node).stats()).stats.answers[address] ?? 0;
  return result;
}

describe('answering', () => {
  test("the client's ARP request is answered by the elected node alone, with its MAC", async () => {
    await announceElected();
    const before = await answersFor(SERVICE_IPV4);
    expect(await site.arpAnswers(SERVICE_IPV4)).toEqual([macOf(owner(SERVICE_IPV4))]);
    const after = await answersFor(SERVICE_IPV4);
    for (const node of alive) expect(after[node]! - before[node]!).toBe(node === owner(SERVICE_IPV4) ? 1 : 0);
  }, TEST_TIMEOUT_MS);

  test("the client's Neighbor Solicitation is answered by the elected node alone, which the switch forwards it to after MLD", async () => {
    await announceElected();
    expect(await site.ndpAnswers(SERVICE_IPV6)).toEqual([macOf(owner(SERVICE_IPV6))]);
    // The responder joined the solicited-node group through the kernel, which reported it: the
    // snooping bridge lists the group on the elected node's port.
    const mdb = await mustRun(['bridge', '-n', site.lab.ns('sw'), 'mdb', 'show', 'dev', 'lan']);
    expect(mdb).toContain(`port ${owner(SERVICE_IPV6)}-lan grp ff02::1:ff00:200`);
  }, TEST_TIMEOUT_MS);

  test('curl from the client reaches the listener on the elected node, over IPv4 and IPv6', async () => {
    await announceElected();
    expect(await site.fetchFromClient(SERVICE_IPV4)).toBe(owner(SERVICE_IPV4));
    expect(await site.fetchFromClient(SERVICE_IPV6)).toBe(owner(SERVICE_IPV6));
  }, TEST_TIMEOUT_MS);

  test('the probes see every answer: a second node announcing the same addresses is heard as a duplicate', async () => {
    await announceElected();
    const extra4 = NODES.find((n) => n !== owner(SERVICE_IPV4))!;
    const extra6 = NODES.find((n) => n !== owner(SERVICE_IPV6))!;
    try {
      await responder(extra4).announce({ eth0: LAN_ADDRESSES.filter((a) => owner(a) === extra4).concat(SERVICE_IPV4) });
      await responder(extra4).settled();
      expect((await site.arpAnswers(SERVICE_IPV4)).sort()).toEqual([macOf(owner(SERVICE_IPV4)), macOf(extra4)].sort());
      await announceElected();
      await responder(extra6).announce({ eth0: LAN_ADDRESSES.filter((a) => owner(a) === extra6).concat(SERVICE_IPV6) });
      await responder(extra6).settled();
      expect((await site.ndpAnswers(SERVICE_IPV6)).sort()).toEqual([macOf(owner(SERVICE_IPV6)), macOf(extra6)].sort());
    } finally {
      await announceElected();
      // The client learnt the extra node's MAC from its answers: forget it, as the owner did not change.
      await site.flushClientNeighbours();
    }
  }, TEST_TIMEOUT_MS);
});

describe('bad tables', () => {
  test('an unknown or non-Ethernet interface and a bad address are reported; the rest is announced', async () => {
    await announceElected();
    const node = owner(SERVICE_IPV4);
    try {
      const problems = await responder(node).announce({
        eth0: LAN_ADDRESSES.filter((a) => owner(a) === node).concat('198.51.100.300'),
        nope0: [UNASSIGNED_IPV4],
        lo: [UNASSIGNED_IPV4],
      });
      expect(problems.map((p) => `${p.interface}: ${p.message}`).sort()).toEqual([
        'eth0: "198.51.100.300" is not an IP address',
        'lo: cannot announce on lo: interface lo is not Ethernet (ARP hardware type 772)',
        'nope0: cannot announce on nope0: interface "nope0": No such device (errno 19)',
      ]);
      expect((await responder(node).stats()).announcements).toEqual({ eth0: LAN_ADDRESSES.filter((a) => owner(a) === node) });
      expect(await site.arpAnswers(SERVICE_IPV4)).toEqual([macOf(node)]);
    } finally {
      await announceElected();
    }
  }, TEST_TIMEOUT_MS);
});

describe('takeover', () => {
  test("moves the client's neighbour entry to the new owner without the client asking (gratuitous ARP, unsolicited NA)", async () => {
    await announceElected();
    for (const address of LAN_ADDRESSES) {
      const from = owner(address);
      const to = NODES.find((n) => n !== from)!;
      expect(await site.fetchFromClient(address)).toBe(from);
      expect(await site.clientNeighbour(address)).toBe(macOf(from));
      try {
        // No traffic from the client from here on: its entry can only change by what it is sent.
        await responder(from).announce({ eth0: LAN_ADDRESSES.filter((a) => a !== address && owner(a) === from) });
        await responder(to).announce({ eth0: LAN_ADDRESSES.filter((a) => owner(a) === to).concat(address) });
        await eventually(`the client's neighbour entry for ${address} moving to ${to}`, async () => (await site.clientNeighbour(address)) === macOf(to), 30_000);
      } finally {
        await announceElected();
      }
    }
  }, TEST_TIMEOUT_MS);
});

describe('silence', () => {
  test('no answer for an address nobody was given', async () => {
    await announceElected();
    expect(await site.arpAnswers(UNASSIGNED_IPV4)).toEqual([]);
    expect(await site.ndpAnswers(UNASSIGNED_IPV6)).toEqual([]);
  }, TEST_TIMEOUT_MS);

  test('no answer on an interface the address is not listed for, though the responder listens there', async () => {
    await announceElected();
    // The side addresses are answered on eth1 (so some responder reads eth1's frames)...
    expect(await site.arpAnswers(SIDE_IPV4, 'eth1')).toEqual([site.nodes[owner(SIDE_IPV4)].sideMac]);
    expect(await site.ndpAnswers(SIDE_IPV6, 'eth1')).toEqual([site.nodes[owner(SIDE_IPV6)].sideMac]);
    // ...but the service addresses, listed for eth0 only, are not.
    expect(await site.arpAnswers(SERVICE_IPV4, 'eth1')).toEqual([]);
    expect(await site.ndpAnswers(SERVICE_IPV6, 'eth1')).toEqual([]);
  }, TEST_TIMEOUT_MS);

  test('an address taken away is not answered any more', async () => {
    await announceElected();
    const node4 = owner(SERVICE_IPV4);
    const node6 = owner(SERVICE_IPV6);
    try {
      await responder(node4).announce({ eth0: [], eth1: SIDE_ADDRESSES.filter((a) => owner(a) === node4) });
      await responder(node6).announce({ eth0: [], eth1: SIDE_ADDRESSES.filter((a) => owner(a) === node6) });
      expect(await site.arpAnswers(SERVICE_IPV4)).toEqual([]);
      expect(await site.ndpAnswers(SERVICE_IPV6)).toEqual([]);
    } finally {
      await announceElected();
    }
    expect(await site.arpAnswers(SERVICE_IPV4)).toEqual([macOf(node4)]);
  }, TEST_TIMEOUT_MS);
});

describe('the ARP filter', () => {
  test('follows its socket: the IPv4 address taken away (an IPv6-only table) and given back, ARP about others again rings nothing', async () => {
    await announceElected();
    const node = owner(SERVICE_IPV4);
    try {
      // No IPv4 address on eth0 and not standby: its ARP socket is closed; then a new one is opened.
      expect(await responder(node).announce({ eth0: [SERVICE_IPV6] })).toEqual([]);
      expect(await responder(node).announce({ eth0: [SERVICE_IPV4] })).toEqual([]);
      await responder(node).settled();
      const before = (await responder(node).stats()).stats;
      const clientMac = parseMac(site.client.lanMac)!;
      await sendRawFrames(site.lab, 'client', 'eth0', Array.from({ length: 10 }, (_, i) => arpFrame({ mac: clientMac, sender: site.client.lanIPv4, target: `198.51.100.${150 + i}` })));
      await Bun.sleep(500);
      expect((await responder(node).stats()).stats.rings).toBe(before.rings);
      expect(await site.arpAnswers(SERVICE_IPV4)).toEqual([macOf(node)]);
    } finally {
      await announceElected();
    }
  }, TEST_TIMEOUT_MS);
});

describe('malformed frames', () => {
  test('are counted and never answered, and answering goes on', async () => {
    await announceElected();
    const clientMac = parseMac(site.client.lanMac)!;
    const clientLinkLocal = ipToBytes(parseIP('fe80::ff:fe00:99')!);
    const request = serializeArp({ operation: ARP_REQUEST, senderMac: clientMac, senderIp: ipToBytes(parseIP(site.client.lanIPv4)!), targetMac: ZERO_MAC, targetIp: ipToBytes(parseIP(SERVICE_IPV4)!) });
    const arpHeader = buildEthernet(BROADCAST_MAC, clientMac, ETHERTYPE_ARP, new Uint8Array()).subarray(0, 14);
    const solicitation = () => neighborSolicitationFrame(ipToBytes(parseIP(SERVICE_IPV6)!), clientMac, clientLinkLocal);
    const withChecksum = (frame: Uint8Array) => {
      frame[56] = frame[57] = 0;
      const sum = icmpv6Checksum(frame.subarray(22, 38), frame.subarray(38, 54), frame.subarray(54, 54 + ((frame[18]! << 8) | frame[19]!)));
      frame[56] = sum >> 8;
      frame[57] = sum & 0xff;
      return frame;
    };
    // Keyed by the reason each is counted under.
    const junk: Partial<Record<MalformedReason, Uint8Array>> = {
      // A veth does not pad, so a short ARP frame arrives as short as it was sent.
      'arp-short': Buffer.concat([arpHeader, request.subarray(0, 10)]),
      'arp-not-ethernet-ipv4': Buffer.concat([arpHeader, Object.assign(request.slice(), { 2: 0x86, 3: 0xdd })]),
      'arp-operation': Buffer.concat([arpHeader, Object.assign(request.slice(), { 7: 9 })]),
      'ndp-checksum': Object.assign(solicitation(), { 57: solicitation()[57]! ^ 0xff }),
      'ndp-hop-limit': Object.assign(solicitation(), { 21: 64 }),
      'ndp-option': withChecksum(Object.assign(solicitation(), { 79: 0 })),
    };
    const node4 = owner(SERVICE_IPV4);
    const node6 = owner(SERVICE_IPV6);
    const before4 = (await responder(node4).stats()).stats;
    const before6 = (await responder(node6).stats()).stats;
    await sendRawFrames(site.lab, 'client', 'eth0', Object.values(junk));
    const reasonsSeen = async (node: NodeName, names: string[]) => {
      const counts = (await responder(node).stats()).stats.malformedReasons;
      const before = node === node4 ? before4 : before6;
      return names.every((name) => counts[name as MalformedReason] > before.malformedReasons[name as MalformedReason]);
    };
    await eventually('the owners counting every junk frame as malformed', async () =>
      (await reasonsSeen(node4, Object.keys(junk).slice(0, 3))) && reasonsSeen(node6, Object.keys(junk).slice(3)),
    );
    const after4 = (await responder(node4).stats()).stats;
    const after6 = (await responder(node6).stats()).stats;
    expect(after4.answers[SERVICE_IPV4]).toBe(before4.answers[SERVICE_IPV4]!);
    expect(after6.answers[SERVICE_IPV6]).toBe(before6.answers[SERVICE_IPV6]!);
    expect(after4.malformedFrames - before4.malformedFrames).toBeGreaterThanOrEqual(3);
    expect(after6.malformedFrames - before6.malformedFrames).toBeGreaterThanOrEqual(3);
    // The responders are alive and still answer.
    expect(await site.arpAnswers(SERVICE_IPV4)).toEqual([macOf(node4)]);
    expect(await site.ndpAnswers(SERVICE_IPV6)).toEqual([macOf(node6)]);
  }, TEST_TIMEOUT_MS);

  test("requests from martian senders are not answered, and a flood of the issue's frame, each one different, leaves the counters' shape as it was", async () => {
    await announceElected();
    const clientMac = parseMac(site.client.lanMac)!;
    const clientIp = ipToBytes(parseIP(site.client.lanIPv4)!);
    const target = ipToBytes(parseIP(SERVICE_IPV6)!);
    const arpRequest = (senderMac: Uint8Array, senderIp: Uint8Array) =>
      buildEthernet(BROADCAST_MAC, clientMac, ETHERTYPE_ARP, serializeArp({ operation: ARP_REQUEST, senderMac, senderIp, targetMac: ZERO_MAC, targetIp: ipToBytes(parseIP(SERVICE_IPV4)!) }));
    const solicitationFrom = (source: string) => neighborSolicitationFrame(target, clientMac, ipToBytes(parseIP(source)!));
    const withLinkLayer = (mac: string) => {
      const frame = neighborSolicitationFrame(target, clientMac, ipToBytes(parseIP('fe80::ff:fe00:99')!));
      frame.set(parseMac(mac)!, 80); // the source link-layer address option, which the answer would go to
      frame[56] = frame[57] = 0;
      const sum = icmpv6Checksum(frame.subarray(22, 38), frame.subarray(38, 54), frame.subarray(54, 86));
      frame[56] = sum >> 8;
      frame[57] = sum & 0xff;
      return frame;
    };
    const martians4 = [
      arpRequest(BROADCAST_MAC, clientIp),
      arpRequest(ZERO_MAC, clientIp),
      arpRequest(parseMac('01:00:5e:00:00:01')!, clientIp),
      ...['224.0.0.1', '255.255.255.255', '127.0.0.1', '0.0.0.9'].map((ip) => arpRequest(clientMac, ipToBytes(parseIP(ip)!))),
    ];
    const martians6 = [solicitationFrom('ff02::1'), solicitationFrom('::1'), withLinkLayer('33:33:00:00:00:01'), withLinkLayer('00:00:00:00:00:00')];
    // The issue's 60-byte frame (ARP with hardware and protocol type 0), its four type and length
    // bytes made different in each copy: before the fix, each made a key of its own.
    const issueFrame = Uint8Array.from(Buffer.from('ffffffffffff02000000000908060000000006040001020000000009c6336414000000000000c633640a000000000000000000000000000000000000', 'hex'));
    const flood = Array.from({ length: 500 }, (_, i) => Object.assign(issueFrame.slice(), { 14: i >> 8, 15: i & 0xff, 16: (i * 7) & 0xff, 17: (i * 13) & 0xff }));
    const ROUNDS = 4;
    const node4 = owner(SERVICE_IPV4);
    const node6 = owner(SERVICE_IPV6);
    const before4 = (await responder(node4).stats()).stats;
    const before6 = (await responder(node6).stats()).stats;
    const send = (frames: Uint8Array[]) => sendRawFrames(site.lab, 'client', 'eth0', frames, { repeat: ROUNDS, timeoutMs: 60_000 });
    const martianCount = (s: typeof before4) => Object.values(s.martianReasons).reduce((a, b) => a + b, 0);
    // The martians first, few enough that none is dropped; each node reads every broadcast, the
    // solicitations reach the IPv6 owner (the switch snoops MLD).
    await send([...martians4, ...martians6]);
    await eventually('the owners counting every martian', async () => {
      const s4 = (await responder(node4).stats()).stats;
      const s6 = (await responder(node6).stats()).stats;
      return martianCount(s4) - martianCount(before4) >= martians4.length * ROUNDS && martianCount(s6) - martianCount(before6) >= martians6.length * ROUNDS;
    });
    // Then the flood: a loaded machine may drop some of 2,000 frames from the receiver's socket
    // buffer, so wait until the count has settled (and is not zero) rather than for every frame.
    await send(flood);
    let last = -1;
    await eventually('the flood counted, the count settled', async () => {
      const counted = (await responder(node4).stats()).stats.malformedFrames - before4.malformedFrames;
      const settled = counted > 0 && counted === last;
      last = counted;
      if (!settled) await Bun.sleep(1000);
      return settled;
    });
    const after4 = (await responder(node4).stats()).stats;
    const after6 = (await responder(node6).stats()).stats;
    // Not one answered.
    expect(after4.answers).toEqual(before4.answers);
    expect(after6.answers).toEqual(before6.answers);
    expect(after4.martianReasons['arp-sender-mac'] - before4.martianReasons['arp-sender-mac']).toBe(3 * ROUNDS);
    expect(after4.martianReasons['arp-sender-ip'] - before4.martianReasons['arp-sender-ip']).toBe(4 * ROUNDS);
    expect(after6.martianReasons['ipv6-source'] - before6.martianReasons['ipv6-source']).toBe(2 * ROUNDS);
    expect(after6.martianReasons['ndp-sender-mac'] - before6.martianReasons['ndp-sender-mac']).toBe(2 * ROUNDS);
    // Every flood frame that was read counted under its one fixed reason.
    expect(after4.malformedReasons['arp-not-ethernet-ipv4'] - before4.malformedReasons['arp-not-ethernet-ipv4']).toBe(after4.malformedFrames - before4.malformedFrames);
    // No growth: the same keys as before the flood, the fixed sets and nothing else.
    for (const [before, after] of [[before4, after4], [before6, after6]] as const) {
      expect(Object.keys(after.malformedReasons)).toEqual([...MALFORMED_REASONS]);
      expect(Object.keys(after.martianReasons)).toEqual([...MARTIAN_REASONS]);
      expect(Object.keys(after.answers)).toEqual(Object.keys(before.answers));
      expect(Object.keys(after.claims)).toEqual(Object.keys(before.claims));
    }
    // Still answering.
    expect(await site.arpAnswers(SERVICE_IPV4)).toEqual([macOf(node4)]);
    expect(await site.ndpAnswers(SERVICE_IPV6)).toEqual([macOf(node6)]);
  }, TEST_TIMEOUT_MS);
});

describe('failover', () => {
  for (const address of [SERVICE_IPV4, SERVICE_IPV6]) {
    test(`the node announcing ${address} fails: another node takes over with gratuitous frames and the client reaches it again`, async () => {
      await announceElected();
      const failed = owner(address);
      const others = LAN_ADDRESSES.filter((a) => owner(a) !== failed);
      const next = electNode(address, [...alive].filter((n) => n !== failed)) as NodeName;
      expect(next).toBeDefined();
      const attempts: Attempt[] = [];
      const loop = site.requestUntil(address, next, attempts, 200);
      await eventually(`two answers from ${failed} before it fails`, () => attempts.filter((a) => a.node === failed).length >= 2);

      // The node dies: its responder SIGKILLed, its link gone from the switch. The test, standing
      // in for liveness detection, sees the exit, re-elects and tells the new owner at once.
      await responder(failed).kill();
      await site.lab.ip(failed, 'link', 'set', 'eth0', 'down');
      alive.delete(failed);
      const takeoversBefore = (await responder(next).stats()).stats.takeovers[address] ?? 0;
      const takeoverAt = performance.now();
      await announceElected();
      await loop;

      const gap = failoverGap(attempts, next);
      const afterTakeover = Math.round(attempts.find((a) => a.node === next)!.end - takeoverAt);
      console.log(
        `l2 failover ${address}: ${failed} -> ${next}, gap ${gap} ms from first failed to first good request, ` +
          `${afterTakeover} ms from takeover to first good; ${attempts.length} requests, ${attempts.filter((a) => !a.node).length} failed`,
      );
      expect(owner(address)).toBe(next);
      expect((await responder(next).stats()).stats.takeovers[address]).toBe(takeoversBefore + 1);
      const family = address.includes(':') ? 'ndpAnswers' : 'arpAnswers';
      expect(await site[family](address)).toEqual([macOf(next)]);
      expect(await site.clientNeighbour(address)).toBe(macOf(next));
      // Addresses the failed node did not hold stayed where they were.
      for (const other of others) expect(await site.fetchFromClient(other)).toBe(owner(other));
    }, TEST_TIMEOUT_MS);
  }
});
