/**
 * What the L2 responder's polling costs when nothing arrives: CPU of a process announcing one IPv4
 * and one IPv6 address on each of N veth interfaces (two packet sockets each) for a while, per
 * poll interval, against the same process with no responder. Runs in its own network namespace.
 *
 *   bun bench/l2-poll-cost.ts [--interfaces=4] [--seconds=10] [--intervals=1,5,10,20]
 */
import { L2Responder } from '../src/net/l2/responder.ts';
import { NetnsLab, mustRun } from '../test/harness/netns.ts';

const args = Object.fromEntries(process.argv.slice(2).filter((a) => a.startsWith('--') && a.includes('=')).map((a) => a.slice(2).split('=') as [string, string]));
/** Set for the measured child only: the child must never build a lab of its own. */
const CHILD_ENV = 'EDGE_CCM_L2_BENCH_CHILD';

if (process.env[CHILD_ENV] === '1') {
  // Inside the namespace: announce, idle, report CPU per second of wall time.
  const interval = Number(args.interval);
  const count = Number(args.interfaces);
  const responder = interval > 0 ? new L2Responder({ pollIntervalMs: interval }) : undefined;
  const problems = responder?.setAnnouncements(
    new Map(Array.from({ length: count }, (_, i) => [`d${i}`, [`198.51.100.${i + 1}`, `2001:db8::${i + 1}`]])),
  );
  if (problems?.length) throw new Error(JSON.stringify(problems));
  const keepAlive = setInterval(() => {}, 1000);
  await Bun.sleep(3_000); // the takeover repeats are over
  const start = process.cpuUsage();
  const startedAt = performance.now();
  await Bun.sleep(Number(args.seconds) * 1000);
  const used = process.cpuUsage(start);
  const wall = (performance.now() - startedAt) / 1000;
  responder?.close();
  clearInterval(keepAlive);
  console.log(JSON.stringify({ cpuMsPerSecond: (used.user + used.system) / 1000 / wall }));
  process.exit(0);
}

const interfaces = Number(args.interfaces ?? 4);
const seconds = Number(args.seconds ?? 10);
const intervals = (args.intervals ?? '1,5,10,20').split(',').map(Number);
const lab = NetnsLab.create('l2bench');
try {
  await lab.addNamespace('host');
  for (let i = 0; i < interfaces; i++) {
    // veth pairs: this kernel has no dummy interfaces; the peer ends stay silent.
    await lab.ip('host', 'link', 'add', `d${i}`, 'type', 'veth', 'peer', 'name', `p${i}`);
    await lab.ip('host', 'link', 'set', `d${i}`, 'up');
    await lab.ip('host', 'link', 'set', `p${i}`, 'up');
  }
  console.log(`| poll interval | CPU ms per s, ${interfaces} interfaces x (ARP + NDP socket), idle ${seconds} s |`);
  console.log('|---|---|');
  for (const interval of [0, ...intervals]) {
    const out = await mustRun(['ip', 'netns', 'exec', lab.ns('host'), 'env', `${CHILD_ENV}=1`, process.execPath, import.meta.path, `--interval=${interval}`, `--interfaces=${interfaces}`, `--seconds=${seconds}`], (seconds + 30) * 1000);
    const { cpuMsPerSecond } = JSON.parse(out.trim().split('\n').at(-1)!) as { cpuMsPerSecond: number };
    console.log(`| ${interval === 0 ? 'no responder (baseline)' : `${interval} ms`} | ${cpuMsPerSecond.toFixed(2)} |`);
  }
} finally {
  await lab.destroy();
}
