/**
 * Node IPAM at scale against a real API server: N nodes (default 5000) registered without pod
 * CIDRs, then one allocator started alone (only its node IPAM controller), timed from its start
 * until a watch has seen every node with spec.podCIDRs, and its API writes counted from the API
 * server's audit log (by user agent). Sides: kube-controller-manager's RangeAllocator (built from
 * the same k8s.io/kubernetes module as kube-apiserver: `bash scripts/build-control-plane.sh
 * kube-controller-manager`), edge-ccm's RangeAllocator and CloudAllocator (dist/edge-ccm, the
 * static provider, one machine per node; half of the machines pin their CIDRs). Every node's
 * CIDRs are checked distinct. Both sides get the same raised client budget (--kube-api-qps and
 * --kube-api-burst), so the API server, not a client's rate limit, sets the pace; --qps=20 gives
 * both upstream's default. Not part of scripts/bench, nor of CI.
 * --registered=before (default): the nodes exist when the allocator starts (a new leader's
 * backlog, timed from the process start); after: the allocator is started and settled first, then
 * the nodes are created, 32 at a time (a registration burst, timed from the first creation).
 * Usage: bun bench/node-ipam.ts [--nodes=5000] [--qps=1000] [--sides=kcm-range,edge-range,edge-cloud] [--repeat=1] [--registered=before|after]
 */
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { V1Node } from '@kubernetes/client-node';
import { NODES, ResourceClient } from '../src/kube/resources.ts';
import { Informer } from '../src/kube/informer/index.ts';
import { silentLogger } from '../src/log.ts';
import { settledAuditLog, readAuditLog } from '../test/harness/audit.ts';
import { controlPlaneBinDir } from '../test/harness/binaries.ts';
import { CcmProcess, tempDir } from '../test/harness/ccm-process.ts';
import { startControlPlane, type ControlPlane } from '../test/harness/control-plane.ts';
import { transportFor } from '../test/harness/kubeconfig.ts';
import { createAll } from './workloads.ts';
import { loadAverage } from './machine.ts';

const argv = process.argv.slice(2);
const arg = (name: string, dflt: string) => argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? dflt;
const COUNT = Number(arg('nodes', '5000'));
const QPS = arg('qps', '1000');
const SIDES = arg('sides', 'kcm-range,edge-range,edge-cloud').split(',');
const REPEAT = Number(arg('repeat', '1'));
const AFTER = arg('registered', 'before') === 'after';
const CLUSTER_CIDR = '10.0.0.0/8';
const MASK = 24;
const KCM = join(controlPlaneBinDir(), 'kube-controller-manager');

const nodeName = (i: number) => `bench-ipam-${String(i).padStart(5, '0')}`;
/** Half the machines pin a CIDR from the top of the cluster CIDR (the allocator counts up from the bottom). */
const pin = (i: number) => (i % 2 === 0 ? `10.${200 + Math.floor(i / 256 / 2)}.${(i / 2) % 256}.0/24` : undefined);

interface Result { side: string; seconds: number; writes: Record<string, number>; distinct: number }

function inventory(): string {
  const lines = ['inventory:', '  matchBy: [providerID, nodeName]', '  machines:'];
  for (let i = 0; i < COUNT; i++) {
    lines.push(`    - id: m${i}`, `      nodeName: ${nodeName(i)}`);
    const p = pin(i);
    if (p) lines.push(`      podCIDRs: [${p}]`);
  }
  return `${lines.join('\n')}\n`;
}

function start(side: string, cp: ControlPlane, dir: string): CcmProcess | ReturnType<typeof Bun.spawn> {
  const budget = [`--kube-api-qps=${QPS}`, `--kube-api-burst=${QPS}`];
  const common = ['--allocate-node-cidrs=true', `--cluster-cidr=${CLUSTER_CIDR}`, `--node-cidr-mask-size=${MASK}`, '--leader-elect=false', ...budget];
  if (side === 'kcm-range') {
    if (!existsSync(KCM)) throw new Error(`${KCM} is missing: run \`bash scripts/build-control-plane.sh kube-controller-manager\``);
    return Bun.spawn([KCM, `--kubeconfig=${cp.adminKubeconfig}`, '--controllers=nodeipam', '--secure-port=0', '--cidr-allocator-type=RangeAllocator', ...common], { stdout: 'ignore', stderr: 'ignore' });
  }
  const path = join(dir, 'inventory.yaml');
  writeFileSync(path, inventory());
  return CcmProcess.binary([
    '--cloud-provider=static', `--cloud-config=${path}`, `--kubeconfig=${cp.adminKubeconfig}`, '--secure-port=0',
    '--controllers=nodeipam', `--cidr-allocator-type=${side === 'edge-cloud' ? 'CloudAllocator' : 'RangeAllocator'}`, ...common,
  ]);
}

