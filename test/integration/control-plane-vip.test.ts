import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { rankNodes } from '../../src/net/l2/election.ts';
import { ArpProber, type Probe } from '../harness/arp-probes.ts';
import { eventually } from '../harness/eventually.ts';
import { NODES, type NodeName } from '../harness/l2-lab.ts';
import { VIP, VIP6, VIP_KEY, VipLab } from '../harness/vip-lab.ts';

/**
 * `edge-ccm vip` (issue 28) in network namespaces: three control-plane hosts on one switch, each
 * with its own kube-apiserver sharing one etcd, the compiled binary on each; a client asks for
 * the VIP with a raw ARP request every 100 ms (which MACs answered each one) and requests
 * https://VIP:6443/readyz every 100 ms (failures counted). Every test fails if any probe is ever
 * answered by two MACs. Timings are printed, not asserted (scripts/bench-vip is for figures).
 */

/** The order every host elects in when all three are eligible. */
const ORDER = rankNodes(VIP_KEY, NODES) as NodeName[];

interface Request { t: number; ok: boolean }

let vip: VipLab;
let prober: ArpProber;
const requests: Request[] = [];
let requesting = true;
let requester: Promise<void> | undefined;

beforeAll(async () => {
  vip = await VipLab.build();
  prober = ArpProber.start(vip.site, VIP, 'vip-prober');
}, 120_000);

afterAll(async () => {
  requesting = false;
  await requester;
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

function startRequests(): void {
  requester ??= (async () => {
    while (requesting) {
      const t = Date.now();
      const ok = await vip.readyz('client', VIP, 0.3);
      requests.push({ t, ok });
      await Bun.sleep(Math.max(0, 100 - (Date.now() - t)));
    }
  })();
}

/** From `faultAt`: the first probe answered by a node other than `old`, and the requests that failed until the first that succeeded after it. */
async function moveFrom(old: NodeName, faultAt: number): Promise<NodeName> {
  let now: NodeName | undefined;
  await eventually(`the VIP leaves ${old} (probes: ${JSON.stringify(prober.probes().slice(-5))})`, () => {
    now = answeringNode();
    return !!now && now !== old && prober.probes().some((p) => p.t >= faultAt && p.macs.length === 1);
  }, 20_000);
  const first = prober.probes().find((p) => p.t >= faultAt && p.macs.length === 1 && vip.nodeOfMac(p.macs[0]!) !== old)!;
  await eventually('a request through the VIP succeeds again', () => requests.some((r) => r.t > first.t && r.ok), 20_000);
  const firstOk = requests.find((r) => r.t >= faultAt && r.ok && r.t > first.t)!;
  const failed = requests.filter((r) => r.t >= faultAt && r.t < firstOk.t && !r.ok).length;
  console.log(`vip moved ${old} -> ${now}: first ARP answer ${first.t - faultAt} ms after the fault, first good request ${firstOk.t - faultAt} ms, ${failed} requests failed`);
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
    startRequests();
    await eventually('a request through the VIP succeeds', () => requests.some((r) => r.ok), 20_000);
    console.log(`bootstrap: VIP answered ${prober.probes().find((p) => p.macs.length > 0)!.t - readyAt} ms after the API server's /readyz first answered 200 (seen by the test)`);
    expect(doubles()).toEqual([]);
  }, 240_000);

  test('the others join: the first in the order holds it; no move while it stays healthy', async () => {
    const joiners = NODES.filter((n) => n !== ORDER[2]);
    for (const n of joiners) vip.startVip(n);
    await Promise.all(joiners.map((n) => vip.startApiServer(n)));
    await eventually(`${ORDER[0]} holds the VIP`, () => answeringNode() === ORDER[0], 30_000);
    const settledAt = Date.now();
    await Bun.sleep(3000);
    const since = prober.probes().filter((p) => p.t >= settledAt);
    expect(since.length).toBeGreaterThan(10);
    expect(since.filter((p) => p.macs.length !== 1 || vip.nodeOfMac(p.macs[0]!) !== ORDER[0])).toEqual([]);
    // Each host says who holds it, and is ready.
    for (const n of NODES) {
      expect(await vip.vipEndpoint(n, '/readyz')).toBe('ok');
      const metrics = (await vip.vipEndpoint(n, '/metrics')) ?? '';
      expect({ n, holding: /^edge_ccm_vip_holding (\d)$/m.exec(metrics)?.[1] }).toEqual({ n, holding: n === ORDER[0] ? '1' : '0' });
      expect(metrics).toContain(`edge_ccm_vip_elected{node="${ORDER[0]}"} 1`);
    }
    // The IPv6 address moves with it: one Neighbor Advertisement, from the same host.
    expect(await vip.site.ndpAnswers(VIP6)).toEqual([vip.site.nodes[ORDER[0]!].lanMac]);
    expect(doubles()).toEqual([]);
  }, 300_000);

  test("the holder's kube-apiserver is killed: the VIP moves to the next host", async () => {
    const holder = ORDER[0]!;
    const faultAt = Date.now();
    await vip.apiServers.get(holder)!.kill();
    const now = await moveFrom(holder, faultAt);
    expect(now).toBe(ORDER[1]!);
    // Why it moved: in the old holder's log and metrics.
    expect(vip.vips.get(holder)!.logTail(200)).toMatch(/vip released.*reason=apiserver-unhealthy/);
    expect(await vip.vipEndpoint(holder, '/metrics')).toContain('edge_ccm_vip_transitions_total{direction="release",reason="apiserver-unhealthy"} 1');
    expect(doubles()).toEqual([]);
  }, 60_000);

  test("the new holder's edge-ccm is SIGKILLed: the last healthy host takes it (the first still counts for quorum)", async () => {
    const holder = ORDER[1]!;
    const faultAt = Date.now();
    await vip.vips.get(holder)!.kill();
    const now = await moveFrom(holder, faultAt);
    expect(now).toBe(ORDER[2]!);
    expect(doubles()).toEqual([]);
  }, 60_000);
});
