/**
 * What a flood of malformed frames costs the L2 responder (issue 34): a host on the LAN sends the
 * issue's 60-byte ARP frame (hardware and protocol types varied, a new reason text per frame
 * before the fix) and IPv6 frames with a payload length beyond what arrived, at --rate frames a
 * second for --seconds. The responder, announcing one IPv4 and one IPv6 address on a veth in its
 * own network namespace, reports the CPU it spent (less the same time idle) per frame it counted,
 * and its memory before and after. Then the handlers alone, in this process: CPU per frame.
 *
 *   bun bench/l2-malformed-flood.ts [--seconds=10] [--rate=20000]
 */
import { handleArpFrame, handleNdpFrame, type LinkState } from '../src/net/l2/answer.ts';
import { parseMac } from '../src/net/l2/ethernet.ts';
import { neighborSolicitationFrame } from '../src/net/l2/ndp.ts';
import { ETH_P_ARP, PacketSocket } from '../src/net/l2/packet-socket.ts';
import { RefusalTally } from '../src/net/l2/refusals.ts';
import { L2Responder } from '../src/net/l2/responder.ts';
import { ipToBytes, parseIP } from '../src/net/ip.ts';
import { NetnsLab, requireRoot } from '../test/harness/netns.ts';
import { heapStats } from 'bun:jsc';

const args = Object.fromEntries(process.argv.slice(2).filter((a) => a.startsWith('--') && a.includes('=')).map((a) => a.slice(2).split('=') as [string, string]));
const seconds = Number(args.seconds ?? 10);
const rate = Number(args.rate ?? 20_000);
/** Set for the children only: they never build a lab of their own. */
const CHILD_ENV = 'EDGE_CCM_L2_FLOOD_CHILD';
const ISSUE_FRAME = Uint8Array.from(Buffer.from('ffffffffffff02000000000908060000000006040001020000000009c6336414000000000000c633640a000000000000000000000000000000000000', 'hex'));
const NS = neighborSolicitationFrame(ipToBytes(parseIP('2001:db8::1')!), parseMac('02:00:00:00:00:09')!, ipToBytes(parseIP('fe80::9')!));

/** The i-th frame of the flood: every one different. */
function floodFrame(i: number): Uint8Array {
  if (i % 2 === 0) {
    const frame = ISSUE_FRAME.slice();
    frame.set([i >>> 24, i >>> 16, i >>> 8, i, (i >>> 3) & 0xff, 4], 14); // htype, ptype, hlen, plen
    return frame;
  }
  const frame = NS.slice();
  const length = 100 + (i % 60_000); // beyond the 32 bytes that follow the header
  frame[18] = length >> 8;
  frame[19] = length & 0xff;
  return frame;
}

const rss = () => process.memoryUsage().rss;
/** The JS heap after a full collection: what is kept, not the garbage between collections. */
const heap = () => {
  Bun.gc(true);
  const h = heapStats();
  return h.heapSize + h.extraMemorySize;
};
const cpuMs = (since?: NodeJS.CpuUsage) => {
  const u = process.cpuUsage(since);
  return (u.user + u.system) / 1000;
};

if (process.env[CHILD_ENV] === 'responder') {
  const responder = new L2Responder();
  const problems = responder.setAnnouncements(new Map([['d0', ['198.51.100.1', '2001:db8::1']]]));
  if (problems.length) throw new Error(JSON.stringify(problems));
  const keepAlive = setInterval(() => {}, 1000);
  await Bun.sleep(3_000); // the takeover repeats are over
  const idleStart = process.cpuUsage();
  await Bun.sleep(seconds * 1000);
  const idleMs = cpuMs(idleStart);
  const heapBefore = heap();
  const rssBefore = rss();
  process.stdout.write('flood\n'); // the parent starts the sender now
  const floodStart = process.cpuUsage();
  const before = responder.stats();
  await Bun.sleep(seconds * 1000 + 500);
  const floodMs = cpuMs(floodStart);
  const after = responder.stats();
  const heapAfter = heap();
  const frames = after.malformedFrames + after.martianFrames - before.malformedFrames - before.martianFrames;
  const scrapeStart = performance.now();
  for (let i = 0; i < 1000; i++) responder.stats();
  const statsUs = (performance.now() - scrapeStart);
  console.log(JSON.stringify({ idleMs, floodMs, frames, rssBefore, rssAfter: rss(), heapBefore, heapAfter, reasonKeys: Object.keys(after.malformedReasons).length + Object.keys(after.martianReasons).length, statsUs }));
  responder.close();
  clearInterval(keepAlive);
  process.exit(0);
}

