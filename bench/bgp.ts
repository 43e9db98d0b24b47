/**
 * How fast the BGP speaker fills a real router: BIRD 2 in a network namespace, the speaker as a
 * child process in another (test/harness/bgp-lab.ts). Announces N load-balancer host routes,
 * each with three next hops (ECMP through ADD-PATH: three paths per prefix), and M pod CIDRs
 * with one next hop each, and measures the time from the announcement (the speaker writes the
 * first UPDATE in the same turn) until BIRD's table holds every path, the speaker's CPU seconds
 * and RSS, and the UPDATE messages sent. IPv6, because the documentation ranges the tests may
 * use hold only 512 IPv4 addresses: /128s from 2001:db8:1000::/64 and /64s from 2001:db8:2000::/48.
 *
 *   bun bench/bgp.ts [--addresses=10000] [--pod-cidrs=5000] [--rounds=3]
 */
import { createBgpLab, NODES6, ROUTER6, speakerConfig, startRouter } from '../test/harness/bgp-lab.ts';
import { SpeakerProcess } from '../test/harness/bgp-speaker-process.ts';
import type { Announcement } from '../src/net/bgp/speaker.ts';

const args = Object.fromEntries(process.argv.slice(2).filter((a) => a.startsWith('--') && a.includes('=')).map((a) => a.slice(2).split('=') as [string, string]));
const ADDRESSES = Number(args.addresses ?? 10_000);
const POD_CIDRS = Number(args['pod-cidrs'] ?? 5_000);
const ROUNDS = Number(args.rounds ?? 3);

function table(): Announcement[] {
  const out: Announcement[] = [];
  for (let i = 0; i < ADDRESSES; i++) out.push({ prefix: `2001:db8:1000::${(i + 1).toString(16)}/128`, nextHops: NODES6 });
  for (let i = 0; i < POD_CIDRS; i++) out.push({ prefix: `2001:db8:2000:${i.toString(16)}::/64`, nextHops: [NODES6[i % NODES6.length]!] });
  return out;
}

async function birdCount(lab: Awaited<ReturnType<typeof createBgpLab>>, socket: string): Promise<{ routes: number; networks: number }> {
  const r = await lab.exec('rtr', ['/usr/sbin/birdc', '-s', socket, 'show', 'route', 'table', 'master6', 'protocol', 'speaker6', 'count']);
  const m = /(\d+) of \d+ routes for (\d+) networks/.exec(r.stdout);
  return { routes: Number(m?.[1] ?? 0), networks: Number(m?.[2] ?? 0) };
}

const results: object[] = [];
const announcements = table();
const wantPaths = ADDRESSES * NODES6.length + POD_CIDRS;
for (let round = 1; round <= ROUNDS; round++) {
  const lab = await createBgpLab('bgpbench', 'bird');
  try {
    const router = await startRouter(lab, 'bird');
    const speaker = await SpeakerProcess.start(lab, 'spk', { ...speakerConfig(), peers: speakerConfig().peers.filter((p) => p.address === ROUTER6) });
    await speaker.established(ROUTER6);
    const before = await speaker.stats();
    const started = performance.now();
    await speaker.announce(announcements);
    let count = { routes: 0, networks: 0 };
    while (count.routes < wantPaths) {
      count = await birdCount(lab, `${lab.dir}/bird.ctl`);
      if (performance.now() - started > 600_000) throw new Error(`BIRD has ${count.routes} of ${wantPaths} paths after 600 s`);
      if (count.routes < wantPaths) await Bun.sleep(20);
    }
    const seconds = (performance.now() - started) / 1000;
    const after = await speaker.stats();
    const cpu = (after.cpuMicros.user + after.cpuMicros.system - before.cpuMicros.user - before.cpuMicros.system) / 1e6;
    const peer = after.peers[0]!;
    const result = {
      round,
      prefixes: announcements.length,
      paths: count.routes,
      networks: count.networks,
      secondsToAllInBird: Number(seconds.toFixed(2)),
      speakerCpuSeconds: Number(cpu.toFixed(2)),
      speakerRssMiB: Number((after.rssBytes / 2 ** 20).toFixed(1)),
      updatesSent: peer.updatesSent - (before.peers[0]?.updatesSent ?? 0),
    };
    console.log(JSON.stringify(result));
    results.push(result);
    await speaker.stop();
    await router.stop();
  } finally {
    await lab.destroy();
  }
}
console.log(JSON.stringify({ addresses: ADDRESSES, podCidrs: POD_CIDRS, results }));
