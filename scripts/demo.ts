/**
 * The main job, end to end on this machine: a real local control plane (etcd + kube-apiserver),
 * three nodes registered the way kubelets with --cloud-provider=external register (uninitialized
 * taint), the compiled edge-ccm with the static provider and examples/inventory.yaml, and a
 * LoadBalancer service. Shows the result and keeps edge-ccm running until Ctrl-C, which stops
 * everything it started. With --once it exits after showing the result (used by the tests).
 */
import type { V1Node, V1Service } from '@kubernetes/client-node';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { startControlPlane } from '../test/harness/control-plane.ts';
import { CcmProcess } from '../test/harness/ccm-process.ts';
import { transportFor } from '../test/harness/kubeconfig.ts';
import { freeLoopbackPorts } from '../test/harness/ports.ts';
import { eventually } from '../test/harness/eventually.ts';
import { NODES, ResourceClient, SERVICES } from '../src/kube/resources.ts';

const root = resolve(import.meta.dir, '..');
const once = process.argv.includes('--once');
const inventory = join(root, 'examples/inventory.yaml');
const DEMO_NODES = [
  { name: 'node-a', ip: '10.0.0.11', podCIDR: '10.244.1.0/24' },
  { name: 'node-b', ip: '10.0.0.12', podCIDR: '10.244.2.0/24' },
  { name: 'node-c', ip: '10.0.0.13', podCIDR: '10.244.3.0/24' },
];

console.log('== starting a local control plane (etcd + kube-apiserver on loopback)');
const cp = await startControlPlane();
let ccm: CcmProcess | undefined;
const shutdown = async (code: number) => {
  console.log('\n== stopping edge-ccm and the control plane');
  if (ccm) await ccm.stop('SIGTERM');
  await cp.stop();
  process.exit(code);
};
process.on('SIGINT', () => void shutdown(0));
process.on('SIGTERM', () => void shutdown(0));

try {
  const admin = transportFor(cp.adminKubeconfig);
  const nodes = new ResourceClient<V1Node>(admin, NODES);
  const services = new ResourceClient<V1Service>(admin, SERVICES);
  console.log(`   API server ${cp.server}, admin kubeconfig ${cp.adminKubeconfig}`);

  console.log('== registering nodes as kubelets with --cloud-provider=external do (uninitialized taint)');
  for (const n of DEMO_NODES) {
    await nodes.create({
      metadata: { name: n.name },
      spec: { podCIDR: n.podCIDR, podCIDRs: [n.podCIDR], taints: [{ key: 'node.cloudprovider.kubernetes.io/uninitialized', value: 'true', effect: 'NoSchedule' }] },
    });
    await nodes.patch(n.name, 'merge', { status: { addresses: [{ type: 'InternalIP', address: n.ip }, { type: 'Hostname', address: n.name }] } }, { subresource: 'status' });
  }

  const [port] = await freeLoopbackPorts(1);
  const started = performance.now();
  console.log('== starting dist/edge-ccm with the static provider and examples/inventory.yaml');
  ccm = CcmProcess.binary([
    '--cloud-provider=static', `--cloud-config=${inventory}`, `--kubeconfig=${cp.adminKubeconfig}`,
    '--bind-address=127.0.0.1', `--secure-port=${port}`, '--configure-cloud-routes=false',
  ]);
  await ccm.waitForLog('successfully acquired lease', 60_000);

  for (const n of DEMO_NODES) {
    await eventually(`${n.name} initialised`, async () => {
      const node = await nodes.get(n.name);
      return node.spec?.taints?.some((t) => t.key === 'node.cloudprovider.kubernetes.io/uninitialized') ? undefined : node;
    });
  }
  console.log(`   all nodes initialised ${(performance.now() - started).toFixed(0)} ms after edge-ccm was started`);

  console.log('== creating a LoadBalancer service default/demo-web');
  await services.create({ metadata: { name: 'demo-web', namespace: 'default' }, spec: { type: 'LoadBalancer', ports: [{ name: 'http', port: 80, protocol: 'TCP', targetPort: 8080 }] } });
  const svc = await eventually('external IP', async () => {
    const s = await services.get('demo-web', { namespace: 'default' });
    return s.status?.loadBalancer?.ingress?.length ? s : undefined;
  });

  console.log('\nNODES');
  for (const n of (await nodes.list()).items) {
    const l = n.metadata?.labels ?? {};
    const addrs = (n.status?.addresses ?? []).map((a) => `${a.type}=${a.address}`).join(' ');
    console.log(`  ${n.metadata?.name}  ${n.spec?.providerID}  type=${l['node.kubernetes.io/instance-type']}  zone=${l['topology.kubernetes.io/zone']}  region=${l['topology.kubernetes.io/region']}  ${addrs}`);
  }
  console.log('\nSERVICES');
  console.log(`  default/demo-web  type=LoadBalancer  external IP=${svc.status?.loadBalancer?.ingress?.map((i) => i.ip).join(',')}`);

  const token = readFileSync(cp.tokenKubeconfig('admin'), 'utf8').match(/token: (\S+)/)?.[1];
  console.log('\nedge-ccm is running (pid ' + ccm.pid + ')');
  console.log(`  health:  curl -k https://127.0.0.1:${port}/healthz?verbose`);
  console.log(`  ready:   curl -k https://127.0.0.1:${port}/readyz`);
  console.log(`  metrics: curl -k -H 'Authorization: Bearer ${token}' https://127.0.0.1:${port}/metrics`);
  console.log(`  kubeconfig for kubectl: ${cp.adminKubeconfig}`);
  if (once) await shutdown(0);
  console.log('Press Ctrl-C to stop everything.');
  await ccm.exited();
  console.log('edge-ccm exited:\n' + ccm.logs().slice(-2000));
  await shutdown(1);
} catch (e) {
  console.error(`demo failed: ${(e as Error).message}`);
  if (ccm) console.error(ccm.logs().slice(-4000));
  await shutdown(1);
}

