import { afterEach, describe, expect, test } from 'bun:test';
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { V1Node, V1Service } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import { createStaticProvider, registerStaticProvider, type ReloadResult, type StaticProvider } from './index.ts';
import { ProviderRegistry } from '../../src/cloud/registry.ts';
import { RetryAfterError } from '../../src/cloud/types.ts';
import type { KubeRequest, KubeTransport } from '../../src/kube/transport.ts';
import { silentLogger } from '../../src/log.ts';
import { eventually } from '../../test/harness/eventually.ts';

const CONFIG = (zone: string) => `
inventory:
  machines:
    - id: node-a
      zone: ${zone}
      addresses: [{ type: InternalIP, address: 10.0.0.11 }]
loadBalancer:
  classes: [edge-ccm.io/static]
  pools:
    - name: v4
      addresses: [192.0.2.0-192.0.2.3]
`;

const nodeA: V1Node = { metadata: { name: 'node-a' } };

function service(name: string, ingress?: string[]): V1Service {
  return {
    metadata: { name, namespace: 'default', uid: `uid-${name}` },
    spec: { type: 'LoadBalancer', ports: [{ port: 80, protocol: 'TCP' }], ipFamilies: ['IPv4'], ipFamilyPolicy: 'SingleStack' },
    status: ingress ? { loadBalancer: { ingress: ingress.map((ip) => ({ ip })) } } : {},
  };
}

/** Answers GET /api/v1/services in pages of one, after `failures` failed attempts. */
function fakeTransport(services: V1Service[], failures = 0): KubeTransport & { requests: KubeRequest[] } {
  const requests: KubeRequest[] = [];
  return {
    server: 'https://fake',
    requests,
    async request<T>(req: KubeRequest): Promise<T> {
      requests.push(req);
      if (req.method !== 'GET' || req.path !== '/api/v1/services') throw new Error(`unexpected ${req.method} ${req.path}`);
      if (failures-- > 0) throw new Error('connection refused');
      const start = Number(req.query?.continue ?? 0);
      const next = start + 1 < services.length ? String(start + 1) : undefined;
      return { metadata: { continue: next }, items: services.slice(start, start + 1) } as T;
    },
    watch: () => {
      throw new Error('no watch');
    },
  };
}

