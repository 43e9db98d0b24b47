/**
 * `demo.sh --scenario cluster`: edge-ccm in a cluster of real nodes on this machine
 * (test/harness/real-cluster.ts): three kubelets with containerd and kube-proxy, each in its own
 * network namespace on one switch, register their Nodes; edge-ccm initialises them and hands out
 * their pod CIDRs; a Deployment of a small HTTP server runs behind two LoadBalancer Services; a
 * client on the switch asks the first one's address and the pods answer (the address found by
 * ARP, answered by edge-ccm's speaker on one node); a client behind the router (BIRD) asks the
 * second one's, which each node's speaker announced over its own BGP session, tied to a BFD
 * session with the router (announceFrom: nodes: a dead node's next hop goes within a second).
 * Then what to try, until Ctrl-C, which stops everything it started (each process by its pid; namespaces, cgroups and mounts removed).
 */
import type { V1Node } from '@kubernetes/client-node';
import { NODES, ResourceClient } from '../src/kube/resources.ts';
import { createLoadBalancer, createNamespace, deployEcho, loadBalancerAddress, podsReady, SERVICE_PORT } from '../test/harness/echo-workload.ts';
import { eventually } from '../test/harness/eventually.ts';
import { BGP_POOL_NAME, RealCluster, REMOTE_CLIENT_IP } from '../test/harness/real-cluster.ts';
import { clusterBinaries } from '../test/harness/binaries.ts';

const NS = 'web';
const APP = 'echo';
const REPLICAS = 3;
const REQUESTS = 6;
const ROUTED = 'echo-routed';

