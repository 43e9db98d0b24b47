/**
 * The serving port under a flood of random bearer tokens: how long a request with a valid token,
 * never seen before (so it needs a TokenReview and a SubjectAccessReview of its own), takes while
 * 2000 requests with random tokens hit the port from another address. Run through
 * scripts/bench-auth-flood, which builds the binary first. Flags:
 *   --rounds=N          good requests measured per mode, each during a flood of its own (default 5)
 *   --flood=N           random-token requests per flood (default 2000)
 *   --concurrency=N     flood requests in flight at once (default 256, the most Bun's fetch opens)
 *   --modes=kubeconfig,authentication-kubeconfig   reviews through --kubeconfig, or through
 *                       --authentication-kubeconfig/--authorization-kubeconfig
 *   --binary=PATH       the edge-ccm to measure (default: the bench build of this tree)
 * Prints a Markdown table; each run gets a fresh control plane.
 */
import { join } from 'node:path';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { startControlPlane } from '../test/harness/control-plane.ts';
import { Flood, requestFrom } from '../test/harness/auth-flood.ts';
import { eventually } from '../test/harness/eventually.ts';
import { transportFor } from '../test/harness/kubeconfig.ts';
import { freeLoopbackPorts } from '../test/harness/ports.ts';
import { BENCH_CACHE, writeEdgeFakeConfig } from './sides.ts';
import { option as opt } from './args.ts';

const rounds = Number(opt('rounds') ?? 5);
const floodSize = Number(opt('flood') ?? 2000);
const concurrency = Number(opt('concurrency') ?? 256);
const modes = (opt('modes') ?? 'kubeconfig,authentication-kubeconfig').split(',');
const binary = opt('binary') ?? join(BENCH_CACHE, 'edge-ccm-fake');

const log = (msg: string) => console.error(`[bench-auth-flood ${new Date().toISOString().slice(11, 19)}] ${msg}`);
const SA_NAMESPACE = 'bench-auth-flood';
const SA_NAME = 'scraper';

interface Row {
  mode: string;
  round: number | 'idle';
  status: number;
  ms: number;
  sent: number;
  statuses: Record<number, number>;
  floodSeconds: number;
}

const cp = await startControlPlane();
const dir = mkdtempSync(join(tmpdir(), 'edge-ccm-bench-auth-flood-'));
const rows: Row[] = [];
try {
  // The scraper's service account may read /metrics: its fresh tokens go through both reviews.
  const admin = transportFor(cp.adminKubeconfig);
  await admin.request({
    method: 'POST', path: '/apis/rbac.authorization.k8s.io/v1/clusterroles',
    body: { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', metadata: { name: 'bench-metrics-reader' }, rules: [{ nonResourceURLs: ['/metrics'], verbs: ['get'] }] },
  });
  await admin.request({
    method: 'POST', path: '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings',
    body: {
      apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRoleBinding', metadata: { name: 'bench-metrics-reader' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'bench-metrics-reader' },
      subjects: [{ kind: 'ServiceAccount', name: SA_NAME, namespace: SA_NAMESPACE }],
    },
  });
  const fakeConfig = writeEdgeFakeConfig(dir);
  for (const mode of modes) {
    const [port] = await freeLoopbackPorts(1);
    const url = `https://127.0.0.1:${port}/metrics`;
    const authFlags = mode === 'authentication-kubeconfig'
      ? [`--authentication-kubeconfig=${cp.adminKubeconfig}`, `--authorization-kubeconfig=${cp.adminKubeconfig}`]
      : [];
    const logPath = join(dir, `edge-ccm-${mode}.log`);
    const fd = openSync(logPath, 'a');
    const proc = Bun.spawn({
      cmd: [binary, '--cloud-provider=fake', `--cloud-config=${fakeConfig}`, `--kubeconfig=${cp.adminKubeconfig}`, ...authFlags,
        '--bind-address=127.0.0.1', `--secure-port=${port}`, '--configure-cloud-routes=false', `--leader-elect-resource-name=bench-auth-flood-${mode}`],
      stdin: 'ignore', stdout: fd, stderr: fd,
    });
    closeSync(fd);
    try {
      await eventually('edge-ccm to serve', async () => {
        if (proc.exitCode !== null) throw new Error(`edge-ccm exited (${proc.exitCode}):\n${readFileSync(logPath, 'utf8').slice(-3000)}`);
        return fetch(url, { tls: { rejectUnauthorized: false } }).then((r) => r.status === 401, () => false);
      }, 120_000);
      // The scraper's first request with no flood: the floor the flood rounds compare to.
      const idle = await requestFrom('127.0.0.2', url, await cp.serviceAccountToken(SA_NAMESPACE, SA_NAME));
      rows.push({ mode, round: 'idle', status: idle.status, ms: idle.ms, sent: 0, statuses: {}, floodSeconds: 0 });
      for (let round = 1; round <= rounds; round++) {
        const token = await cp.serviceAccountToken(SA_NAMESPACE, SA_NAME); // a new token: never cached
        const started = performance.now();
        const flood = new Flood({ url, total: floodSize, concurrency });
        await eventually('the flood to be under way', () => flood.answered >= 50, 120_000);
        const good = requestFrom('127.0.0.2', url, token);
        flood.extendUntil(good);
        const answer = await good;
        await flood.finished();
        rows.push({ mode, round, status: answer.status, ms: answer.ms, sent: flood.sent, statuses: flood.statuses, floodSeconds: (performance.now() - started) / 1000 });
        log(`${mode} round ${round}: good request ${answer.status} in ${answer.ms.toFixed(1)} ms; flood ${JSON.stringify(flood.statuses)}`);
        // The next round starts from a rested client budget, as the first did.
        await Bun.sleep(3_000);
      }
    } finally {
      proc.kill('SIGTERM');
      await proc.exited;
    }
  }
} finally {
  await cp.stop();
  rmSync(dir, { recursive: true, force: true });
}

const fmt = (ms: number) => (ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${ms.toFixed(1)} ms`);
console.log(`Good request (fresh service-account token, from 127.0.0.2) during a flood of ${floodSize} random-token requests (${concurrency} in flight, from 127.0.0.1):\n`);
console.log('| reviews through | round | good request | latency | flood requests | flood answers | flood s |');
console.log('|---|---|---|---|---|---|---|');
for (const r of rows) {
  const answers = Object.entries(r.statuses).map(([s, n]) => `${s}: ${n}`).join(', ') || '-';
  console.log(`| ${r.mode} | ${r.round} | ${r.status} | ${fmt(r.ms)} | ${r.sent || '-'} | ${answers} | ${r.floodSeconds ? r.floodSeconds.toFixed(1) : '-'} |`);
}
for (const mode of modes) {
  const flooded = rows.filter((r) => r.mode === mode && r.round !== 'idle').map((r) => r.ms).sort((a, b) => a - b);
  if (!flooded.length) continue;
  const mid = flooded.length / 2;
  const median = flooded.length % 2 ? flooded[Math.floor(mid)]! : (flooded[mid - 1]! + flooded[mid]!) / 2;
  console.log(`\n${mode}: good request during the flood, median ${fmt(median)}, max ${fmt(flooded.at(-1)!)}`);
}
