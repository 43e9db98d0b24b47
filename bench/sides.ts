import { closeSync, openSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Subprocess } from 'bun';
import { chartEnvironment } from './deployed-env.ts';

/**
 * The processes under test. Every side runs as its own client-certificate user (so the audit
 * log tells their requests apart) with its own lease name, logs to a file in the run dir, and
 * is ended by pid. Binaries are built by scripts/bench into the cache dir.
 */

export const BENCH_CACHE = process.env.EDGE_CCM_BENCH_DIR
  ?? join(process.env.EDGE_CCM_CACHE || join(process.env.XDG_CACHE_HOME || join(process.env.HOME ?? '/root', '.cache'), 'edge-ccm'), 'bench');

/**
 * Only with --sides: `reference-json`, the reference asking for JSON as edge-ccm does (upstream's
 * default is protobuf); `edge-ccm-h1`, edge-ccm with DISABLE_HTTP2 set (HTTP/1.1 to the API server).
 */
/** What the chart's controller Deployment sets (its env entries with a literal value). */
const CONTROLLER_ENV = chartEnvironment('deployment.yaml');

export type SideName = 'edge-ccm' | 'edge-ccm-h1' | 'reference' | 'reference-json' | 'floor' | 'floor-lifecycle';

/** Concurrency and client rate limits, passed to every side alike. */
export interface Profile {
  name: string;
  concurrency: number;
  qps: number;
  burst: number;
  /** Whether the flags are passed at all (false: each side at its own defaults). */
  explicit: boolean;
}

/** Upstream's defaults: --concurrent-node-syncs=1 --concurrent-service-syncs=1 --kube-api-qps=20 --kube-api-burst=30. */
export const DEFAULTS: Profile = { name: 'defaults', concurrency: 1, qps: 20, burst: 30, explicit: false };
export const RAISED: Profile = { name: 'equal, raised', concurrency: 10, qps: 100, burst: 200, explicit: true };
/** No effective client limit: what each side does when only its own work and the API server bind. */
export const UNBOUND: Profile = { name: 'unbound', concurrency: 20, qps: 100_000, burst: 100_000, explicit: true };
export const PROFILES: Record<string, Profile> = { defaults: DEFAULTS, raised: RAISED, unbound: UNBOUND };

export const FAKE_INGRESS_IP = '192.0.2.10';

/** edge-ccm's fake provider answers as the reference's fake is configured in bench/reference/main.go. */
export function writeEdgeFakeConfig(dir: string): string {
  const path = join(dir, 'edge-fake.json');
  writeFileSync(path, JSON.stringify({
    autoMetadata: { instanceType: 'bench.small', zone: 'zone-a', region: 'region-a', externalIP: FAKE_INGRESS_IP },
    ingressIP: FAKE_INGRESS_IP,
    routes: false,
  }));
  return path;
}

export interface SideProcess {
  side: SideName;
  pid: number;
  startedAt: number;
  logPath: string;
  proc: Subprocess;
  stop(): Promise<void>;
}

export interface SideLaunch {
  side: SideName;
  kubeconfig: string;
  leaseName: string;
  port: number;
  profile: Profile;
  dir: string;
  fakeConfig: string;
}

function profileFlags(profile: Profile): string[] {
  if (!profile.explicit) return [];
  return [
    `--concurrent-node-syncs=${profile.concurrency}`,
    `--concurrent-service-syncs=${profile.concurrency}`,
    `--kube-api-qps=${profile.qps}`,
    `--kube-api-burst=${profile.burst}`,
  ];
}

export function commandFor(l: SideLaunch): string[] {
  if (l.side === 'floor' || l.side === 'floor-lifecycle') {
    // floor-lifecycle: the node lifecycle controller's period and a leader's renewal, at upstream's defaults (5 s, 2 s).
    const lifecycle = l.side === 'floor-lifecycle' ? ['--lifecycle-pass-ms=5000', '--lease-renew-ms=2000', `--lease-name=${l.leaseName}`] : [];
    return [join(BENCH_CACHE, 'floor'), `--kubeconfig=${l.kubeconfig}`,
      `--concurrency=${l.profile.concurrency}`, `--qps=${l.profile.qps}`, `--burst=${l.profile.burst}`, ...lifecycle];
  }
  const common = [
    '--cloud-provider=fake',
    `--kubeconfig=${l.kubeconfig}`,
    `--authentication-kubeconfig=${l.kubeconfig}`,
    `--authorization-kubeconfig=${l.kubeconfig}`,
    '--bind-address=127.0.0.1',
    `--secure-port=${l.port}`,
    '--configure-cloud-routes=false',
    `--leader-elect-resource-name=${l.leaseName}`,
    ...profileFlags(l.profile),
  ];
  if (l.side === 'edge-ccm' || l.side === 'edge-ccm-h1') return [join(BENCH_CACHE, 'edge-ccm-fake'), ...common, `--cloud-config=${l.fakeConfig}`];
  const json = l.side === 'reference-json' ? ['--kube-api-content-type=application/json'] : [];
  return [join(BENCH_CACHE, 'reference-ccm'), ...common, '--webhook-secure-port=0', ...json];
}

const live = new Set<Subprocess>();
process.on('exit', () => {
  for (const p of live) if (p.exitCode === null) p.kill('SIGKILL');
});

export function launchSide(l: SideLaunch): SideProcess {
  const logPath = join(l.dir, `${l.side}-${l.leaseName}.log`);
  const fd = openSync(logPath, 'a');
  const startedAt = Date.now();
  let proc: Subprocess;
  try {
    // edge-ccm as its Deployment runs it; the floors under the same runtime settings (their floor is the runtime's, tuned alike).
    const env = l.side.startsWith('reference') ? process.env : { ...process.env, ...CONTROLLER_ENV, ...(l.side === 'edge-ccm-h1' ? { DISABLE_HTTP2: '1' } : {}) };
    proc = Bun.spawn({ cmd: commandFor(l), env, stdin: 'ignore', stdout: fd, stderr: fd });
  } finally {
    closeSync(fd);
  }
  live.add(proc);
  return {
    side: l.side, pid: proc.pid, startedAt, logPath, proc,
    async stop() {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
      const timer = setTimeout(() => proc.kill('SIGKILL'), 15_000);
      await proc.exited;
      clearTimeout(timer);
      live.delete(proc);
    },
  };
}