export async function runClusterDemo(opts: { once: boolean }): Promise<number> {
  if (process.getuid?.() !== 0) {
    console.error('the cluster scenario needs root (network namespaces, cgroups, containerd, kubelets): sudo bash scripts/demo.sh --scenario cluster');
    return 1;
  }
  let cluster: RealCluster | undefined;
  let stopping = false;
  const shutdown = async (code: number) => {
    if (stopping) return;
    stopping = true;
    console.log('\n== stopping the cluster (every process by its pid; namespaces, cgroups and mounts removed)');
    await cluster?.stop();
    process.exit(code);
  };
  process.on('SIGINT', () => void shutdown(0));
  process.on('SIGTERM', () => void shutdown(0));
  try {
    const started = performance.now();
    console.log('== starting a cluster of three real nodes (each in its own network namespace on one switch)');
    cluster = await RealCluster.start({ nodes: 3, progress: (line) => console.log(`   ${line}`) });
    const c = cluster;
    await c.podCidrs();
    console.log(`   up in ${((performance.now() - started) / 1000).toFixed(0)} s`);

    const explain = () => c.logs();
    const nodes = new ResourceClient<V1Node>(c.admin, NODES);
    const initialised = await eventually('three Nodes initialised by edge-ccm and Ready', async () => {
      const list = (await nodes.list()).items;
      const done = list.filter((n) => n.spec?.providerID && !(n.spec.taints ?? []).some((t) => t.key === 'node.cloudprovider.kubernetes.io/uninitialized') &&
        n.status?.conditions?.some((x) => x.type === 'Ready' && x.status === 'True'));
      return done.length === c.nodes.length ? done : undefined;
    }, { timeoutMs: 120_000, explain });
    console.log('\nNODES (registered by real kubelets with --cloud-provider=external --node-ip; initialised by edge-ccm)');
    for (const n of initialised.sort((a, b) => a.metadata!.name!.localeCompare(b.metadata!.name!))) {
      const l = n.metadata!.labels ?? {};
      const addresses = (n.status?.addresses ?? []).map((a) => `${a.type}=${a.address}`).join(',');
      console.log(`  ${n.metadata!.name}  Ready  ${n.spec!.providerID}  zone=${l['topology.kubernetes.io/zone']}  type=${l['node.kubernetes.io/instance-type']}  podCIDR=${n.spec!.podCIDR}  ${addresses}  kubelet ${n.status?.nodeInfo?.kubeletVersion}`);
    }

    console.log(`\n== a Deployment ${NS}/${APP} (${REPLICAS} replicas of a small HTTP server) behind a LoadBalancer Service`);
    await createNamespace(c.admin, NS);
    await deployEcho(c.admin, NS, APP, REPLICAS);
    await createLoadBalancer(c.admin, NS, APP);
    const address = await loadBalancerAddress(c.admin, NS, APP, explain);
    const pods = await podsReady(c.admin, NS, APP, REPLICAS, explain);
    console.log(`   service ${NS}/${APP}: type=LoadBalancer external IP=${address} (edge-ccm, pool lan, announce: l2)`);
    for (const [pod, node] of pods) console.log(`   pod ${pod} on ${node}`);

    await createLoadBalancer(c.admin, NS, ROUTED, { pool: BGP_POOL_NAME, app: APP });
    const routed = await loadBalancerAddress(c.admin, NS, ROUTED, explain);
    console.log(`   service ${NS}/${ROUTED} (the same pods): type=LoadBalancer external IP=${routed} (edge-ccm, pool ${BGP_POOL_NAME}, announce: bgp)`);

    console.log(`\n== the client (198.51.100.99, on the switch) asks http://${address}/ ${REQUESTS} times`);
    for (let i = 0; i < REQUESTS; i++) {
      const answer = await eventually(`an answer from ${address}`, () => c.fetchFromClient(address, SERVICE_PORT), { timeoutMs: 30_000, intervalMs: 200, explain });
      const [pod, seen] = answer.split(' ');
      console.log(`   answered by ${pod} (on ${pods.get(pod!) ?? '?'}), which saw the request from ${seen}`);
    }
    console.log('   (externalTrafficPolicy: Cluster: kube-proxy sends some requests on to pods of other nodes and masquerades them; with Local a pod sees the client\'s own address)');
    const neighbour = await c.lab.ip('client', 'neigh', 'show', address, 'dev', 'eth0');
    const mac = /lladdr ([0-9a-f:]{17})/.exec(neighbour)?.[1];
    const owner = c.nodes.find((n) => n.mac === mac);
    console.log(`   the client found ${address} by ARP at ${mac}: ${owner ? `${owner.name}'s eth0 (its edge-ccm speaker answered)` : 'no node?'}`);

    console.log(`\n== the remote client (${REMOTE_CLIENT_IP}, behind the router) asks http://${routed}/ ${REQUESTS} times`);
    const hops = await eventually(`the router's route to ${routed} via every node`, async () => {
      const h = await c.router.nextHops(routed);
      return h.length === c.nodes.length ? h : undefined;
    }, { timeoutMs: 60_000, intervalMs: 250, explain });
    console.log(`   the router (BIRD) learnt ${routed} from each node's edge-ccm speaker over BGP (sessions tied to BFD), next hops ${hops.join(', ')}`);
    for (let i = 0; i < REQUESTS; i++) {
      const answer = await eventually(`an answer from ${routed}`, () => c.fetchFromClient(routed, SERVICE_PORT, 'remote'), { timeoutMs: 30_000, intervalMs: 200, explain });
      const [pod, seen] = answer.split(' ');
      console.log(`   answered by ${pod} (on ${pods.get(pod!) ?? '?'}), which saw the request from ${seen}`);
    }

    const kubectl = `${clusterBinaries().kubectl} --kubeconfig=${c.cp.adminKubeconfig}`;
    console.log('\nWhat to try (as root, in another terminal):');
    console.log(`  ${kubectl} get nodes -o wide`);
    console.log(`  ${kubectl} -n ${NS} get pods -o wide`);
    console.log(`  ${kubectl} -n ${NS} scale deployment ${APP} --replicas=6`);
    console.log(`  ip netns exec ${c.lab.ns('client')} curl -s http://${address}/`);
    console.log(`  ip netns exec ${c.lab.ns('remote')} curl -s http://${routed}/`);
    console.log(`  ip netns exec ${c.lab.ns('rtr')} ip route   (the routes BIRD learnt from edge-ccm and the nodes)`);
    console.log(`  ip netns exec ${c.lab.ns('sw')} ip link set ${owner?.role ?? 'n1'}-lan down   (a node's link cut: its next hop leaves the router within a second, its L2 address moves)`);
    const kubelet = c.realNodes.get(owner?.name ?? 'n1')!.daemon('kubelet');
    console.log(`  kill a node's kubelet: kill ${kubelet.pid}   (${owner?.name ?? 'n1'}; the Node goes NotReady after 20 s)`);
    console.log(`  logs: ${c.lab.dir} (kubelet, containerd, kube-proxy per node; edge-ccm's speaker per node)`);
    if (opts.once) {
      await shutdown(0);
      return 0;
    }
    console.log('Press Ctrl-C to stop everything.');
    await new Promise(() => undefined);
    return 0;
  } catch (e) {
    console.error(`demo failed: ${(e as Error).message}`);
    await shutdown(1);
    return 1;
  }
}
