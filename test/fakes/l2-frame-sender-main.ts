/**
 * Sends raw Ethernet frames out of an interface, for tests that need frames no tool sends
 * (malformed ARP and Neighbor Solicitations): `bun l2-frame-sender-main.ts IFACE HEX...`, run
 * inside a namespace with `ip netns exec`. Prints the interface's MAC, then exits.
 */
import { formatMac } from '../../src/net/l2/ethernet.ts';
import { ETH_P_ARP, PacketSocket } from '../../src/net/l2/packet-socket.ts';

const [iface, ...frames] = process.argv.slice(2);
if (!iface) {
  console.error('usage: l2-frame-sender-main.ts INTERFACE HEXFRAME...');
  process.exit(2);
}
const socket = PacketSocket.open(iface, ETH_P_ARP);
try {
  for (const frame of frames) socket.send(Uint8Array.from(Buffer.from(frame, 'hex')));
  console.log(formatMac(socket.mac()));
} finally {
  socket.close();
}
