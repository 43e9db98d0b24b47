/**
 * edge-ccm's command line with a bench-only `fake` provider: the answers of test/fakes'
 * FakeCloud as configured by scripts/bench (and of the reference's wrapped upstream fake,
 * bench/reference/main.go), without its test records. FakeCloud keeps every ensure/update call
 * with a copy of the service and the node names, and every balancer's node names: at 5000
 * services x 5000 nodes that is gigabytes of test bookkeeping, the distortion the reference's
 * fake is capped against too. This one keeps nothing but the balancer statuses.
 */
import type { V1LoadBalancerStatus, V1Node, V1Service } from '@kubernetes/client-node';
import { ProviderRegistry } from '../src/cloud/registry.ts';
import { defaultLoadBalancerName, type CloudProvider, type InstanceMetadata } from '../src/cloud/types.ts';
import { runCli } from '../src/cmd/cli.ts';
import { registerProviders } from '../src/providers.ts';
import { FAKE_EXISTENCE } from './fake-instances.ts';

const INSTANCE_TYPE = 'bench.small';
const ZONE = 'zone-a';
const REGION = 'region-a';
const EXTERNAL_IP = '192.0.2.10';

function metadata(node: V1Node): InstanceMetadata {
  const name = node.metadata?.name ?? '';
  const internal = node.status?.addresses?.find((a) => a.type === 'InternalIP')?.address;
  return {
    providerID: `fake://${name}`,
    instanceType: INSTANCE_TYPE,
    zone: ZONE,
    region: REGION,
    nodeAddresses: [
      ...(internal ? [{ type: 'InternalIP', address: internal }] : []),
      { type: 'ExternalIP', address: EXTERNAL_IP },
      { type: 'Hostname', address: name },
    ],
  };
}

/** As upstream's fake: one ingress with the IP and the service's ports. */
function status(svc: V1Service): V1LoadBalancerStatus {
  const ports = svc.spec?.ports?.map((p) => ({ port: p.port, protocol: p.protocol ?? 'TCP' }));
  return { ingress: [{ ip: EXTERNAL_IP, ...(ports?.length ? { ports } : {}) }] };
}

function benchFake(): CloudProvider {
  const balancers = new Map<string, V1LoadBalancerStatus>();
  return {
    providerName: 'fake',
    instances: {
      ...FAKE_EXISTENCE,
      instanceMetadata: async (node) => metadata(node),
    },
    loadBalancer: {
      getLoadBalancer: async (_cluster, svc) => {
        const found = balancers.get(defaultLoadBalancerName(svc));
        return found ? { exists: true, status: found } : { exists: false, status: {} };
      },
      getLoadBalancerName: (_cluster, svc) => defaultLoadBalancerName(svc),
      ensureLoadBalancer: async (_cluster, svc) => {
        const s = status(svc);
        balancers.set(defaultLoadBalancerName(svc), s);
        return s;
      },
      updateLoadBalancer: async () => {},
      ensureLoadBalancerDeleted: async (_cluster, svc) => {
        balancers.delete(defaultLoadBalancerName(svc));
      },
    },
  };
}

const providers = new ProviderRegistry();
registerProviders(providers);
providers.register('fake', () => benchFake());
process.exit(await runCli(process.argv.slice(2), () => providers));
