/**
 * The API load of the L2 speakers: N speakers (the real L2Announcer class, each with its own client,
 * service-account token and UDP liveness socket) against a real kube-apiserver, counted from the
 * API server's audit log: the requests at start and per minute afterwards. The cluster holds N
 * Ready nodes and S LoadBalancer services with endpoint slices; every 10 s one service's slice and
 * one node's labels change (churn the watches deliver, which must cost no request).
 *
 *   bun bench/l2-speaker-api-rate.ts [--speakers=100] [--services=50] [--minutes=15]
 *
 * Needs the control-plane binaries (bash scripts/install.sh). Runs in the machine's namespace:
 * the speakers announce nothing (no service has an address in an announce: l2 pool), bind their
 * liveness ports on 127.0.0.1 and send no heartbeat (the nodes list no address).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { V1EndpointSlice, V1Node, V1Service } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import { NODES, ResourceClient, SERVICES } from '../src/kube/resources.ts';
import { silentLogger } from '../src/log.ts';
import { loadSpeakerConfig } from '../src/announce/config.ts';
import { ENDPOINT_SLICES } from '../src/kube/endpoint-slices.ts';
import { L2Announcer } from '../src/announce/l2/announcer.ts';
import type { AuditEntry } from '../test/harness/audit.ts';
import { startControlPlane } from '../test/harness/control-plane.ts';
import { transportFor, writeKubeconfig } from '../test/harness/kubeconfig.ts';
import { applyManifests } from '../test/harness/manifests.ts';
import { setReady } from '../test/harness/nodes.ts';
import { freeLoopbackPorts } from '../test/harness/ports.ts';
import { helmTemplate } from '../test/harness/helm.ts';
import { forEachLimited } from '../src/util/parallel.ts';

const args = Object.fromEntries(process.argv.slice(2).filter((a) => a.startsWith('--') && a.includes('=')).map((a) => a.slice(2).split('=') as [string, string]));
const SPEAKERS = Number(args.speakers ?? 100);
const SERVICE_COUNT = Number(args.services ?? 50);
const MINUTES = Number(args.minutes ?? 15);
const CHILD_ENV = 'EDGE_CCM_L2_RATE_CHILD';

// Bun's fetch runs at most 256 requests at once per process by default; 3 watches per speaker need more.
if (process.env[CHILD_ENV] !== '1') {
  const child = Bun.spawn([process.execPath, import.meta.path, ...process.argv.slice(2)], {
    env: { ...process.env, [CHILD_ENV]: '1', BUN_CONFIG_MAX_HTTP_REQUESTS: String(SPEAKERS * 4 + 64) },
    stdout: 'inherit',
    stderr: 'inherit',
  });
  process.exit(await child.exited);
}

const NS = 'edge-ccm-l2-bench';
const SA = 'edge-ccm-speaker';
const USER = `system:serviceaccount:${NS}:${SA}`;
const cp = await startControlPlane();
try {
  const admin = transportFor(cp.adminKubeconfig);
  const nodes = new ResourceClient<V1Node>(admin, NODES);
  const services = new ResourceClient<V1Service>(admin, SERVICES);
  const slices = new ResourceClient<V1EndpointSlice>(admin, ENDPOINT_SLICES);
  await admin.request({ method: 'POST', path: '/api/v1/namespaces', body: { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS } } });
  await applyManifests(admin, helmTemplate({ release: 'bench', namespace: NS, values: { speaker: { enabled: true, serviceAccount: { name: SA } } }, showOnly: ['speaker-rbac.yaml'] }));
  const token = await cp.serviceAccountToken(NS, SA);
  const kubeconfig = await writeKubeconfig(join(cp.dir, 'speaker.kubeconfig'), cp.server, cp.caPem, 'speaker', { token });

  const nodeName = (i: number) => `bench-n${i}`;
  await forEachLimited(Array.from({ length: SPEAKERS }, (_, i) => i), 16, async (i) => {
    await nodes.create({ apiVersion: 'v1', kind: 'Node', metadata: { name: nodeName(i), labels: { 'kubernetes.io/hostname': nodeName(i) } } });
    await setReady(nodes, nodeName(i), 'True');
  });
  await forEachLimited(Array.from({ length: SERVICE_COUNT }, (_, i) => i), 16, async (i) => {
    await services.create({ apiVersion: 'v1', kind: 'Service', metadata: { name: `svc-${i}`, namespace: NS }, spec: { type: 'LoadBalancer', selector: { app: `a${i}` }, ports: [{ port: 80 }] } }, { namespace: NS });
    await slices.create(slice(i, i % SPEAKERS), { namespace: NS });
  });
  const pools = loadSpeakerConfig('loadBalancer:\n  pools:\n    - { name: lan, addresses: [198.51.100.0/24], announce: l2 }\n');
  if (!pools.ok) throw new Error(JSON.stringify(pools.errors));
  const keyPath = join(cp.dir, 'liveness.key');
  writeFileSync(keyPath, 'k'.repeat(48));
  const ports = await freeLoopbackPorts(SPEAKERS);

  const stop = new AbortController();
  const startedAt = new Date();
  const runs = Array.from({ length: SPEAKERS }, (_, i) => {
    const speaker = new L2Announcer({
      node: nodeName(i),
      transport: transportFor(kubeconfig, { qps: 20, burst: 30, userAgent: `edge-ccm-speaker/${nodeName(i)}` }),
      pools: pools.config,
      liveness: { key: new TextEncoder().encode('k'.repeat(48)), port: ports[i]!, bindAddress: '127.0.0.1' },
      logger: silentLogger,
      registry: new Registry(),
    });
    return speaker.run(stop.signal);
  });
  console.log(`${SPEAKERS} speakers started at ${startedAt.toISOString()}; measuring for ${MINUTES} min with churn every 10 s`);

  // Churn: endpoints move and a node's labels change; the watches carry it, no speaker asks.
  let tick = 0;
  const churn = setInterval(async () => {
    tick++;
    const i = tick % SERVICE_COUNT;
    await slices.delete(`svc-${i}-1`, { namespace: NS }).catch(() => undefined);
    await slices.create(slice(i, (i + tick) % SPEAKERS), { namespace: NS }).catch(() => undefined);
    await nodes.patch(nodeName(tick % SPEAKERS), 'merge', { metadata: { labels: { 'bench/tick': String(tick) } } }).catch(() => undefined);
  }, 10_000);

  const perMinute: number[] = [];
  let seen = 0;
  for (let m = 1; m <= MINUTES; m++) {
    await Bun.sleep(60_000);
    const ours = received(cp.auditLogPath);
    perMinute.push(ours.length - seen);
    seen = ours.length;
    console.log(`minute ${m}: ${perMinute.at(-1)} requests from ${SPEAKERS} speakers`);
  }
  clearInterval(churn);
  stop.abort();
  await Promise.allSettled(runs);

  const all = received(cp.auditLogPath);
  const denied = readFileSync(cp.auditLogPath, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as AuditEntry)
    .filter((e) => e.stage === 'ResponseComplete' && e.user?.username === USER && e.responseStatus?.code === 403).length;
  const byKind = new Map<string, number>();
  for (const e of all) byKind.set(`${e.verb} ${e.objectRef?.resource}`, (byKind.get(`${e.verb} ${e.objectRef?.resource}`) ?? 0) + 1);
  const steady = perMinute.slice(1);
  const steadyPerMinute = steady.reduce((a, b) => a + b, 0) / Math.max(1, steady.length);
  console.log(JSON.stringify({
    speakers: SPEAKERS,
    services: SERVICE_COUNT,
    minutes: MINUTES,
    firstMinute: perMinute[0],
    steadyRequestsPerMinute: Number(steadyPerMinute.toFixed(1)),
    steadyPerSpeakerPerMinute: Number((steadyPerMinute / SPEAKERS).toFixed(3)),
    denied,
    byKind: Object.fromEntries(byKind),
  }, null, 2));
} finally {
  await cp.stop();
}

/** The speakers' requests as they arrived (a watch completes only when it ends: counted at its start). */
function received(path: string): AuditEntry[] {
  return readFileSync(path, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as AuditEntry)
    .filter((e) => e.stage === 'RequestReceived' && e.user?.username === USER);
}

function slice(i: number, node: number): V1EndpointSlice {
  return {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: { name: `svc-${i}-1`, namespace: NS, labels: { 'kubernetes.io/service-name': `svc-${i}` } },
    addressType: 'IPv4',
    endpoints: [{ addresses: [`10.244.0.${(i % 250) + 1}`], nodeName: `bench-n${node}`, conditions: { ready: true } }],
  };
}
