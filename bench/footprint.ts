/**
 * What a per-node process costs (issue 38): `edge-ccm speaker` beside MetalLB's speaker (L2 mode)
 * and Bun's floor (an empty `bun build --compile` binary that only waits), all started at once
 * against one real kube-apiserver holding three Ready nodes and S LoadBalancer services (each with
 * an address from 198.51.100.0/24 in its status and a ready endpoint on node bench-n1). Every side
 * runs as bench-n1. Per step of --services (the services are added, the sides keep running): RSS
 * after the settle, then CPU-seconds and RSS over an idle window. The load average is printed with
 * every CPU figure (the machine is shared).
 *
 *   bun bench/footprint.ts [--services=10,100] [--settle-seconds=20] [--idle-seconds=60]
 *     [--metallb=PATH (default: built by scripts/install-anchors.sh)] [--metallb-crds=DIR]
 *     [--variant=NAME:BINARY[::ENV=V,...]]...   (default: dist/edge-ccm, and it again with BUN_OPTIONS=--smol and with BUN_JSC_useJIT=0)
 *
 * Runs in the machine's namespace and announces nothing on the wire: no interface here is on
 * 198.51.100.0/24, so edge-ccm's L2 announcer places no address, and MetalLB's L2Advertisement
 * names only an interface that does not exist. Both still do all their API work (watches, the
 * election over the services, the pools). MetalLB's memberlist runs on loopback, alone, as
 * edge-ccm's heartbeats go nowhere (the nodes list no address).
 */
