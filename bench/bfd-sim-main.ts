/**
 * Many nodes' BFD in one process, for bench/bfd-scale.ts: `bun bfd-sim-main.ts PEER PORT INTERVAL_MS MULT LOCAL...`
 * opens one BFD session (src/net/bfd) from each LOCAL address to PEER and prints, every second,
 * how many are Up; a line on stdin ends it (AdminDown to all).
 */
import { BfdEndpoint } from '../src/net/bfd/endpoint.ts';
import { BfdState } from '../src/net/bfd/packet.ts';

const [peer, portText, intervalText, multText, ...locals] = process.argv.slice(2);
const timers = { desiredMinTxMs: Number(intervalText), requiredMinRxMs: Number(intervalText), detectMult: Number(multText) };
const endpoints: BfdEndpoint[] = [];
const sessions: Awaited<ReturnType<BfdEndpoint['addSession']>>[] = [];
// One endpoint per simulated node, as each node has: its receiving socket bound to its own address.
for (const local of locals) {
  const endpoint = await BfdEndpoint.open({ port: Number(portText), address: local });
  endpoints.push(endpoint);
  sessions.push(await endpoint.addSession(peer!, { local, timers }));
}
const timer = setInterval(() => console.log(`up ${sessions.filter((s) => s.state === BfdState.Up).length}`), 1000);
for await (const _ of Bun.stdin.stream()) break;
clearInterval(timer);
for (const e of endpoints) await e.close();
console.log('closed');