async function runOnce(cp: ControlPlane, side: string): Promise<Result> {
  const admin = transportFor(cp.adminKubeconfig);
  const nodes = new ResourceClient<V1Node>(admin, NODES);
  // Registered as initialised nodes of their machines (providerID set): node IPAM is all that runs.
  const register = () => createAll(COUNT, (i) => nodes.create({ metadata: { name: nodeName(i) }, spec: { providerID: `static://m${i}` } }));
  if (!AFTER) {
    await register();
    await Bun.sleep(2000);
  }
  const done = new Map<string, string[]>();
  const stop = new AbortController();
  const informer = new Informer<V1Node>({ transport: admin, type: NODES, logger: silentLogger });
  const record = (n: V1Node) => {
    if (n.spec?.podCIDRs?.length && n.metadata?.name?.startsWith('bench-ipam-')) done.set(n.metadata.name, n.spec.podCIDRs);
  };
  informer.addHandlers({ onAdd: record, onUpdate: (_o, n) => record(n) });
  const watching = informer.run(stop.signal);
  await informer.waitForSync(stop.signal);
  const auditFrom = readAuditLog(cp.auditLogPath).length;
  const dir = tempDir('edge-ccm-bench-ipam-');
  let started = performance.now();
  const proc = start(side, cp, dir);
  if (AFTER) {
    await Bun.sleep(5000); // started, synced, idle
    started = performance.now();
    await register();
  }
  while (done.size < COUNT) {
    if (performance.now() - started > 600_000) throw new Error(`${side}: ${done.size} of ${COUNT} nodes after 600 s`);
    await Bun.sleep(50);
  }
  const seconds = (performance.now() - started) / 1000;
  if (proc instanceof CcmProcess) await proc.stop();
  else {
    proc.kill('SIGTERM');
    await proc.exited;
  }
  stop.abort();
  await watching.catch(() => undefined);
  const entries = (await settledAuditLog(cp.auditLogPath)).slice(auditFrom);
  const agent = side === 'kcm-range' ? 'kube-controller-manager' : 'edge-ccm';
  const writes: Record<string, number> = {};
  for (const e of entries) {
    if (!e.userAgent?.startsWith(agent) || !['create', 'update', 'patch', 'delete'].includes(e.verb)) continue;
    const key = `${e.verb} ${e.objectRef?.resource}${e.objectRef?.subresource ? `/${e.objectRef.subresource}` : ''}`;
    writes[key] = (writes[key] ?? 0) + 1;
  }
  const distinct = new Set([...done.values()].flat()).size;
  if (distinct !== COUNT) throw new Error(`${side}: ${distinct} distinct CIDRs for ${COUNT} nodes`);
  if (side === 'edge-cloud') {
    for (let i = 0; i < COUNT; i += 2) if (done.get(nodeName(i))?.[0] !== pin(i)) throw new Error(`${side}: ${nodeName(i)} has ${done.get(nodeName(i))}, pinned ${pin(i)}`);
  }
  await createAll(COUNT, (i) => nodes.delete(nodeName(i)));
  await admin.request({ method: 'DELETE', path: '/api/v1/namespaces/kube-system/configmaps/cloud-controller-manager-node-ipam' }).catch(() => undefined);
  await Bun.sleep(2000);
  return { side, seconds, writes, distinct };
}

// The audit log counts the writes: no rotation (lumberjack's default 100 MB is reached within a few runs).
const cp = await startControlPlane({ extraApiServerFlags: ['--audit-log-maxsize=100000'] });
try {
  console.log(`node IPAM, ${COUNT} nodes registered ${AFTER ? 'after' : 'before'} the start, --cluster-cidr=${CLUSTER_CIDR} /${MASK}, --kube-api-qps=--kube-api-burst=${QPS}`);
  console.log('| run | side | all nodes with podCIDRs, s | API writes (by kind) | writes/node | load avg |');
  console.log('|---|---|---|---|---|---|');
  for (let r = 0; r < REPEAT; r++) {
    for (const side of r % 2 === 0 ? SIDES : [...SIDES].reverse()) {
      const load = loadAverage();
      const result = await runOnce(cp, side);
      const total = Object.values(result.writes).reduce((a, b) => a + b, 0);
      const kinds = Object.entries(result.writes).map(([k, n]) => `${k}: ${n}`).join(', ');
      console.log(`| ${r + 1} | ${side} | ${result.seconds.toFixed(2)} | ${kinds} | ${(total / COUNT).toFixed(3)} | ${load.toFixed(1)} |`);
    }
  }
} finally {
  await CcmProcess.stopAll();
  await cp.stop();
}
