import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { rankNodes } from '../../src/net/l2/election.ts';
import { ArpProber, type Probe } from '../harness/arp-probes.ts';
import { eventually } from '../harness/eventually.ts';
import { NODES, type NodeName } from '../harness/l2-lab.ts';
import { VIP, VIP6, VIP_BGP, VIP_BGP_KEY, VIP_KEY, VipLab } from '../harness/vip-lab.ts';
import { holderOverlaps, VipPathSampler, VipRequests } from '../harness/vip-probes.ts';

/**
 * `edge-ccm vip` (issue 28) in network namespaces: three control-plane hosts on one switch, each
 * with its own kube-apiserver sharing one etcd, the compiled binary on each; a client asks for
 * the VIP with a raw ARP request every 100 ms (which MACs answered each one) and requests
 * https://VIP:6443/readyz every 100 ms (failures counted). Every test fails if any probe is ever
 * answered by two MACs. Timings are printed, not asserted (scripts/bench-vip is for figures).
 *
 * Then the same hosts with `announce: bgp` (the lab's BIRD in rtr, a BGP and a BFD session per
 * host; the client reaches VIP_BGP through rtr): BIRD's table is read every 100 ms and every test
 * fails if it ever holds two paths for the VIP.
 */

/** The order every host elects in when all three are eligible. */
const ORDER = rankNodes(VIP_KEY, NODES) as NodeName[];

let vip: VipLab;
let prober: ArpProber;
let requests: VipRequests | undefined;
let bgpRequests: VipRequests | undefined;
let paths: VipPathSampler | undefined;

beforeAll(async () => {
  vip = await VipLab.build({ router: true });
  prober = ArpProber.start(vip.site, VIP, 'vip-prober');
}, 120_000);

afterAll(async () => {
  await Promise.all([requests?.stop(), bgpRequests?.stop(), paths?.stop()]);
  await prober?.stop();
  await vip?.destroy();
}, 60_000);

function doubles(): Probe[] {
  return prober.probes().filter((p) => p.macs.length > 1);
}

/** The node that answered the latest probe alone, if one did. */
function answeringNode(): NodeName | undefined {
  const last = prober.probes().at(-1);
  return last && last.macs.length === 1 ? vip.nodeOfMac(last.macs[0]!) : undefined;
}

/** From `faultAt`: the first probe answered by a node other than `old`, and the requests that failed until the first that succeeded after it. */
async function moveFrom(old: NodeName, faultAt: number): Promise<NodeName> {
  let now: NodeName | undefined;
  await eventually(`the VIP leaves ${old} (probes: ${JSON.stringify(prober.probes().slice(-5))})`, () => {
    now = answeringNode();
    return !!now && now !== old && prober.probes().some((p) => p.t >= faultAt && p.macs.length === 1);
  }, 20_000);
  const first = prober.probes().find((p) => p.t >= faultAt && p.macs.length === 1 && vip.nodeOfMac(p.macs[0]!) !== old)!;
  await eventually('a request through the VIP succeeds again', () => requests!.list.some((r) => r.t > first.t && r.ok), 20_000);
  const good = requests!.firstGood(faultAt, first.t);
  console.log(`vip moved ${old} -> ${now}: first ARP answer ${first.t - faultAt} ms after the fault, first good request ${good.ms} ms, ${good.failed} requests failed`);
  return now!;
}