const providers: StaticProvider[] = [];
const dirs: string[] = [];
afterEach(async () => {
  await Promise.all(providers.splice(0).map((p) => p.close()));
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function make(text: string, configPath?: string): StaticProvider {
  const p = createStaticProvider({ config: text, configPath, logger: silentLogger, watch: { pollMs: 50, debounceMs: 20 }, rebuildRetry: { initialMs: 5, maxMs: 20 } });
  providers.push(p);
  return p;
}

describe('static provider', () => {
  test('registers as "static", offers instances and load balancers, no routes without a bgp section', async () => {
    const registry = new ProviderRegistry();
    registerStaticProvider(registry);
    const p = (await registry.create('static', { config: CONFIG('z1'), configPath: undefined, logger: silentLogger })) as StaticProvider;
    providers.push(p);
    expect(p.providerName).toBe('static');
    expect(p.instances).toBeDefined();
    expect(p.loadBalancer.loadBalancerClasses).toEqual(['edge-ccm.io/static']);
    expect(p.routes).toBeUndefined();
  });

  test('routes are the BGP route table when the bgp section announces pod CIDRs (the default), none when it does not', () => {
    const bgp = (podCIDRs: string) => `${CONFIG('z1')}bgp:\n  localASN: 64512\n  routerID: 198.51.100.2\n  peers: [{ address: 198.51.100.1, asn: 65000 }]\n${podCIDRs}`;
    const announcing = make(bgp(''));
    expect(announcing.routes).toBe(announcing.bgp.routeTable);
    expect(make(bgp('  podCIDRs: { announce: false }\n')).routes).toBeUndefined();
  });

  test('the BGP side follows each good reload (pushed to it), and keeps the last good one through a bad one', () => {
    const bgp = (peer: string) => `${CONFIG('z1')}bgp:\n  localASN: 64512\n  routerID: 198.51.100.2\n  peers: [{ address: ${peer}, asn: 65000 }]\n`;
    const p = make(bgp('198.51.100.1'));
    const peers = () => p.bgp.speakerConfig()?.peers.map((x) => x.address);
    expect(peers()).toEqual(['198.51.100.1']);
    expect(p.reload(bgp('198.51.100.9')).ok).toBe(true);
    expect(peers()).toEqual(['198.51.100.9']);
    expect(p.reload(bgp('not-an-address')).ok).toBe(false);
    expect(peers()).toEqual(['198.51.100.9']);
    expect(p.reload(CONFIG('z1')).ok).toBe(true);
    expect(p.bgp.speakerConfig()).toBeUndefined();
  });

  test('an invalid initial file is an error naming every problem with its line', () => {
    expect(() => make('inventory:\n  machines:\n    - id: a\n      colour: red\n', 'inv.yaml')).toThrow(
      'invalid static provider configuration:\ninv.yaml:4: inventory.machines[0].colour: unknown key "colour"',
    );
  });

  test('reload: a valid text takes effect; an invalid one is counted and the last good one stays', async () => {
    const p = make(CONFIG('z1'));
    const seen: ReloadResult[] = [];
    const off = p.onReload((r) => seen.push(r));
    const metrics = new Registry();
    p.registerMetrics(metrics);

    expect(p.reload(CONFIG('z2')).ok).toBe(true);
    expect((await p.instances.instanceMetadata(nodeA))?.zone).toBe('z2');

    const bad = p.reload('inventory:\n  machines: [{ id: node-a, zone: 3 }]\n');
    expect(bad.ok).toBe(false);
    expect((await p.instances.instanceMetadata(nodeA))?.zone).toBe('z2');
    expect(await p.instances.instanceExists(nodeA)).toBe('exists');
    expect(seen.map((r) => r.ok)).toEqual([true, false]);
    off();
    p.reload(CONFIG('z3'));
    expect(seen).toHaveLength(2);

    const text = await metrics.metrics();
    expect(text).toContain('edge_ccm_static_config_reload_errors_total 1');
    expect(text).toContain('edge_ccm_static_config_reloads_total{result="success"} 2');
    expect(text).toContain('edge_ccm_lb_pool_addresses_total{pool="v4"} 4');
    expect(text).toContain('edge_ccm_lb_pool_addresses_used{pool="v4"} 0');
  });

  test('initialize rebuilds the allocator from every service (paged) before ensure answers', async () => {
    const p = make(CONFIG('z1'));
    expect(await p.loadBalancer.ensureLoadBalancer('c', service('early'), []).catch((e) => e)).toBeInstanceOf(RetryAfterError);
    const transport = fakeTransport([service('a', ['192.0.2.0']), service('b'), service('c', ['192.0.2.2'])], 2);
    await p.initialize({ transport, logger: silentLogger, signal: new AbortController().signal });
    expect(transport.requests.length).toBe(5); // two failures, then three pages
    const got = await p.loadBalancer.ensureLoadBalancer('c', service('b'), []);
    expect(got.ingress).toEqual([{ ip: '192.0.2.1' }]);
    expect((await p.loadBalancer.ensureLoadBalancer('c', service('d'), [])).ingress).toEqual([{ ip: '192.0.2.3' }]);
    await expect(p.loadBalancer.ensureLoadBalancer('c', service('e'), [])).rejects.toThrow('pool v4 exhausted');
    const metrics = new Registry();
    p.registerMetrics(metrics);
    expect(await metrics.metrics()).toContain('edge_ccm_lb_pool_addresses_used{pool="v4"} 4');
  });

  test('exclusive.refresh re-reads what another edge-ccm handed out meanwhile; an older list finishing last is not applied', async () => {
    const p = make(CONFIG('z1'));
    const signal = new AbortController().signal;
    await p.loadBalancer.exclusive.refresh(signal); // before the start: nothing to read from yet
    expect(p.loadBalancer.isRebuilt).toBe(false);
    const cluster = [service('a', ['192.0.2.0'])];
    // Each list answers what the cluster holds when it is asked, once `answer` lets it.
    const answers: (() => void)[] = [];
    const transport: KubeTransport = {
      server: 'https://fake',
      async request<T>(): Promise<T> {
        const items = [...cluster];
        await new Promise<void>((r) => answers.push(r));
        return { metadata: {}, items } as T;
      },
      watch: () => {
        throw new Error('no watch');
      },
    };
    const answer = async () => {
      await eventually('a list in flight', () => answers.length > 0, 10_000);
      answers.shift()!();
    };
    const started = p.initialize({ transport, logger: silentLogger, signal });
    await answer();
    await started;
    // Another edge-ccm gave b an address; two refreshes, the older list answered last.
    cluster.push(service('b', ['192.0.2.1']));
    const older = p.loadBalancer.exclusive.refresh(signal);
    cluster.push(service('c', ['192.0.2.2']));
    const newer = p.loadBalancer.exclusive.refresh(signal);
    await eventually('two lists in flight', () => answers.length === 2, 10_000);
    expect(await p.loadBalancer.ensureLoadBalancer('c', service('x'), []).catch((e) => e)).toBeInstanceOf(RetryAfterError);
    answers.pop()!();
    await newer;
    answers.shift()!();
    await older;
    expect((await p.loadBalancer.ensureLoadBalancer('c', service('d'), [])).ingress).toEqual([{ ip: '192.0.2.3' }]);
  });

  test('each leadership term initializes again on the same registry: memory dropped at the end of one, rebuilt at the start of the next', async () => {
    const p = make(CONFIG('z1'));
    const registry = new Registry();
    const first = new AbortController();
    await p.initialize({ transport: fakeTransport([]), logger: silentLogger, signal: first.signal, registry });
    expect((await p.loadBalancer.ensureLoadBalancer('c', service('a'), [])).ingress).toEqual([{ ip: '192.0.2.0' }]);
    first.abort(new Error('the leader lease was lost'));
    expect(await registry.metrics()).toContain('edge_ccm_lb_pool_addresses_used{pool="v4"} 0');

    // Meanwhile another leader gave b the next address; the second term reads it back.
    await p.initialize({ transport: fakeTransport([service('a', ['192.0.2.0']), service('b', ['192.0.2.1'])]), logger: silentLogger, signal: new AbortController().signal, registry });
    expect((await p.loadBalancer.ensureLoadBalancer('c', service('c'), [])).ingress).toEqual([{ ip: '192.0.2.2' }]);
    expect(await registry.metrics()).toContain('edge_ccm_lb_pool_addresses_used{pool="v4"} 3');
  });

  test("the pod CIDR routes and the route controller's first round are a term's: a new term waits for its own round before announcing", async () => {
    const p = make(`${CONFIG('z1')}
bgp:
  localASN: 64512
  routerID: 198.51.100.2
  peers: [{ address: 198.51.100.1, asn: 65000 }]
  podCIDRs: { announce: true }
`);
    const first = new AbortController();
    await p.initialize({ transport: fakeTransport([]), logger: silentLogger, signal: first.signal });
    const routes = p.routes!;
    await routes.createRoute('c', 'node-a', { name: '', targetNode: 'node-a', destinationCIDR: '203.0.113.0/29', blackhole: false, targetNodeAddresses: [{ type: 'InternalIP', address: '198.51.100.11' }] });
    routes.synced?.();
    expect(p.bgp.routesSynced).toBe(true);
    first.abort(new Error('the leader lease was lost'));

    await p.initialize({ transport: fakeTransport([]), logger: silentLogger, signal: new AbortController().signal });
    // The next term's route controller starts from nothing, and the announcer waits for it.
    expect(p.bgp.routesSynced).toBe(false);
    expect(await routes.listRoutes('c')).toEqual([]);
  });

  test('initialize gives up only when its signal aborts', async () => {
    const p = make(CONFIG('z1'));
    const stop = new AbortController();
    const transport = fakeTransport([], 1_000_000);
    const running = p.initialize({ transport, logger: silentLogger, signal: stop.signal });
    await eventually('a failed list, and the wait before the next', () => transport.requests.length > 0, 10_000, 1);
    stop.abort(new Error('stopped'));
    await expect(running).rejects.toThrow();
    expect(p.loadBalancer.isRebuilt).toBe(false);
  });

  test('the watched file: edits apply without a restart, a broken edit keeps the last good config', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'edge-ccm-static-'));
    dirs.push(dir);
    const path = join(dir, 'inventory.yaml');
    writeFileSync(path, CONFIG('z1'));
    const p = make(CONFIG('z1'), path);
    const results: ReloadResult[] = [];
    p.onReload((r) => results.push(r));
    await p.initialize({ transport: fakeTransport([]), logger: silentLogger, signal: new AbortController().signal });

    writeFileSync(path, CONFIG('z2'));
    await eventually('the edit to apply', async () => (await p.instances.instanceMetadata(nodeA))?.zone === 'z2', 10_000);

    writeFileSync(path, CONFIG('z3').replace('zone: z3', 'zone: [z3'));
    await eventually('the broken edit to be rejected', () => results.some((r) => !r.ok), 10_000);
    expect((await p.instances.instanceMetadata(nodeA))?.zone).toBe('z2');

    // Editors and ConfigMap volumes replace the file rather than write it.
    writeFileSync(join(dir, 'new.yaml'), CONFIG('z4'));
    renameSync(join(dir, 'new.yaml'), path);
    await eventually('the replaced file to apply', async () => (await p.instances.instanceMetadata(nodeA))?.zone === 'z4', 10_000);
  });
});
