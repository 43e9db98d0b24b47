/**
 * Asks for one address every INTERVAL ms from INTERFACE, and prints one JSON line per probe:
 * {"i": n, "t": Date.now() when sent, "macs": [MACs whose answer reached us before the next
 * probe]}. IPv4: a raw ARP request; only ARP replies addressed to this station count (unicast,
 * target = our address): a takeover's gratuitous ARP (broadcast) is no answer. IPv6: a Neighbor
 * Solicitation from OUR_ADDRESS (with our link-layer address, as a host resolving it sends);
 * only solicited Neighbor Advertisements sent to our MAC count: a takeover's unsolicited
 * advertisement (to all nodes) is no answer. Runs until SIGTERM.
 * `bun arp-prober-main.ts INTERFACE OUR_ADDRESS ADDRESS INTERVAL_MS` (both of one family), inside a namespace.
 */
import { ipToBytes, parseIP } from '../../src/net/ip.ts';
import { ARP_REPLY, ARP_REQUEST, parseArp, serializeArp } from '../../src/net/l2/arp.ts';
import { BROADCAST_MAC, ETHERTYPE_ARP, ZERO_MAC, buildEthernet, type EthernetFrame, formatMac, macEquals, parseEthernet } from '../../src/net/l2/ethernet.ts';
import { ICMPV6_NEIGHBOR_ADVERTISEMENT, neighborSolicitationFrame, parseNeighborMessage } from '../../src/net/l2/ndp.ts';
import { ETH_P_ARP, ETH_P_IPV6, PACKET_OUTGOING, PacketSocket } from '../../src/net/l2/packet-socket.ts';
import { NEIGHBOR_DISCOVERY_FILTER } from '../../src/net/l2/responder.ts';

const [iface, oursText, addressText, intervalText] = process.argv.slice(2);
const intervalMs = Number(intervalText);
const ours = parseIP(oursText ?? '');
const address = parseIP(addressText ?? '');
if (!iface || !ours || !address || ours.family !== address.family || !(intervalMs > 0)) {
  console.error('usage: arp-prober-main.ts INTERFACE OUR_ADDRESS ADDRESS INTERVAL_MS');
  process.exit(2);
}
const v6 = address.family === 6;
const target = ipToBytes(address);
const socket = v6 ? PacketSocket.open(iface, ETH_P_IPV6, NEIGHBOR_DISCOVERY_FILTER) : PacketSocket.open(iface, ETH_P_ARP);
const mac = socket.mac();
const request = v6
  ? neighborSolicitationFrame(target, mac, ipToBytes(ours))
  : buildEthernet(BROADCAST_MAC, mac, ETHERTYPE_ARP, serializeArp({ operation: ARP_REQUEST, senderMac: mac, senderIp: ipToBytes(ours), targetMac: ZERO_MAC, targetIp: target }));
const buffer = new Uint8Array(2048);
let stopping = false;
process.on('SIGTERM', () => (stopping = true));

/** The MAC a frame addressed to us answers for the address with, if it is an answer. */
function answerer(frame: EthernetFrame): string | undefined {
  const { payload } = frame;
  if (v6) {
    const nd = parseNeighborMessage(payload);
    if (!nd.ok || nd.message.type !== ICMPV6_NEIGHBOR_ADVERTISEMENT || !nd.message.solicited || !macEquals(nd.message.target, target)) return undefined;
    return formatMac(nd.message.linkLayerAddress ?? frame.source);
  }
  const arp = parseArp(payload);
  if (!arp.ok || arp.packet.operation !== ARP_REPLY || !macEquals(arp.packet.senderIp, target)) return undefined;
  return formatMac(arp.packet.senderMac);
}

function drain(into: Set<string>): void {
  for (let got = socket.receive(buffer); got; got = socket.receive(buffer)) {
    if (got.packetType === PACKET_OUTGOING) continue;
    const frame = parseEthernet(buffer.subarray(0, got.length));
    if (!frame || !macEquals(frame.destination, mac)) continue;
    const answeredBy = answerer(frame);
    if (answeredBy) into.add(answeredBy);
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