describe('control-plane VIP', () => {
  test('bootstrap: nothing answers before the first API server does; then its host takes the VIP', async () => {
    const first = ORDER[2]!;
    vip.startVip(first);
    // Up, warmed up, probed: still silent while its API server is not answering.
    await eventually('the vip process warmed up', () => vip.vips.get(first)!.logTail().includes('liveness warm-up over'), 20_000);
    await Bun.sleep(1500);
    expect(prober.probes().filter((p) => p.macs.length > 0)).toEqual([]);
    await vip.startApiServer(first);
    const readyAt = Date.now();
    await eventually(`${first} answers for the VIP (log ${vip.vips.get(first)!.logTail()})`, () => answeringNode() === first, 20_000);
    requests = new VipRequests(vip, VIP);
    await eventually('a request through the VIP succeeds', () => requests!.list.some((r) => r.ok), 20_000);
    console.log(`bootstrap: VIP answered ${prober.probes().find((p) => p.macs.length > 0)!.t - readyAt} ms after the API server's /readyz first answered 200 (seen by the test)`);
    expect(doubles()).toEqual([]);
  }, 240_000);

  test('the others join: the bootstrap host keeps it (sticky: no handback to the first in the order); no move while it stays healthy', async () => {
    const holder = ORDER[2]!;
    const joiners = NODES.filter((n) => n !== holder);
    const joinAt = Date.now();
    for (const n of joiners) vip.startVip(n);
    await Promise.all(joiners.map((n) => vip.startApiServer(n)));
    // Both joiners eligible (warmed up, healthy, with quorum): where the old default handed the VIP back to ORDER[0].
    await eventually('the joiners are eligible', async () => (await Promise.all(joiners.map(async (n) => (await vip.vipEndpoint(n, '/readyz')) === 'ok' && /^edge_ccm_vip_quorum 1$/m.test((await vip.vipEndpoint(n, '/metrics')) ?? '') && /^edge_ccm_vip_apiserver_healthy 1$/m.test((await vip.vipEndpoint(n, '/metrics')) ?? '')))).every(Boolean), 60_000);
    await Bun.sleep(3000);
    const since = prober.probes().filter((p) => p.t >= joinAt);
    expect(since.length).toBeGreaterThan(10);
    expect(since.filter((p) => p.macs.length !== 1 || vip.nodeOfMac(p.macs[0]!) !== holder)).toEqual([]);
    // Each host says who holds it, and is ready.
    for (const n of NODES) {
      expect(await vip.vipEndpoint(n, '/readyz')).toBe('ok');
      const metrics = (await vip.vipEndpoint(n, '/metrics')) ?? '';
      expect({ n, holding: /^edge_ccm_vip_holding (\d)$/m.exec(metrics)?.[1] }).toEqual({ n, holding: n === holder ? '1' : '0' });
      expect(metrics).toContain(`edge_ccm_vip_elected{node="${holder}"} 1`);
    }
    // The IPv6 address is held with it: one Neighbor Advertisement, from the same host.
    expect(await vip.site.ndpAnswers(VIP6)).toEqual([vip.site.nodes[holder].lanMac]);
    expect(doubles()).toEqual([]);
  }, 300_000);

  test("the holder's kube-apiserver is killed: the VIP moves to the first in the order of the other two", async () => {
    const holder = ORDER[2]!;
    const faultAt = Date.now();
    await vip.apiServers.get(holder)!.kill();
    const now = await moveFrom(holder, faultAt);
    expect(now).toBe(ORDER[0]!);
    // Why it moved: in the old holder's log and metrics.
    expect(vip.vips.get(holder)!.logTail(200)).toMatch(/vip released.*reason=apiserver-unhealthy/);
    expect(await vip.vipEndpoint(holder, '/metrics')).toContain('edge_ccm_vip_transitions_total{direction="release",reason="apiserver-unhealthy"} 1');
    expect(doubles()).toEqual([]);
  }, 60_000);

  test("the new holder's edge-ccm is SIGKILLed: the last healthy host takes it (the unhealthy one still counts for quorum)", async () => {
    const holder = ORDER[0]!;
    const faultAt = Date.now();
    await vip.vips.get(holder)!.kill();
    const now = await moveFrom(holder, faultAt);
    expect(now).toBe(ORDER[1]!);
    expect(doubles()).toEqual([]);
  }, 60_000);
});

/** The host announcing VIP_BGP after the cold start (the first to become eligible: sticky), then each new holder. */
let bgpHolder: NodeName;
/** The host whose link went down and comes back. */
let returning: NodeName;
/** The first of `hosts` in VIP_BGP's rendezvous order: whom they elect when none holds it. */
const firstFor = (hosts: NodeName[]) => rankNodes(VIP_BGP_KEY, hosts)[0] as NodeName;

/** From `faultAt`: the first sample whose only path is not through `old`'s address, and the first good request after it. */
async function bgpMoveFrom(old: NodeName, faultAt: number): Promise<NodeName> {
  const oldHop = vip.site.nodes[old].lanIPv4;
  const moved = () => paths!.movedFrom(oldHop, faultAt).moved;
  await eventually(`the VIP's path leaves ${old}`, () => !!moved(), 20_000).catch((e: Error) => {
    throw new Error(`${e.message}; last samples ${JSON.stringify(paths!.samples.slice(-3))}`);
  });
  const first = moved()!;
  const gone = paths!.movedFrom(oldHop, faultAt).gone!;
  await eventually('a request through the VIP succeeds again', () => bgpRequests!.list.some((r) => r.t > first.t && r.ok), 20_000);
  const good = bgpRequests!.firstGood(faultAt, first.t);
  const now = NODES.find((n) => vip.site.nodes[n].lanIPv4 === first.hops[0])!;
  console.log(`vip (bgp) moved ${old} -> ${now}: old path gone from BIRD ${gone.t - faultAt} ms after the fault, new path ${first.t - faultAt} ms, first good request ${good.ms} ms, ${good.failed} requests failed`);
  return now;
}

