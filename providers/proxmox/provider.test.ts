import { afterEach, describe, expect, test } from 'bun:test';
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { V1Service } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import { registerProxmoxProvider } from './index.ts';
import { createProxmoxProvider, type ProxmoxProvider } from './provider.ts';
import type { SecretSource } from '../../src/config-file/secrets.ts';
import { ProviderRegistry } from '../../src/cloud/registry.ts';
import type { KubeTransport } from '../../src/kube/transport.ts';
import type { Logger } from '../../src/log.ts';
import { ProxmoxResponder } from '../../test/fakes/proxmox-responder.ts';
import { SECRETS, TOKEN_ID, TOKEN_SECRET, node, quietLogger, recordingLogger, sampleVms, tokenConfig } from '../../test/fakes/proxmox-fixtures.ts';
import { eventually } from '../../test/harness/eventually.ts';

/** The proxmox provider's watched --cloud-config: edits apply without a restart, broken ones change nothing. */

const providers: ProxmoxProvider[] = [];
const responders: ProxmoxResponder[] = [];
const dirs: string[] = [];
const stops: AbortController[] = [];
afterEach(async () => {
  for (const s of stops.splice(0)) s.abort();
  await Promise.all(providers.splice(0).map((p) => p.close()));
  for (const r of responders.splice(0)) r.stop();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const POOLS = (cidr: string, cls = 'edge-ccm.io/proxmox') => ['loadBalancer:', `  classes: [${cls}]`, '  pools:', '    - name: v4', `      addresses: [${cidr}]`];

/** One cluster (a long VM-list cache, so a reused cluster view is seen as no new read), plus `top` lines. */
function yaml(url: string, opts: { region?: string; top?: string[]; cluster?: string[] } = {}): string {
  return tokenConfig(url, { region: opts.region, cluster: ['cacheSeconds: 600', ...(opts.cluster ?? [])], top: opts.top ?? POOLS('192.0.2.0/30') });
}

function responder(tokens: Record<string, string> = { [TOKEN_ID]: TOKEN_SECRET }): ProxmoxResponder {
  const r = ProxmoxResponder.start({ tokens, vms: sampleVms() });
  responders.push(r);
  return r;
}

/** A temp dir with the config file; removed after the test whatever happens. */
function configFile(text: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'edge-ccm-proxmox-reload-'));
  dirs.push(dir);
  const path = join(dir, 'proxmox.yaml');
  writeFileSync(path, text);
  return path;
}

function make(text: string, path: string, opts: { secrets?: SecretSource; logger?: Logger } = {}): ProxmoxProvider {
  const p = createProxmoxProvider({
    config: text,
    configPath: path,
    logger: opts.logger ?? quietLogger,
    secrets: opts.secrets ?? SECRETS,
    watch: { pollMs: 50, debounceMs: 20 },
    rebuildRetry: { initialMs: 5, maxMs: 20 },
  });
  providers.push(p);
  return p;
}

/** A cluster with no services (the load-balancer rebuild at initialize). */
const noServices = { request: async () => ({ kind: 'ServiceList', metadata: {}, items: [] }) } as unknown as KubeTransport;

async function initialize(p: ProxmoxProvider, registry?: Registry): Promise<void> {
  const stop = new AbortController();
  stops.push(stop);
  await p.initialize({ transport: noServices, logger: quietLogger, signal: stop.signal, registry });
}

function service(name: string): V1Service {
  return {
    metadata: { name, namespace: 'default', uid: `uid-${name}` },
    spec: { type: 'LoadBalancer', ports: [{ port: 80, protocol: 'TCP' }], ipFamilies: ['IPv4'], ipFamilyPolicy: 'SingleStack' },
  };
}

const worker1 = node('k8s-worker-1');
const renamed = node('renamed', { systemUUID: '3f2504e0-4f89-11d3-9a0c-0305e82c3301' });

