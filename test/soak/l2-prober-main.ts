/**
 * The soak's L2 prober, run in the L2 lab's client namespace (`ip netns exec`): every PERIOD_MS
 * one ARP request (IPv4) or Neighbor Solicitation (IPv6) for each ADDRESS, real frames on IFACE,
 * and which MACs answered each of those probes, one JSON line per probe round on stdout:
 *
 *   {"r":ROUND,"t":SENT_AT_MS,"a":{"198.51.100.240":["02:00:5e:01:00:0b"],...}}
 *
 * `bun l2-prober-main.ts IFACE PERIOD_MS ADDRESS...`
 *
 * ARP and NDP carry no probe id, so the probe's sender address says which round it was: round r
 * is sent from 198.51.100.(90 + r mod 8) or 2001:db8:1::(90 + r mod 8) (hex), addresses nobody
 * on the lab's LAN has, and an answer goes back to the sender it names. An answer counts for the
 * round whose slot it names, however late it comes until the slot is used again (8 periods), so
 * "two MACs in one round" means two stations answered the same probe, never one station and a
 * late echo of the previous holder mistaken for the same probe. A round is printed when its slot
 * comes round again. Gratuitous ARPs and unsolicited advertisements (a takeover's announcements)
 * name no slot and are not answers.
 */
import { ARP_REPLY, ARP_REQUEST, parseArp, serializeArp } from '../../src/net/l2/arp.ts';
import { BROADCAST_MAC, ETHERTYPE_ARP, ETHERTYPE_IPV6, ZERO_MAC, buildEthernet, formatMac, parseEthernet } from '../../src/net/l2/ethernet.ts';
import { ICMPV6_NEIGHBOR_ADVERTISEMENT, neighborSolicitationFrame, parseNeighborMessage } from '../../src/net/l2/ndp.ts';
import { ETH_P_ARP, ETH_P_IPV6, PACKET_OUTGOING, PacketSocket } from '../../src/net/l2/packet-socket.ts';
import { formatIP, ipFromBytes, ipToBytes, parseIP } from '../../src/net/ip.ts';

const SLOTS = 8;
const [iface, periodText, ...addresses] = process.argv.slice(2);
const period = Number(periodText);
if (!iface || !Number.isFinite(period) || period < 10 || !addresses.length) {
  console.error('usage: l2-prober-main.ts IFACE PERIOD_MS ADDRESS...');
  process.exit(2);
}
const targets = addresses.map((text) => {
  const ip = parseIP(text);
  if (!ip) {
    console.error(`not an IP address: ${JSON.stringify(text)}`);
    process.exit(2);
  }
  return { text: formatIP(ip), ip, bytes: ipToBytes(ip) };
});

const senderV4 = (slot: number) => ipToBytes(parseIP(`198.51.100.${90 + slot}`)!);
const senderV6 = (slot: number) => ipToBytes(parseIP(`2001:db8:1::${90 + slot}`)!);
const slotOfV4 = new Map(Array.from({ length: SLOTS }, (_, s) => [formatIP(parseIP(`198.51.100.${90 + s}`)!), s]));
const slotOfV6 = new Map(Array.from({ length: SLOTS }, (_, s) => [formatIP(parseIP(`2001:db8:1::${90 + s}`)!), s]));

const arp = PacketSocket.open(iface, ETH_P_ARP);
const ipv6 = PacketSocket.open(iface, ETH_P_IPV6);
const mac = arp.mac();

/** Each slot's round: its number, when it was sent, and the MACs that answered per address. */
const slots: { round: number; sentAt: number; answers: Map<string, Set<string>> }[] = [];
let round = 0;

function frameFor(target: (typeof targets)[number], slot: number): Uint8Array {
  if (target.ip.family === 6) return neighborSolicitationFrame(target.bytes, mac, senderV6(slot));
  const request = serializeArp({ operation: ARP_REQUEST, senderMac: mac, senderIp: senderV4(slot), targetMac: ZERO_MAC, targetIp: target.bytes });
  return buildEthernet(BROADCAST_MAC, mac, ETHERTYPE_ARP, request);
}

function sendRound(): void {
  const slot = round % SLOTS;
  const previous = slots[slot];
  if (previous) print(previous);
  slots[slot] = { round, sentAt: Date.now(), answers: new Map(targets.map((t) => [t.text, new Set<string>()])) };
  for (const target of targets) {
    try {
      (target.ip.family === 6 ? ipv6 : arp).send(frameFor(target, slot));
    } catch (e) {
      console.error(`probe of ${target.text} not sent: ${e instanceof Error ? e.message : String(e)}`);
    }
  }
  round++;
}

function print(r: (typeof slots)[number]): void {
  const a: Record<string, string[]> = {};
  for (const [address, macs] of r.answers) a[address] = [...macs].sort();
  process.stdout.write(`${JSON.stringify({ r: r.round, t: r.sentAt, a })}\n`);
}

function note(slot: number | undefined, address: string, answerer: Uint8Array): void {
  if (slot === undefined) return;
  slots[slot]?.answers.get(address)?.add(formatMac(answerer));
}

const buffer = new Uint8Array(2048);
function drain(): void {
  for (let f = arp.receive(buffer); f; f = arp.receive(buffer)) {
    if (f.packetType === PACKET_OUTGOING) continue;
    const frame = parseEthernet(buffer.subarray(0, f.length));
    if (!frame || frame.etherType !== ETHERTYPE_ARP) continue;
    const parsed = parseArp(frame.payload);
    if (!parsed.ok || parsed.packet.operation !== ARP_REPLY) continue;
    const p = parsed.packet;
    note(slotOfV4.get(text(p.targetIp)), text(p.senderIp), p.senderMac);
  }
  for (let f = ipv6.receive(buffer); f; f = ipv6.receive(buffer)) {
    if (f.packetType === PACKET_OUTGOING) continue;
    const frame = parseEthernet(buffer.subarray(0, f.length));
    if (!frame || frame.etherType !== ETHERTYPE_IPV6) continue;
    const parsed = parseNeighborMessage(frame.payload);
    if (!parsed.ok || parsed.message.type !== ICMPV6_NEIGHBOR_ADVERTISEMENT) continue;
    const m = parsed.message;
    note(slotOfV6.get(text(m.destination)), text(m.target), m.linkLayerAddress ?? frame.source);
  }
}

function text(bytes: Uint8Array): string {
  const ip = ipFromBytes(bytes);
  return ip ? formatIP(ip) : '';
}

setInterval(sendRound, period);
// Frames are read every few ms (the sockets are non-blocking): an answer is timed to the round it names anyway.
setInterval(drain, 5);
const stop = () => {
  arp.close();
  ipv6.close();
  process.exit(0);
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
sendRound();