describe('control-plane VIP over BGP', () => {
  test('every host restarted at once with announce: bgp: one path, and requests reach it through the router; no take while another held it', async () => {
    await Promise.all([...NODES.map((n) => vip.vips.get(n)?.kill()), vip.startRouter()]);
    const apiServersUp = Promise.all(NODES.map((n) => vip.startApiServer(n)));
    for (const n of NODES) vip.startVip(n, 'bgp');
    await apiServersUp;
    const startedAt = Date.now();
    paths = new VipPathSampler(vip);
    await eventually('BIRD has one path for the VIP', () => paths!.samples.at(-1)?.hops.length === 1, 30_000).catch((e: Error) => {
      throw new Error(`${e.message}; last samples ${JSON.stringify(paths!.samples.slice(-3))}`);
    });
    bgpHolder = NODES.find((n) => vip.site.nodes[n].lanIPv4 === paths!.samples.at(-1)!.hops[0])!;
    expect(holderOverlaps(vip, startedAt, Date.now()).list).toEqual([]);
    bgpRequests = new VipRequests(vip, VIP_BGP);
    await eventually('a request through the routed VIP succeeds', () => bgpRequests!.list.some((r) => r.ok), 20_000);
    // Every host has its BGP and BFD sessions up; only the holder announces.
    for (const n of NODES) await eventually(`BIRD's BFD session with ${n} is Up`, () => vip.router!.bfdUp!(vip.site.nodes[n].lanIPv4), 20_000);
    for (const n of NODES) {
      const metrics = (await vip.vipEndpoint(n, '/metrics')) ?? '';
      expect({ n, holding: /^edge_ccm_vip_holding (\d)$/m.exec(metrics)?.[1] }).toEqual({ n, holding: n === bgpHolder ? '1' : '0' });
      expect(metrics).toContain('edge_ccm_bfd_session_state{peer="198.51.100.1"} 3');
    }
    // No ARP answer for the routed VIP: nothing on the lan claims it.
    expect(doubles()).toEqual([]);
    expect(paths.doubles()).toEqual([]);
  }, 300_000);

  test("the holder's kube-apiserver is killed: it withdraws, the next host announces", async () => {
    const holder = bgpHolder;
    const faultAt = Date.now();
    await vip.apiServers.get(holder)!.kill();
    bgpHolder = firstFor(NODES.filter((n) => n !== holder));
    expect(await bgpMoveFrom(holder, faultAt)).toBe(bgpHolder);
    expect(vip.vips.get(holder)!.logTail(200)).toMatch(/vip released.*reason=apiserver-unhealthy/);
    expect(paths!.doubles()).toEqual([]);
  }, 60_000);

  test("the new holder's link goes down (its process alive): BIRD's BFD drops its path before the last host announces", async () => {
    const holder = bgpHolder;
    const faultAt = Date.now();
    await vip.site.lab.ip(holder, 'link', 'set', 'eth0', 'down');
    const last = NODES.find((n) => n !== holder && vip.apiServers.get(n)?.running)!;
    expect(await bgpMoveFrom(holder, faultAt)).toBe(last);
    returning = holder;
    bgpHolder = last;
    expect(paths!.doubles()).toEqual([]);
  }, 60_000);

  test('its link back: the returning host warms up again and waits in standby; the holder keeps the VIP (sticky)', async () => {
    const healAt = Date.now();
    await vip.site.lab.ip(returning, 'link', 'set', 'eth0', 'up');
    await eventually(`${returning} eligible again`, async () => {
      const m = (await vip.vipEndpoint(returning, '/metrics')) ?? '';
      return (await vip.vipEndpoint(returning, '/readyz')) === 'ok' && /^edge_ccm_vip_quorum 1$/m.test(m) && /^edge_ccm_vip_apiserver_healthy 1$/m.test(m);
    }, 30_000);
    await Bun.sleep(2000);
    const hop = vip.site.nodes[bgpHolder].lanIPv4;
    expect(paths!.samples.filter((x) => x.t >= healAt && JSON.stringify(x.hops) !== JSON.stringify([hop]))).toEqual([]);
    // Every take after another host's release, to the ms, from the vips' own logs (the table is read only every 100 ms).
    expect(holderOverlaps(vip, healAt, Date.now()).list).toEqual([]);
    expect(vip.vips.get(returning)!.logTail(200)).toContain('hearing a majority again after being cut off: warming up again');
    expect(paths!.doubles()).toEqual([]);
  }, 60_000);
});