import { existsSync, mkdirSync, writeFileSync, readFileSync, readdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { V1EndpointSlice, V1Node, V1Service } from '@kubernetes/client-node';
import { NODES, ResourceClient, SERVICES } from '../src/kube/resources.ts';
import { ENDPOINT_SLICES } from '../src/kube/endpoint-slices.ts';
import { startControlPlane } from '../test/harness/control-plane.ts';
import { transportFor } from '../test/harness/kubeconfig.ts';
import { applyManifests } from '../test/harness/manifests.ts';
import { setReady } from '../test/harness/nodes.ts';
import { freeLoopbackPorts } from '../test/harness/ports.ts';
import { LoggedProcess } from '../test/harness/processes.ts';
import { evictFromPageCache } from './page-cache.ts';
import { compileProgram } from './compile-program.ts';
import { forEachLimited } from '../src/util/parallel.ts';
import { cpuSeconds, idleWindow } from './proc-sampler.ts';
import { parseVariants } from './variants.ts';
import { anchors } from './anchors.ts';
import { stringOption as opt } from './args.ts';

const ROOT = resolve(import.meta.dir, '..');
const args = process.argv.slice(2);
const STEPS = opt('services', '10,100').split(',').map(Number);
const SETTLE_S = Number(opt('settle-seconds', '20'));
const IDLE_S = Number(opt('idle-seconds', '60'));
const METALLB = opt('metallb', '') || anchors().metallbSpeaker;
const METALLB_CRDS = opt('metallb-crds', '') || anchors().metallbCrds;
const BINARY = join(ROOT, 'dist/edge-ccm');
const variants = parseVariants(args, [`edge-ccm:${BINARY}`, `edge-ccm --smol:${BINARY}::BUN_OPTIONS=--smol`, `edge-ccm without JIT:${BINARY}::BUN_JSC_useJIT=0`]);
if (!existsSync(METALLB)) throw new Error(`${METALLB} is missing: give the speaker built by scripts/install-anchors.sh or another`);

const NS = 'edge-ccm-footprint';
const METALLB_NS = 'metallb-system';
const NODE = 'bench-n1';

interface Side { name: string; proc: LoggedProcess }

const cp = await startControlPlane();
const sides: Side[] = [];
try {
  const admin = transportFor(cp.adminKubeconfig);
  const nodes = new ResourceClient<V1Node>(admin, NODES);
  const services = new ResourceClient<V1Service>(admin, SERVICES);
  const slices = new ResourceClient<V1EndpointSlice>(admin, ENDPOINT_SLICES);
  for (const ns of [NS, METALLB_NS]) await admin.request({ method: 'POST', path: '/api/v1/namespaces', body: { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } } });
  for (const n of [1, 2, 3]) {
    await nodes.create({ apiVersion: 'v1', kind: 'Node', metadata: { name: `bench-n${n}`, labels: { 'kubernetes.io/hostname': `bench-n${n}` } } });
    await setReady(nodes, `bench-n${n}`, 'True');
  }
  for (const f of readdirSync(METALLB_CRDS).filter((f) => f.endsWith('.yaml'))) await applyManifests(admin, readFileSync(join(METALLB_CRDS, f), 'utf8'));
  await Bun.sleep(3000); // the CRDs' endpoints come up
  // MetalLB's speaker reads its own pod at start.
  await applyManifests(admin, [
    `apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: default, namespace: ${METALLB_NS}}`,
    `apiVersion: v1\nkind: Pod\nmetadata: {name: speaker-bench, namespace: ${METALLB_NS}, labels: {app: metallb, component: speaker}}\nspec: {nodeName: ${NODE}, automountServiceAccountToken: false, containers: [{name: speaker, image: speaker}]}`,
  ].join('\n---\n'));
  await applyManifests(admin, [
    `apiVersion: metallb.io/v1beta1\nkind: IPAddressPool\nmetadata: {name: lan, namespace: ${METALLB_NS}}\nspec: {addresses: [198.51.100.0/24]}`,
    `apiVersion: metallb.io/v1beta1\nkind: L2Advertisement\nmetadata: {name: lan, namespace: ${METALLB_NS}}\nspec: {ipAddressPools: [lan], interfaces: [fpbench-none0]}`,
  ].join('\n---\n'));

  const dir = join(cp.dir, 'footprint');
  mkdirSync(dir, { recursive: true });
  const config = join(dir, 'speaker.yaml');
  writeFileSync(config, 'loadBalancer:\n  pools:\n    - { name: lan, addresses: [198.51.100.0/24], announce: l2 }\n');
  const key = join(dir, 'liveness.key');
  writeFileSync(key, 'k'.repeat(48), { mode: 0o600 });

  let created = 0;
  const addServices = async (upTo: number) => {
    await forEachLimited(Array.from({ length: upTo - created }, (_, i) => created + i), 8, async (i) => {
      const svc = await services.create({ apiVersion: 'v1', kind: 'Service', metadata: { name: `svc-${i}`, namespace: NS }, spec: { type: 'LoadBalancer', selector: { app: `a${i}` }, ports: [{ port: 80 }] } }, { namespace: NS });
      const ip = `198.51.100.${10 + (i % 240)}`;
      await services.patch(svc.metadata!.name!, 'merge', { status: { loadBalancer: { ingress: [{ ip, ipMode: 'VIP' }] } } }, { namespace: NS, subresource: 'status' });
      await slices.create({
        apiVersion: 'discovery.k8s.io/v1', kind: 'EndpointSlice',
        metadata: { name: `svc-${i}-1`, namespace: NS, labels: { 'kubernetes.io/service-name': `svc-${i}` } },
        addressType: 'IPv4',
        endpoints: [{ addresses: [`10.244.${Math.floor(i / 250)}.${(i % 250) + 1}`], nodeName: NODE, conditions: { ready: true } }],
        ports: [{ port: 80, protocol: 'TCP' }],
      }, { namespace: NS });
    });
    created = upTo;
  };
  await addServices(STEPS[0]!);

  // The floor: Bun's runtime with nothing to do.
  const emptySrc = join(dir, 'empty.ts');
  writeFileSync(emptySrc, 'setInterval(() => {}, 1 << 30);\n');
  const empty = join(dir, 'bun-empty');
  compileProgram(emptySrc, empty);
  const spawn = (name: string, cmd: string[], env: Record<string, string> = {}) => {
    const fileName = name.replace(/[^a-z0-9-]+/gi, '_');
    const proc = spawnEnv(fileName, cmd, env);
    sides.push({ name, proc });
  };
  evictFromPageCache([empty, METALLB, ...variants.map((v) => v.binary)]);
  spawn('bun floor (empty compiled binary)', [empty]);
  const ports = await freeLoopbackPorts(variants.length);
  variants.forEach((v, i) => spawn(v.name, [v.binary, 'speaker', `--cloud-config=${config}`, `--node-name=${NODE}`, `--kubeconfig=${cp.adminKubeconfig}`, `--liveness-key-file=${key}`, `--liveness-port=${ports[i]}`, '--metrics-bind-address=0'], v.env));
  // Its memberlist on (on loopback, alone): the fast failure detection its L2 mode has, as edge-ccm's heartbeats are.
  const [metallbPort, memberlistPort] = await freeLoopbackPorts(2);
  const mlSecretDir = join(dir, 'memberlist');
  mkdirSync(mlSecretDir);
  writeFileSync(join(mlSecretDir, 'secretkey'), 'k'.repeat(32), { mode: 0o600 });
  spawn('MetalLB speaker v0.15.2 (L2, memberlist on)', [METALLB, `--node-name=${NODE}`, `--namespace=${METALLB_NS}`, `--kubeconfig=${cp.adminKubeconfig}`, '--host=127.0.0.1', `--port=${metallbPort}`, '--log-level=warn', '--pod-name=speaker-bench',
    '--ml-bindaddr=127.0.0.1', `--ml-bindport=${memberlistPort}`, '--ml-labels=app=metallb,component=speaker', `--ml-secret-key-path=${mlSecretDir}`]);

  const rows: string[] = [];
  let previous = 0;
  for (const step of STEPS) {
    // The step's new services (3 writes each: the service, its status, its slice) as the sides see them: CPU until the settle ends.
    const cpuBefore = sides.map((s) => cpuSeconds(s.proc.pid));
    await addServices(step);
    await Bun.sleep(SETTLE_S * 1000);
    const changeCpu = sides.map((s, i) => cpuSeconds(s.proc.pid) - cpuBefore[i]!);
    const added = step - previous;
    previous = step;
    for (const s of sides) if (!s.proc.running) throw new Error(`${s.name} exited: ${readFileSync(s.proc.logPath, 'utf8').slice(-2000)}`);
    const { figures, load } = await idleWindow(sides.map((s) => s.proc.pid), IDLE_S);
    sides.forEach((s, i) => {
      const f = figures[i]!;
      const perChange = added > 0 && step !== STEPS[0] ? `${((changeCpu[i]! * 1000) / added).toFixed(1)} (${changeCpu[i]!.toFixed(1)} s)` : '-';
      const row = `| ${s.name} | ${step} | ${perChange} | ${f.rssStart.toFixed(1)} | ${f.rssEnd.toFixed(1)} | ${f.anonEnd.toFixed(1)} | ${f.referenced.toFixed(1)} (${f.referencedCode.toFixed(1)}) | ${f.cpuPerMinute.toFixed(3)} | ${f.wakeupsPerSecond.toFixed(1)} | ${load} |`;
      rows.push(row);
      console.log(row);
      console.log(`  ${s.name}: wake-ups/s by thread: ${f.byThread}`);
    });
  }
  console.log(`\n| side | services | CPU-ms per service added, from the previous step, until the settle ends (total) | RSS after ${SETTLE_S} s settle (MiB) | RSS after ${IDLE_S} s idle (MiB) | of it anonymous (MiB) | touched in the idle window (of it machine code), MiB | idle CPU-s/min | wake-ups/s (voluntary context switches, all threads) | load avg (1 min) |\n|---|---|---|---|---|---|---|---|---|---|\n${rows.join('\n')}`);
} finally {
  for (const s of sides) await s.proc.terminate(5000).catch(() => s.proc.kill());
  await cp.stop();
}


/** The side's own variables through env(1), which execs: the pid is the side's. */
function spawnEnv(name: string, cmd: string[], env: Record<string, string>): LoggedProcess {
  const prefix = Object.keys(env).length ? ['/usr/bin/env', ...Object.entries(env).map(([k, v]) => `${k}=${v}`)] : [];
  return LoggedProcess.spawn(name, [...prefix, ...cmd], join(cp.dir, 'footprint'));
}