if (process.env[CHILD_ENV] === 'sender') {
  const socket = PacketSocket.open('p0', ETH_P_ARP);
  const perTick = Math.max(1, Math.round(rate / 100));
  const end = performance.now() + seconds * 1000;
  let i = 0;
  while (performance.now() < end) {
    const tickEnd = performance.now() + 10;
    for (let k = 0; k < perTick; k++) socket.send(floodFrame(i++));
    const wait = tickEnd - performance.now();
    if (wait > 0) await Bun.sleep(wait);
  }
  socket.close();
  console.log(JSON.stringify({ sent: i }));
  process.exit(0);
}

requireRoot();
const lab = NetnsLab.create('l2flood');
try {
  await lab.addNamespace('host');
  await lab.ip('host', 'link', 'add', 'd0', 'type', 'veth', 'peer', 'name', 'p0');
  await lab.ip('host', 'link', 'set', 'd0', 'up');
  await lab.ip('host', 'link', 'set', 'p0', 'up');
  const child = (role: string) => Bun.spawn(['ip', 'netns', 'exec', lab.ns('host'), 'env', `${CHILD_ENV}=${role}`, process.execPath, import.meta.path, `--seconds=${seconds}`, `--rate=${rate}`], { stdout: 'pipe', stderr: 'inherit' });
  const responder = child('responder');
  const reader = responder.stdout.getReader();
  let out = '';
  while (!out.includes('flood\n')) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`the responder child ended: ${out}`);
    out += new TextDecoder().decode(value);
  }
  const sender = child('sender');
  const sent = JSON.parse((await new Response(sender.stdout).text()).trim()) as { sent: number };
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    out += new TextDecoder().decode(value);
  }
  const r = JSON.parse(out.trim().split('\n').at(-1)!) as { idleMs: number; floodMs: number; frames: number; rssBefore: number; rssAfter: number; heapBefore: number; heapAfter: number; reasonKeys: number; statsUs: number };
  const mib = (n: number) => (n / 2 ** 20).toFixed(1);
  console.log(`| frames sent | counted by the responder | its CPU, flood less idle | per frame | JS heap before -> after (after a full GC) | RSS before -> after | reason keys | stats() |`);
  console.log('|---|---|---|---|---|---|---|---|');
  console.log(
    `| ${sent.sent} in ${seconds} s | ${r.frames} | ${(r.floodMs - r.idleMs).toFixed(0)} ms | ${(((r.floodMs - r.idleMs) * 1000) / r.frames).toFixed(2)} µs | ` +
      `${mib(r.heapBefore)} -> ${mib(r.heapAfter)} MiB | ${mib(r.rssBefore)} -> ${mib(r.rssAfter)} MiB | ${r.reasonKeys} | ${r.statsUs.toFixed(2)} µs |`,
  );
} finally {
  await lab.destroy();
}

// The handlers and the tally alone, in this process: the part of the cost that is ours, not the socket's.
const link: LinkState = { mac: parseMac('02:00:00:00:00:01')!, addresses: new Set(['198.51.100.1', '2001:db8::1']) };
const tally = new RefusalTally(10_000);
const frames = Array.from({ length: 1000 }, (_, i) => floodFrame(i));
const N = 1_000_000;
const start = process.cpuUsage();
for (let i = 0; i < N; i++) {
  const frame = frames[i % 1000]!;
  const outcome = (i % 2 ? handleNdpFrame : handleArpFrame)(frame, link);
  if (outcome.kind === 'malformed' || outcome.kind === 'martian') tally.count(outcome);
}
console.log(`handlers + tally alone, ${N} frames: ${((cpuMs(start) * 1000) / N).toFixed(2)} µs CPU per frame; ${tally.malformedFrames} counted`);
