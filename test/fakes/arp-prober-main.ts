/**
 * Asks for one IPv4 address every INTERVAL ms from INTERFACE with a raw ARP request, and prints
 * one JSON line per probe: {"i": n, "t": Date.now() when sent, "macs": [MACs whose ARP reply
 * reached us before the next probe]}. Only replies addressed to this station count (unicast,
 * target = our address): a takeover's gratuitous ARP (broadcast) is no answer. Runs until
 * SIGTERM. `bun arp-prober-main.ts INTERFACE OUR_IPV4 ADDRESS INTERVAL_MS`, inside a namespace.
 */
import { ARP_REPLY, ARP_REQUEST, parseArp, serializeArp } from '../../src/net/l2/arp.ts';
import { BROADCAST_MAC, ETHERTYPE_ARP, ZERO_MAC, buildEthernet, formatMac, macEquals, parseEthernet } from '../../src/net/l2/ethernet.ts';
import { ETH_P_ARP, PACKET_OUTGOING, PacketSocket } from '../../src/net/l2/packet-socket.ts';

const [iface, ours, address, intervalText] = process.argv.slice(2);
const intervalMs = Number(intervalText);
if (!iface || !ours || !address || !(intervalMs > 0)) {
  console.error('usage: arp-prober-main.ts INTERFACE OUR_IPV4 ADDRESS INTERVAL_MS');
  process.exit(2);
}
const v4 = (text: string) => Uint8Array.from(text.split('.').map(Number));
const socket = PacketSocket.open(iface, ETH_P_ARP);
const mac = socket.mac();
const request = buildEthernet(BROADCAST_MAC, mac, ETHERTYPE_ARP, serializeArp({ operation: ARP_REQUEST, senderMac: mac, senderIp: v4(ours), targetMac: ZERO_MAC, targetIp: v4(address) }));
const target = v4(address);
const buffer = new Uint8Array(2048);
let stopping = false;
process.on('SIGTERM', () => (stopping = true));

function drain(into: Set<string>): void {
  for (let got = socket.receive(buffer); got; got = socket.receive(buffer)) {
    if (got.packetType === PACKET_OUTGOING) continue;
    const frame = parseEthernet(buffer.subarray(0, got.length));
    if (!frame || !macEquals(frame.destination, mac)) continue;
    const arp = parseArp(frame.payload);
    if (!arp.ok || arp.packet.operation !== ARP_REPLY || !macEquals(arp.packet.senderIp, target)) continue;
    into.add(formatMac(arp.packet.senderMac));
  }
}

drain(new Set());
for (let i = 0; !stopping; i++) {
  const t = Date.now();
  socket.send(request);
  const macs = new Set<string>();
  // A full interval for every probe's answers, even when this process was held up (no catching up: a probe with no time to be answered would count as unanswered).
  const next = performance.now() + intervalMs;
  while (performance.now() < next) {
    drain(macs);
    await Bun.sleep(2);
  }
  drain(macs);
  console.log(JSON.stringify({ i, t, macs: [...macs].sort() }));
}
socket.close();
