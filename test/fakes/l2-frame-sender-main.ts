/**
 * Sends raw Ethernet frames out of an interface, for tests that need frames no tool sends
 * (malformed ARP and Neighbor Solicitations, martian senders): `bun l2-frame-sender-main.ts IFACE
 * [--repeat=N] HEX...`, run inside a namespace with `ip netns exec`. With --repeat the list is
 * sent N times, paced (a pause every 50 frames) so that the receiver's socket buffer does not
 * overflow and every frame is read. Prints the interface's MAC and the frames sent, then exits.
 */
import { formatMac } from '../../src/net/l2/ethernet.ts';
import { ETH_P_ARP, PacketSocket } from '../../src/net/l2/packet-socket.ts';

const [iface, ...rest] = process.argv.slice(2);
const repeatArg = rest.find((a) => a.startsWith('--repeat='));
const frames = rest.filter((a) => !a.startsWith('--'));
const repeat = repeatArg ? Number(repeatArg.slice('--repeat='.length)) : 1;
if (!iface || !Number.isInteger(repeat) || repeat < 1) {
  console.error('usage: l2-frame-sender-main.ts INTERFACE [--repeat=N] HEXFRAME...');
  process.exit(2);
}
const socket = PacketSocket.open(iface, ETH_P_ARP);
let sent = 0;
try {
  const bytes = frames.map((frame) => Uint8Array.from(Buffer.from(frame, 'hex')));
  for (let round = 0; round < repeat; round++) {
    for (const frame of bytes) {
      socket.send(frame);
      if (++sent % 50 === 0 && repeat > 1) await Bun.sleep(5);
    }
  }
  console.log(formatMac(socket.mac()));
  console.log(`sent ${sent}`);
} finally {
  socket.close();
}
