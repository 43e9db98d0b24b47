/**
 * Control-plane VIP failover (issue 28), RUNS times per fault kind: three control-plane hosts in
 * network namespaces on one switch (test/harness/vip-lab.ts: a kube-apiserver each, one shared
 * etcd, the compiled `edge-ccm vip` on each), a raw-ARP prober every 100 ms and a client asking
 * https://VIP:6443/readyz every 100 ms (0.3 s timeout). For each fault of the holder: the time
 * from the fault to the first ARP answer from the new holder, to the first successful request
 * after the first failed one (0 when no request failed), the failed requests; every probe
 * answered by two MACs is counted (must stay 0). Then the cold start of all three at once.
 * Usage: bun bench/vip-failover.ts [RUNS=10] (root; after bun scripts/build.ts). BENCHMARKS.md.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ArpProber, percentile } from '../test/harness/arp-probes.ts';
import { eventually } from '../test/harness/eventually.ts';
import { NODES, type NodeName } from '../test/harness/l2-lab.ts';
import { VIP, VipLab } from '../test/harness/vip-lab.ts';

const RUNS = Number(process.argv[2] ?? 10);
const vip = await VipLab.build();
const prober = ArpProber.start(vip.site, VIP, 'vip-bench-prober');
const requests: { t: number; ok: boolean }[] = [];
let requesting = true;

const answering = (): NodeName | undefined => {
  const last = prober.probes().at(-1);
  return last?.macs.length === 1 ? vip.nodeOfMac(last.macs[0]!) : undefined;
};
const doubles = () => prober.probes().filter((p) => p.macs.length > 1).length;

type Fault = { name: string; apply: (holder: NodeName) => Promise<void>; heal: (holder: NodeName) => Promise<void> };
const PARTITION = 'vipbenchpart';
const FAULTS: Fault[] = [
  { name: "holder's kube-apiserver killed", apply: (h) => vip.apiServers.get(h)!.kill(), heal: (h) => vip.startApiServer(h) },
  {
    name: "holder's kube-apiserver hung (SIGSTOP: port kept, no answer)",
    apply: async (h) => void process.kill(vip.apiServers.get(h)!.pid, 'SIGSTOP'),
    heal: async (h) => void process.kill(vip.apiServers.get(h)!.pid, 'SIGCONT'),
  },
  { name: "holder's edge-ccm SIGKILLed", apply: (h) => vip.vips.get(h)!.kill(), heal: async (h) => void vip.startVip(h) },
  { name: "holder's link down", apply: async (h) => void (await vip.site.lab.ip(h, 'link', 'set', 'eth0', 'down')), heal: async (h) => void (await vip.site.lab.ip(h, 'link', 'set', 'eth0', 'up')) },
  {
    name: 'the other two hosts partitioned from the holder (the client reaches all three)',
    apply: async (h) => {
      const others = NODES.filter((n) => n !== h).map((n) => vip.site.nodes[n].lanIPv4).join(', ');
      const path = join(vip.site.lab.dir, 'partition.nft');
      writeFileSync(path, `table inet ${PARTITION} {\n chain input {\n  type filter hook input priority 0; policy accept;\n  ip saddr { ${others} } drop\n }\n chain output {\n  type filter hook output priority 0; policy accept;\n  ip daddr { ${others} } drop\n }\n}\n`);
      const r = await vip.site.lab.exec(h, ['nft', '-f', path]);
      if (r.code !== 0) throw new Error(r.stderr);
    },
    heal: async (h) => void (await vip.site.lab.exec(h, ['nft', 'delete', 'table', 'inet', PARTITION])),
  },
];

try {
  for (const n of NODES) vip.startVip(n);
  await Promise.all(NODES.map((n) => vip.startApiServer(n)));
  await eventually('a holder', () => !!answering(), 30_000);
  const requester = (async () => {
    while (requesting) {
      const t = Date.now();
      requests.push({ t, ok: await vip.readyz('client', VIP, 0.3) });
      await Bun.sleep(Math.max(0, 100 - (Date.now() - t)));
    }
  })();
  for (const fault of FAULTS) {
    const arp: number[] = [];
    const request: number[] = [];
    const failed: number[] = [];
    const before = doubles();
    for (let run = 0; run < RUNS; run++) {
      await Bun.sleep(2000);
      const holder = answering();
      if (!holder) throw new Error(`no single holder before run ${run} of ${fault.name}`);
      const faultAt = Date.now();
      await fault.apply(holder);
      await eventually(`the VIP leaves ${holder} (${fault.name})`, () => prober.probes().some((p) => p.t >= faultAt && p.macs.length === 1 && vip.nodeOfMac(p.macs[0]!) !== holder), 20_000);
      const moved = prober.probes().find((p) => p.t >= faultAt && p.macs.length === 1 && vip.nodeOfMac(p.macs[0]!) !== holder)!;
      await eventually('a request succeeds after the move', () => requests.some((r) => r.t > moved.t && r.ok), 20_000);
      const firstFailed = requests.find((r) => r.t >= faultAt && !r.ok);
      const firstOkAfter = firstFailed && requests.find((r) => r.t > firstFailed.t && r.ok)!;
      arp.push(moved.t - faultAt);
      request.push(firstOkAfter ? firstOkAfter.t - faultAt : 0);
      failed.push(firstFailed ? requests.filter((r) => r.t >= faultAt && r.t < firstOkAfter!.t && !r.ok).length : 0);
      await fault.heal(holder);
      // Healed: the host returns (warming, then the ordered handback if it ranks first).
      await Bun.sleep(1500);
      await eventually('one holder again', () => !!answering(), 30_000);
    }
    const fmt = (xs: number[]) => `p50 ${percentile(xs, 50)} ms, max ${Math.max(...xs)} ms`;
    console.log(`vip failover: ${fault.name}: ${RUNS} runs; first ARP answer from the new holder ${fmt(arp)}; first good request after a failed one ${fmt(request)}; failed requests p50 ${percentile(failed, 50)}, max ${Math.max(...failed)}; probes answered by two MACs ${doubles() - before}`);
  }
  // Load: the holder's API server busy for 30 s (16 clients fetching the OpenAPI document back to
  // back from the client's namespace): the VIP must not move while it stays ready.
  {
    await Bun.sleep(2000);
    const holder = answering()!;
    const at = Date.now();
    let loading = true;
    let served = 0;
    const url = `https://${vip.site.nodes[holder].lanIPv4}:6443/openapi/v2`;
    const clients = Array.from({ length: 16 }, async () => {
      while (loading) {
        const r = await vip.site.lab.exec('client', ['curl', '-sk', '-o', '/dev/null', '-w', '%{http_code}', '--max-time', '10', '-H', `Authorization: Bearer ${vip.adminToken}`, url]);
        if (r.stdout.trim() === '200') served += 1;
      }
    });
    await Bun.sleep(30_000);
    loading = false;
    await Promise.all(clients);
    const during = prober.probes().filter((p) => p.t >= at);
    const others = during.filter((p) => p.macs.length !== 1 || vip.nodeOfMac(p.macs[0]!) !== holder).length;
    console.log(`vip under load: the holder's API server served ${served} OpenAPI documents (16 clients, 30 s); ${during.length} probes, ${others} not answered by the holder alone; requests through the VIP meanwhile: ${requests.filter((r) => r.t >= at && !r.ok).length} failed of ${requests.filter((r) => r.t >= at).length}`);
  }
  // Cold start: every edge-ccm at once (the API servers up): from the start to the first ARP answer.
  const cold: number[] = [];
  const coldBefore = doubles();
  for (let run = 0; run < RUNS; run++) {
    await Promise.all(NODES.map((n) => vip.vips.get(n)!.kill()));
    await Bun.sleep(1500);
    const at = Date.now();
    for (const n of NODES) vip.startVip(n);
    await eventually('a holder after the cold start', () => prober.probes().some((p) => p.t >= at && p.macs.length === 1), 20_000);
    cold.push(prober.probes().find((p) => p.t >= at && p.macs.length === 1)!.t - at);
  }
  console.log(`vip cold start of all three: ${RUNS} runs; first ARP answer p50 ${percentile(cold, 50)} ms, max ${Math.max(...cold)} ms (includes process start and the 1 s warm-up); probes answered by two MACs ${doubles() - coldBefore}`);
  requesting = false;
  await requester;
  console.log(`vip bench total: ${prober.probes().length} probes, ${doubles()} answered by two MACs; ${requests.length} requests, ${requests.filter((r) => !r.ok).length} failed`);
} finally {
  requesting = false;
  await prober.stop();
  await vip.destroy();
}
