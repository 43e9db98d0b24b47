import { describe, expect, test } from 'bun:test';
import type { V1Node, V1Service } from '@kubernetes/client-node';
import { AddressAllocator } from './allocator.ts';
import type { PoolConfig } from './config-model.ts';
import { PoolLoadBalancer } from './load-balancer.ts';
import { AllocationError } from './requests.ts';
import { loadStaticConfig } from '../../providers/static/config-load.ts';
import { silentLogger } from '../log.ts';
import { RecordingTransport } from '../../test/fakes/controller-context.ts';

function pools(yaml: string): PoolConfig[] {
  const loaded = loadStaticConfig(`loadBalancer:\n  pools:\n${yaml}`);
  if (!loaded.ok) throw new Error(JSON.stringify(loaded.errors));
  return loaded.config.loadBalancer.pools;
}

const POOLS = pools(`
    - { name: nodes, nodeAddresses: InternalIP, namespaces: [edge] }
    - { name: public, nodeAddresses: ExternalIP, autoAssign: false, nodeSelector: "role=edge" }
    - { name: spare, addresses: [198.51.100.0/28] }
`);

function node(name: string, opts: { internal?: string[]; external?: string[]; labels?: Record<string, string>; taint?: string } = {}): V1Node {
  return {
    metadata: { name, labels: opts.labels ?? {} },
    spec: { taints: opts.taint ? [{ key: opts.taint, effect: 'NoSchedule' }] : [] },
    status: {
      addresses: [
        ...(opts.internal ?? []).map((address) => ({ type: 'InternalIP', address })),
        ...(opts.external ?? []).map((address) => ({ type: 'ExternalIP', address })),
        { type: 'Hostname', address: name },
      ],
    },
  };
}

const NODES = [
  node('n2', { internal: ['198.51.100.102', '2001:db8::102'], external: ['203.0.113.2'], labels: { role: 'edge' } }),
  node('n1', { internal: ['198.51.100.101', '2001:db8::101'], external: ['203.0.113.1'] }),
  node('excluded', { internal: ['198.51.100.103'], labels: { 'node.kubernetes.io/exclude-from-external-load-balancers': '' } }),
  node('leaving', { internal: ['198.51.100.104'], taint: 'ToBeDeletedByClusterAutoscaler' }),
];

function service(name: string, opts: { namespace?: string; ports?: number[]; families?: ('IPv4' | 'IPv6')[]; pool?: string; ingress?: string[] } = {}): V1Service {
  return {
    metadata: { name, namespace: opts.namespace ?? 'edge', annotations: opts.pool ? { 'edge-ccm.io/address-pool': opts.pool } : {}, creationTimestamp: '2026-01-01T00:00:00Z' as never },
    spec: {
      type: 'LoadBalancer',
      ports: (opts.ports ?? [80]).map((port) => ({ port, protocol: 'TCP' })),
      ...(opts.families ? { ipFamilies: opts.families, ipFamilyPolicy: opts.families.length > 1 ? 'RequireDualStack' : 'SingleStack' } : {}),
    },
    status: { loadBalancer: { ingress: (opts.ingress ?? []).map((ip) => ({ ip })) } },
  };
}

function balancer(): PoolLoadBalancer {
  const lb = new PoolLoadBalancer(new AddressAllocator(POOLS), () => [], silentLogger);
  lb.rebuild([]);
  return lb;
}

const ips = (s: { ingress?: { ip?: string }[] }) => (s.ingress ?? []).map((i) => i.ip);

describe('node-address pools: config', () => {
  test('a pool with nodeAddresses has no ranges; addresses, exclude, interfaces or an announce mode beside it are refused', () => {
    expect(POOLS.map((p) => [p.name, p.nodeAddresses, p.ranges.length])).toEqual([['nodes', 'InternalIP', 0], ['public', 'ExternalIP', 0], ['spare', undefined, 1]]);
    const r = loadStaticConfig(`loadBalancer:
  pools:
    - { name: a, nodeAddresses: InternalIP, addresses: [198.51.100.0/28], exclude: [198.51.100.1] }
    - { name: b, nodeAddresses: HostName }
    - { name: c, nodeAddresses: ExternalIP, announce: l2 }
`);
    expect(!r.ok && r.errors.map((e) => `${e.path}: ${e.message}`)).toEqual([
      "loadBalancer.pools[0].addresses: a node-address pool (nodeAddresses: InternalIP) hands out the nodes' own addresses: addresses does not apply",
      "loadBalancer.pools[0].exclude: a node-address pool (nodeAddresses: InternalIP) hands out the nodes' own addresses: exclude does not apply",
      'loadBalancer.pools[1].nodeAddresses: must be one of InternalIP, ExternalIP',
      "loadBalancer.pools[2].announce: a node-address pool's addresses are the nodes' own, which they answer for themselves: announce must be none",
    ]);
  });
});

