/**
 * How fast the BGP speaker fills a real router: BIRD 2 in a network namespace, the speaker as a
 * child process in another (test/harness/bgp-lab.ts). Announces N load-balancer host routes,
 * each with three next hops (ECMP through ADD-PATH: three paths per prefix), and M pod CIDRs
 * with one next hop each, and measures the time from the announcement (the speaker writes the
 * first UPDATE in the same turn) until BIRD's table holds every path, the speaker's CPU seconds
 * and RSS, and the UPDATE messages sent. IPv6, because the documentation ranges the tests may
 * use hold only 512 IPv4 addresses: /128s from 2001:db8:1000::/64 and /64s from 2001:db8:2000::/48.
 *
 * Then a leader change, as edge-ccm makes one: BIRD is a graceful-restart helper, the speaker is
 * SIGKILLed, and a new speaker starts with its whole table given at start (one load-balancer
 * address fewer: what the new leader no longer announces). Measured from the new speaker's start
 * until BIRD has processed its End-of-RIB (the stale paths of the dropped address flushed, every
 * other path refreshed): session establishment, the full re-announcement and the flush.
 *
 *   bun bench/bgp.ts [--addresses=10000] [--pod-cidrs=5000] [--rounds=3]
 */
import { createBgpLab, NODES6, ROUTER6, speakerConfig, startRouter } from '../test/harness/bgp-lab.ts';
import { SpeakerProcess } from '../test/harness/bgp-speaker-process.ts';
import type { V1Node, V1Service } from '@kubernetes/client-node';
import { loadBalancerAnnouncements, podCIDRAnnouncements } from '../src/announce/bgp/announcements.ts';
import { BgpRouteTable } from '../src/announce/bgp/route-table.ts';
import { parseAddressRange, type AddressRange } from '../src/lb/ranges.ts';
import { BgpSpeaker, type Announcement } from '../src/net/bgp/speaker.ts';

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

/**
 * The announcer's own work for the same table (edge-ccm computes it from its informers at each
 * change, coalesced): N LoadBalancer services with one address each and three eligible nodes,
 * and M pod CIDR routes, then handed to a speaker without sessions: the first time, and the
 * median of 5 later rounds with one service changed each. In this process.
 */
async function tableComputeMs(): Promise<Record<string, number>> {
  const nodes: V1Node[] = NODES6.map((a, i) => ({ metadata: { name: `n${i}` }, status: { addresses: [{ type: 'InternalIP', address: a }] } }));
  const services: V1Service[] = Array.from({ length: ADDRESSES }, (_, i) => ({
    metadata: { namespace: 'default', name: `s${i}` },
    spec: { type: 'LoadBalancer' },
    status: { loadBalancer: { ingress: [{ ip: `2001:db8:1000::${(i + 1).toString(16)}` }] } },
  }));
  const routes = new BgpRouteTable();
  for (let i = 0; i < POD_CIDRS; i++) {
    await routes.createRoute('bench', `n${i}`, { name: '', targetNode: `n${i % 3}`, targetNodeAddresses: nodes[i % 3]!.status!.addresses!, destinationCIDR: `2001:db8:2000:${i.toString(16)}::/64`, blackhole: false });
  }
  const pool = { name: 'bench', ranges: [parseAddressRange('2001:db8:1000::/64') as AddressRange], priority: 0, autoAssign: true, shareAcrossNamespaces: false, announce: 'bgp' as const };
  const bgp = { speaker: { localAsn: 1, routerId: '198.51.100.2', peers: [] }, podCIDRs: { announce: true, communities: [] }, loadBalancers: { announceFrom: 'leader' as const }, pools: new Map() };
  // The speaker itself, without sessions: what setAnnouncements costs for the whole table.
  const speaker = await BgpSpeaker.start({ localAsn: 1, routerId: '198.51.100.2', listen: false, peers: [] });
  const compute = [];
  const set = [];
  for (let i = 0; i < 6; i++) {
    // From the second round on, one service changed its address: the common case of a recompute.
    if (i > 0) services[i]!.status!.loadBalancer!.ingress![0]!.ip = `2001:db8:1000::ffff:${i.toString(16)}`;
    let t = performance.now();
    const table = [...podCIDRAnnouncements(routes.announced(), bgp), ...loadBalancerAnnouncements({ services, eligibleNodes: nodes, readyEndpointNodes: new Map() }, { classes: [], pools: [pool] }, bgp)];
    compute.push(performance.now() - t);
    if (table.length !== ADDRESSES + POD_CIDRS) throw new Error(`computed ${table.length} prefixes`);
    t = performance.now();
    speaker.setAnnouncements(table);
    set.push(performance.now() - t);
  }
  await speaker.stop();
  const median = (xs: number[]) => Number(xs.slice(1).sort((a, b) => a - b)[2]!.toFixed(1));
  return { firstComputeMs: Number(compute[0]!.toFixed(1)), firstSetAnnouncementsMs: Number(set[0]!.toFixed(1)), recomputeMs: median(compute), resetAnnouncementsMs: median(set) };
}
console.log(JSON.stringify({ announcer: await tableComputeMs() }));

const results: object[] = [];
const announcements = table();
const wantPaths = ADDRESSES * NODES6.length + POD_CIDRS;
for (let round = 1; round <= ROUNDS; round++) {
  const lab = await createBgpLab('bgpbench', 'bird');
  try {
    const router = await startRouter(lab, 'bird', { gracefulRestart: true });
    const config = { ...speakerConfig({ gracefulRestartSeconds: 120 }), peers: speakerConfig().peers.filter((p) => p.address === ROUTER6) };
    const speaker = await SpeakerProcess.start(lab, 'spk', config);
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
    // The leader change: the old speaker dies (no NOTIFICATION), the new one starts with its table.
    await speaker.kill();
    const next = announcements.slice(1); // the first load-balancer address is no longer announced
    const restartStarted = performance.now();
    const successor = await SpeakerProcess.start(lab, 'spk', config, 'successor', next);
    // The state event arrives as it happens (stats polling would add its interval).
    while (!successor.states.some((c) => c.to === 'established')) {
      if (performance.now() - restartStarted > 60_000) throw new Error('the new speaker did not establish its session within 60 s');
      await Bun.sleep(5);
    }
    const establishedAfter = (performance.now() - restartStarted) / 1000;
    const wantAfter = wantPaths - NODES6.length;
    do {
      count = await birdCount(lab, `${lab.dir}/bird.ctl`);
      if (performance.now() - restartStarted > 600_000) throw new Error(`BIRD has ${count.routes} paths (want ${wantAfter}) 600 s after the restart`);
      if (count.routes !== wantAfter) await Bun.sleep(20);
    } while (count.routes !== wantAfter);
    const restartSeconds = (performance.now() - restartStarted) / 1000;
    const s2 = await successor.stats();
    Object.assign(result, {
      leaderChange: {
        secondsToEstablished: Number(establishedAfter.toFixed(3)),
        secondsToAllReannouncedAndStaleFlushed: Number(restartSeconds.toFixed(3)),
        speakerCpuSeconds: Number(((s2.cpuMicros.user + s2.cpuMicros.system) / 1e6).toFixed(2)),
        speakerRssMiB: Number((s2.rssBytes / 2 ** 20).toFixed(1)),
        updatesSent: s2.peers[0]!.updatesSent,
      },
    });
    console.log(JSON.stringify(result));
    results.push(result);
    await successor.stop();
    await router.stop();
  } finally {
    await lab.destroy();
  }
}
console.log(JSON.stringify({ addresses: ADDRESSES, podCidrs: POD_CIDRS, results }));
