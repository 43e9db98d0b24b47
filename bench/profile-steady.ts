/**
 * Profiles edge-ccm (from source, with the fake provider) in the steady-state cluster of the
 * bench: N initialised nodes and M LoadBalancer services already done. Writes a CPU profile in
 * Markdown (bun --cpu-prof-md) into the given dir. For finding where edge-ccm spends its time;
 * not part of scripts/bench's figures.
 * Usage: bun bench/profile-steady.ts OUT_DIR [--nodes=5000] [--services=5000] [--seconds=40]
 */
import { join, resolve } from 'node:path';
import { startControlPlane } from '../test/harness/control-plane.ts';
import { transportFor } from '../test/harness/kubeconfig.ts';
import { freeLoopbackPorts } from '../test/harness/ports.ts';
import { writeEdgeFakeConfig } from './sides.ts';
import { prepareSteadyState } from './workloads.ts';
import { numberOption as opt } from './args.ts';

const argv = process.argv.slice(2);
const outDir = resolve(argv.find((a) => !a.startsWith('--')) ?? '.');
const root = resolve(import.meta.dir, '..');

const cp = await startControlPlane({ extraApiServerFlags: ['--service-cluster-ip-range=10.0.0.0/16'] });
let proc: ReturnType<typeof Bun.spawn> | undefined;
try {
  await prepareSteadyState(transportFor(cp.adminKubeconfig), opt('nodes', 5000), opt('services', 5000));
  const kubeconfig = await cp.clientCertKubeconfig('bench-profile', ['system:masters']);
  const [port] = (await freeLoopbackPorts(1)) as [number];
  proc = Bun.spawn({
    cmd: [process.execPath, '--cpu-prof-md', `--cpu-prof-dir=${outDir}`, join(root, 'bench/edge-fake-main.ts'),
      '--cloud-provider=fake', `--cloud-config=${writeEdgeFakeConfig(outDir)}`, `--kubeconfig=${kubeconfig}`,
      '--bind-address=127.0.0.1', `--secure-port=${port}`, '--configure-cloud-routes=false'],
    stdout: Bun.file(join(outDir, 'edge-ccm.log')), stderr: Bun.file(join(outDir, 'edge-ccm.err')),
  });
  await Bun.sleep(opt('seconds', 40) * 1000);
} finally {
  if (proc) {
    proc.kill('SIGTERM');
    const timer = setTimeout(() => proc?.kill('SIGKILL'), 60_000);
    await proc.exited;
    clearTimeout(timer);
  }
  await cp.stop();
}
console.log(`profile in ${outDir}`);