describe('node-address pools: assignment', () => {
  test("a service gets the eligible nodes' addresses of the pool's type in its families; excluded and autoscaler-tainted nodes are left out", async () => {
    const lb = balancer();
    expect(ips(await lb.ensureLoadBalancer('c', service('web'), NODES))).toEqual(['198.51.100.101', '198.51.100.102']);
    expect(ips(await lb.ensureLoadBalancer('c', service('dual', { ports: [81], families: ['IPv6', 'IPv4'] }), NODES))).toEqual(['2001:db8::101', '2001:db8::102', '198.51.100.101', '198.51.100.102']);
    // Named by annotation: ExternalIP, and only the nodes its nodeSelector picks.
    expect(ips(await lb.ensureLoadBalancer('c', service('pub', { namespace: 'other', pool: 'public' }), NODES))).toEqual(['203.0.113.2']);
    // Outside the node pool's namespaces: the range pool, as before.
    expect(ips(await lb.ensureLoadBalancer('c', service('elsewhere', { namespace: 'other' }), NODES))).toEqual(['198.51.100.1']);
    expect(lb.assignedPools(service('web'))).toEqual(['nodes', 'nodes']);
  });

  test('port-aware sharing: a port another service of the pool uses is refused, naming it; other ports share the addresses', async () => {
    const lb = balancer();
    await lb.ensureLoadBalancer('c', service('a', { ports: [80, 443] }), NODES);
    const clash = lb.ensureLoadBalancer('c', service('b', { ports: [8080, 443] }), NODES);
    await expect(clash).rejects.toThrow(AllocationError);
    await expect(clash).rejects.toThrow('port TCP/443 is already served on the node addresses of pool nodes by service edge/a');
    expect(ips(await lb.ensureLoadBalancer('c', service('c', { ports: [8080] }), NODES))).toEqual(['198.51.100.101', '198.51.100.102']);
    // Once a is gone, its ports are free.
    await lb.ensureLoadBalancerDeleted('c', service('a'));
    expect(ips(await lb.ensureLoadBalancer('c', service('b', { ports: [443] }), NODES))).toEqual(['198.51.100.101', '198.51.100.102']);
  });

  test('the ports held survive a restart: rebuilt from the services\' status', async () => {
    const lb = new PoolLoadBalancer(new AddressAllocator(POOLS), () => [], silentLogger);
    lb.rebuild([service('a', { ports: [80], ingress: ['198.51.100.101'] })]);
    await expect(lb.ensureLoadBalancer('c', service('b', { ports: [80] }), NODES)).rejects.toThrow('by service edge/a');
    expect((await lb.getLoadBalancer('c', service('a'))).status).toEqual({ ingress: [{ ip: '198.51.100.101' }] });
  });

  test('no eligible node with an address of the family: refused, saying why', async () => {
    const lb = balancer();
    await expect(lb.ensureLoadBalancer('c', service('web'), [NODES[2]!, NODES[3]!])).rejects.toThrow('no eligible node has an IPv4 InternalIP address for node-address pool nodes');
  });

  test('updateLoadBalancer follows the nodes: joining, leaving, excluded', async () => {
    const lb = balancer();
    const web = service('web');
    await lb.ensureLoadBalancer('c', web, NODES);
    const joined = [...NODES, node('n3', { internal: ['198.51.100.105'] })];
    await lb.updateLoadBalancer('c', web, joined);
    expect(ips((await lb.getLoadBalancer('c', web)).status)).toEqual(['198.51.100.101', '198.51.100.102', '198.51.100.105']);
    await lb.updateLoadBalancer('c', web, joined.filter((n) => n.metadata?.name !== 'n1'));
    expect(ips((await lb.getLoadBalancer('c', web)).status)).toEqual(['198.51.100.102', '198.51.100.105']);
    const excluded = joined.map((n) => (n.metadata?.name === 'n2' ? node('n2', { internal: ['198.51.100.102'], labels: { 'node.kubernetes.io/exclude-from-external-load-balancers': 'true' } }) : n));
    await lb.updateLoadBalancer('c', web, excluded);
    expect(ips((await lb.getLoadBalancer('c', web)).status)).toEqual(['198.51.100.101', '198.51.100.105']);
    // Every node gone: the status empties rather than failing.
    await lb.updateLoadBalancer('c', web, []);
    expect(ips((await lb.getLoadBalancer('c', web)).status)).toEqual([]);
  });

  test('each change of addresses is written, also back to what the service controller\'s cached copy of the service last showed', async () => {
    // The service controller hands updateLoadBalancer its copy from the last service sync, whose
    // status is what the first ensure wrote: comparing with it skipped the write that brought the
    // addresses back to that value (found by node-address-pools.test.ts: n3 deleted, the status
    // kept n3's address).
    const api = new RecordingTransport();
    const lb = balancer();
    lb.connect(api, { initialMs: 1000, maxMs: 1000 }, silentLogger);
    const n1 = node('n1', { internal: ['198.51.100.101'] });
    const n3 = node('n3', { internal: ['198.51.100.105'] });
    const ensured = await lb.ensureLoadBalancer('c', service('web'), [n1]);
    const cached = service('web', { ingress: ips(ensured).map(String) }); // as the controller's cache holds it
    type StatusPatch = { status: { loadBalancer: { ingress: { ip?: string }[] | null } } };
    const written = () => api.patches().map((p) => ((p.body as StatusPatch).status.loadBalancer.ingress ?? []).map((i) => i.ip));
    await lb.updateLoadBalancer('c', cached, [n1, n3]);
    await lb.updateLoadBalancer('c', cached, [n1]);
    expect(written()).toEqual([['198.51.100.101', '198.51.100.105'], ['198.51.100.101']]);
    // Nothing changed since the last write: nothing written.
    await lb.updateLoadBalancer('c', cached, [n1]);
    expect(api.patches()).toHaveLength(2);
  });
});
