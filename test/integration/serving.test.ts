import { afterAll, beforeAll, expect, test } from 'bun:test';
import type { V1Node, V1Service } from '@kubernetes/client-node';
import { sharedControlPlane, type ControlPlane } from '../harness/control-plane.ts';
import { CcmProcess, fakeProviderConfig } from '../harness/ccm-process.ts';
import { kubeconfigToken, transportFor } from '../harness/kubeconfig.ts';
import { freeLoopbackPorts } from '../harness/ports.ts';
import { NODES, ResourceClient, SERVICES } from '../../src/kube/resources.ts';
import { eventually } from '../harness/eventually.ts';

/** The process's HTTPS side: health endpoints per controller, and the upstream metric names. */
let cp: ControlPlane;
let ccm: CcmProcess;
let base: string;
let adminToken: string;
const tls = { rejectUnauthorized: false };

beforeAll(async () => {
  cp = await sharedControlPlane();
  const fakeConfig = fakeProviderConfig('edge-ccm-serving-');
  const [port] = await freeLoopbackPorts(1);
  base = `https://127.0.0.1:${port}`;
  adminToken = kubeconfigToken(cp.tokenKubeconfig('admin'));
  ccm = CcmProcess.fake([
    '--cloud-provider=fake', `--cloud-config=${fakeConfig}`, `--kubeconfig=${cp.adminKubeconfig}`,
    '--bind-address=127.0.0.1', `--secure-port=${port}`, '--cluster-cidr=10.245.0.0/16',
    `--leader-elect-resource-name=serving-${process.pid}`, '--route-reconciliation-period=1s',
  ]);
  await ccm.waitForLog('successfully acquired lease');
  await ccm.waitForLog('starting route controller');
}, 240_000);

afterAll(async () => {
  await ccm?.stop();
});

test('/healthz, /readyz and /livez answer ok without a token, with one check per controller', async () => {
  for (const path of ['/healthz', '/readyz', '/livez']) {
    const res = await fetch(`${base}${path}?verbose`, { tls });
    expect(res.status).toBe(200);
    expect(await res.text()).toContain('[+]ping ok');
  }
  const healthz = await (await fetch(`${base}/healthz?verbose`, { tls })).text();
  expect(healthz).toContain('[+]leaderElection ok');
  for (const c of ['cloud-node-controller', 'cloud-node-lifecycle-controller', 'service-lb-controller', 'node-route-controller']) {
    expect(healthz).toContain(`[+]${c} ok`);
  }
  // Only the listed paths are open, as upstream: a single check's page needs a token.
  expect((await fetch(`${base}/healthz/leaderElection`, { tls })).status).toBe(401);
  const single = await fetch(`${base}/healthz/leaderElection`, { headers: { authorization: `Bearer ${adminToken}` }, tls });
  expect(single.status).toBe(200);
});

test('/metrics needs a token and exposes the upstream metric names', async () => {
  expect((await fetch(`${base}/metrics`, { tls })).status).toBe(401);
  const admin = transportFor(cp.adminKubeconfig);
  const node = `serving-${process.pid}`;
  await new ResourceClient<V1Node>(admin, NODES).create({
    metadata: { name: node },
    spec: { podCIDRs: ['10.245.9.0/24'], taints: [{ key: 'node.cloudprovider.kubernetes.io/uninitialized', value: 'true', effect: 'NoSchedule' }] },
  });
  const services = new ResourceClient<V1Service>(admin, SERVICES);
  await services.create({ metadata: { name: node, namespace: 'default' }, spec: { type: 'LoadBalancer', ports: [{ port: 80, protocol: 'TCP' }] } });
  await ccm.waitForLog(`successfully initialized node with cloud provider" controller=cloud-node-controller node=${node}`);
  await ccm.waitForLog('created route');

  let text = '';
  const want = [
    'workqueue_depth{name="Nodes"}', 'workqueue_adds_total{name="Nodes"}', 'workqueue_queue_duration_seconds_bucket',
    'workqueue_work_duration_seconds_bucket', 'workqueue_retries_total', 'workqueue_unfinished_work_seconds',
    'workqueue_longest_running_processor_seconds', 'workqueue_depth{name="service"}',
    'node_controller_cloud_provider_taint_removal_delay_seconds_bucket', 'node_controller_initial_node_sync_delay_seconds_bucket',
    'service_controller_loadbalancer_sync_total', 'service_controller_nodesync_latency_seconds',
    'service_controller_update_loadbalancer_host_latency_seconds', 'service_controller_nodesync_error_total',
    'route_controller_route_sync_total', 'running_managed_controllers{name="cloud-node-controller",manager="cloud-controller-manager"} 1',
    'leader_election_master_status{name="serving-', 'rest_client_requests_total{code="200",method="GET"', 'rest_client_request_duration_seconds_bucket{',
  ];
  await eventually('every upstream metric name on /metrics', async () => {
    const res = await fetch(`${base}/metrics`, { headers: { authorization: `Bearer ${adminToken}` }, tls });
    expect(res.status).toBe(200);
    text = await res.text();
    return want.every((w) => text.includes(w));
  }, 30_000, 200).catch(() => undefined); // the loop below names what is missing
  for (const w of want) expect(text).toContain(w);
  await services.delete(node, { namespace: 'default' });
  await new ResourceClient<V1Node>(admin, NODES).delete(node);
}, 60_000);