describe('proxmox provider: the watched configuration file', () => {
  test('a valid edit of instance-type naming, matchBy or the region changes the answers without a restart', async () => {
    const r = responder();
    const text = yaml(r.url);
    const path = configFile(text);
    const p = make(text, path);
    let changes = 0;
    p.onChange(() => changes++);
    await initialize(p);
    expect(await p.instances.instanceMetadata(worker1)).toMatchObject({ providerID: 'proxmox://fra1/101', instanceType: '4VCPU-8GB', region: 'fra1' });
    expect(await p.instances.instanceExists(renamed)).toBe('exists');
    const reads = r.requestsTo('/cluster/resources').length;

    // Naming and matching only: the cluster's view (its VM list cache) is kept.
    writeFileSync(path, yaml(r.url, { top: ['instanceType:', '  format: c{cores}-m{memoryMiB}', 'matchBy: [name]', ...POOLS('192.0.2.0/30')] }));
    await eventually('the new instance-type naming', async () => (await p.instances.instanceMetadata(worker1))?.instanceType === 'c4-m8192', 10_000);
    expect(await p.instances.instanceExists(renamed)).toBe('not-found');
    expect(changes).toBe(1);
    expect(r.requestsTo('/cluster/resources').length).toBe(reads);

    // The region: a new view of the cluster; providerIDs and labels follow. Replaced, as editors save.
    writeFileSync(join(path, '../new.yaml'), yaml(r.url, { region: 'ams1' }));
    renameSync(join(path, '../new.yaml'), path);
    await eventually('the new region', async () => (await p.instances.instanceMetadata(worker1))?.region === 'ams1', 10_000);
    expect(await p.instances.instanceMetadata(worker1)).toMatchObject({ providerID: 'proxmox://ams1/101', instanceType: '4VCPU-8GB', zone: 'pve1' });
    expect(await p.instances.instanceExists(node('x', { providerID: 'proxmox://fra1/101' }))).toBe('unknown');
    expect(await p.instances.instanceExists(renamed)).toBe('exists');
    expect(p.currentConfig().clusters[0]!.region).toBe('ams1');
    expect(changes).toBe(2);
  });

  test('a call under way finishes on the cluster view it started with', async () => {
    const r = responder();
    const text = yaml(r.url);
    const path = configFile(text);
    const p = make(text, path);
    r.delayMs = 300;
    const before = r.requests.length;
    const inFlight = p.instances.instanceMetadata(worker1);
    await eventually('the call to reach the API', () => r.requests.length > before, 10_000, 1);
    expect(p.reload(yaml(r.url, { region: 'ams1' })).ok).toBe(true);
    expect((await inFlight)?.providerID).toBe('proxmox://fra1/101');
    expect((await p.instances.instanceMetadata(worker1))?.providerID).toBe('proxmox://ams1/101');
  });

  test('an edit of the pools changes the allocation; classes are read live', async () => {
    const r = responder();
    const text = yaml(r.url);
    const path = configFile(text);
    const p = make(text, path);
    await initialize(p);
    expect(p.loadBalancer.loadBalancerClasses).toEqual(['edge-ccm.io/proxmox']);
    // A CIDR pool's network address is never handed out.
    expect((await p.loadBalancer.ensureLoadBalancer('c', service('a'), []))?.ingress).toEqual([{ ip: '192.0.2.1' }]);

    writeFileSync(path, yaml(r.url, { top: POOLS('198.51.100.8/30', 'edge-ccm.io/pve') }));
    await eventually('the new classes', () => p.loadBalancer.loadBalancerClasses[0] === 'edge-ccm.io/pve', 10_000);
    expect((await p.loadBalancer.ensureLoadBalancer('c', service('b'), []))?.ingress).toEqual([{ ip: '198.51.100.9' }]);
  });

  test('an invalid edit keeps the last good answers, is counted and reported as FILE:LINE; onChange only after good edits', async () => {
    const r = responder();
    const text = yaml(r.url);
    const path = configFile(text);
    const p = make(text, path);
    const rejected: string[] = [];
    let changes = 0;
    p.onConfigRejected((problems) => rejected.push(problems));
    p.onChange(() => changes++);
    const registry = new Registry();
    await initialize(p, registry);
    expect((await p.instances.instanceMetadata(worker1))?.region).toBe('fra1');

    // Line 3 is the url; the unknown key is the last cluster line (line 10).
    const broken = yaml(r.url, { region: 'ams1', cluster: ['zoen: x'] }).replace(`url: ${r.url}`, 'url: not a url');
    writeFileSync(path, broken);
    await eventually('the broken edit to be rejected', () => rejected.length === 1, 10_000);
    expect(rejected[0]!.split('\n')).toEqual([
      `${path}:3: clusters[0].url: must be a URL such as https://pve1.example.com:8006`,
      `${path}:10: clusters[0].zoen: unknown key "zoen"`,
    ]);
    expect(changes).toBe(0);
    expect((await p.instances.instanceMetadata(worker1))?.region).toBe('fra1');
    expect(p.currentConfig().clusters[0]!.url).toBe(r.url);

    writeFileSync(path, yaml(r.url, { region: 'ams1' }));
    await eventually('the good edit', () => changes === 1, 10_000);
    expect((await p.instances.instanceMetadata(worker1))?.region).toBe('ams1');
    expect(rejected).toHaveLength(1);

    const metrics = await registry.metrics();
    expect(metrics).toContain('edge_ccm_proxmox_config_reload_errors_total 1');
    expect(metrics).toContain('edge_ccm_proxmox_config_reloads_total{result="success"} 1');
    expect(metrics).toContain('edge_ccm_proxmox_config_reloads_total{result="error"} 1');
  });

  test('a reload reads secret files again: a rotated token is used after the next edit', async () => {
    const tokens = { [TOKEN_ID]: TOKEN_SECRET };
    const r = responder(tokens);
    let secret = TOKEN_SECRET;
    const secrets: SecretSource = { readFile: () => `${secret}\n`, env: () => undefined };
    const text = yaml(r.url, { cluster: ['cacheSeconds: 0'] }).replace('    cacheSeconds: 600\n', '');
    const path = configFile(text);
    const p = make(text, path, { secrets });
    await initialize(p);
    expect(await p.instances.instanceExists(worker1)).toBe('exists');

    tokens[TOKEN_ID] = secret = 'rotated-secret';
    expect(await p.instances.instanceExists(worker1)).toBe('unknown');
    writeFileSync(path, `${text}# token rotated\n`);
    await eventually('the new secret to be used', async () => (await p.instances.instanceExists(worker1)) === 'exists', 10_000);
  });

  test('the BGP side follows each good reload (pushed to it)', () => {
    const r = responder();
    const bgp = (peer: string) => ['bgp:', '  localASN: 64512', '  routerID: 198.51.100.2', `  peers: [{ address: ${peer}, asn: 65000 }]`];
    const text = yaml(r.url, { top: bgp('198.51.100.1') });
    const p = make(text, configFile(text));
    const peers = () => p.bgp.speakerConfig()?.peers.map((x) => x.address);
    expect(peers()).toEqual(['198.51.100.1']);
    expect(p.reload(yaml(r.url, { top: bgp('198.51.100.9') })).ok).toBe(true);
    expect(peers()).toEqual(['198.51.100.9']);
  });

  test('topologyLabelResync needs a restart: relabelNodes stays, the change is logged', () => {
    const r = responder();
    const { logger, lines } = recordingLogger();
    const text = yaml(r.url);
    const p = make(text, configFile(text), { logger });
    expect(p.relabelNodes).toBe(false);
    expect(p.reload(yaml(r.url, { top: ['topologyLabelResync: true', ...POOLS('192.0.2.0/30')] })).ok).toBe(true);
    expect(p.relabelNodes).toBe(false);
    expect(lines.some((l) => l.includes('topologyLabelResync changed') && l.includes('restart'))).toBe(true);
  });

  test('close() stops the watcher', async () => {
    const r = responder();
    const text = yaml(r.url);
    const path = configFile(text);
    const p = make(text, path);
    let reloads = 0;
    p.onReload(() => reloads++);
    await initialize(p);
    writeFileSync(path, yaml(r.url, { region: 'ams1' }));
    await eventually('the edit', () => reloads === 1, 10_000);
    await p.close();
    writeFileSync(path, yaml(r.url, { region: 'lon1' }));
    await Bun.sleep(300);
    expect(reloads).toBe(1);
    expect(p.currentConfig().clusters[0]!.region).toBe('ams1');
  });

  test('the registered factory watches --cloud-config', async () => {
    const r = responder();
    const text = yaml(r.url).replace('tokenSecretFile: /secrets/token', `tokenSecret: ${TOKEN_SECRET}`);
    const path = configFile(text);
    const registry = new ProviderRegistry();
    registerProxmoxProvider(registry);
    const p = (await registry.create('proxmox', { config: text, configPath: path, logger: quietLogger })) as ProxmoxProvider;
    providers.push(p);
    await initialize(p);
    writeFileSync(path, text.replace('region: fra1', 'region: ams1'));
    // fs.watch sees it at once; the stat poll (every 5 s) backs it up.
    await eventually('the edit', () => p.currentConfig().clusters[0]!.region === 'ams1', 15_000);
  });
});

describe('proxmox provider: leadership terms', () => {
  test('each term initializes again on the same registry, and the placement poller runs again in the new term', async () => {
    const r = responder();
    const text = tokenConfig(r.url, { cluster: ['cacheSeconds: 0'], top: ['topologyLabelResync: true', 'resyncPeriodSeconds: 1', ...POOLS('192.0.2.0/30')] });
    const p = make(text, configFile(text));
    const registry = new Registry();
    const reads = () => r.requestsTo('/cluster/resources').length;
    const first = new AbortController();
    stops.push(first);
    await p.initialize({ transport: noServices, logger: quietLogger, signal: first.signal, registry });
    await eventually('the first term polls placements', () => reads() > 0, 10_000);
    first.abort(new Error('the leader lease was lost'));

    const before = reads();
    await initialize(p, registry);
    await eventually('the second term polls placements again', () => reads() > before, 10_000);
    expect(await registry.metrics()).toContain('edge_ccm_lb_pool_addresses_total{pool="v4"}');
  });
});
