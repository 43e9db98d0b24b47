import { afterAll, beforeAll, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { V1Node } from '@kubernetes/client-node';
import { LxdApi } from './api.ts';
import { loadLxdConfig } from './config-load.ts';
import type { LxdConfig } from './config-model.ts';
import { InstanceCache } from './instance-list.ts';
import { LxdInstances } from './instances.ts';

// The instances against a fake daemon on a unix socket answering as LXD 5.0.2 did on this
// machine (recorded shapes: recursion=2 lists, state.network, 404 for a deleted instance).

function instance(name: string, opts: { status?: 'Running' | 'Stopped'; addresses?: Record<string, [string, string, string][]>; config?: Record<string, string>; project?: string; location?: string } = {}) {
  const running = (opts.status ?? 'Running') === 'Running';
  return {
    name,
    project: opts.project ?? 'default',
    type: 'container',
    status: opts.status ?? 'Running',
    status_code: running ? 103 : 102,
    location: opts.location ?? 'none',
    profiles: ['default'],
    config: { 'volatile.uuid': `uuid-${name}`, ...opts.config },
    expanded_devices: { eth0: { name: 'eth0', type: 'nic', nictype: 'bridged', parent: 'br0' }, root: { type: 'disk', path: '/' } },
    state: running
      ? { network: Object.fromEntries(Object.entries(opts.addresses ?? {}).map(([iface, list]) => [iface, { addresses: list.map(([family, address, scope]) => ({ family, address, netmask: '24', scope })) }])) }
      : { network: null },
  };
}

let instances: ReturnType<typeof instance>[] = [];
let down = false;
let garbage = false;
const requests: string[] = [];
let dir: string;
let server: ReturnType<typeof Bun.serve>;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'lxd-unit-'));
  server = Bun.serve({
    unix: join(dir, 'unix.socket'),
    fetch(req) {
      const url = new URL(req.url);
      requests.push(url.pathname + url.search);
      if (down) return Response.json({ type: 'error', error_code: 500, error: 'database is locked' }, { status: 500 });
      if (url.pathname === '/1.0') return Response.json({ type: 'sync', metadata: { auth: 'trusted', api_extensions: ['x'], environment: { server: 'lxd', server_name: 'host1', server_version: '5.0.2', server_clustered: false } } });
      if (url.pathname === '/1.0/cluster/members') return Response.json({ type: 'sync', metadata: [{ server_name: 'm1', failure_domain: 'rack-a' }, { server_name: 'm2', failure_domain: 'default' }] });
      if (url.pathname === '/1.0/instances') {
        if (garbage) return Response.json({ type: 'sync', metadata: { not: 'a list' } });
        // The test's filter matches no instance.
        if (url.searchParams.get('filter')) return Response.json({ type: 'sync', metadata: [] });
        const project = url.searchParams.get('project') ?? 'default';
        const all = url.searchParams.get('all-projects') === 'true';
        return Response.json({ type: 'sync', metadata: instances.filter((i) => all || i.project === project) });
      }
      const m = /^\/1.0\/instances\/([^/]+)$/.exec(url.pathname);
      const found = m && instances.find((i) => i.name === decodeURIComponent(m[1]!) && i.project === (url.searchParams.get('project') ?? 'default'));
      if (found) return Response.json({ type: 'sync', metadata: found });
      return Response.json({ type: 'error', error_code: 404, error: 'Instance not found' }, { status: 404 });
    },
  });
});
afterAll(() => {
  server.stop(true);
  rmSync(dir, { recursive: true, force: true });
});

function setup(extra = ''): LxdInstances {
  const loaded = loadLxdConfig(`region: r1\nsocket: ${join(dir, 'unix.socket')}\ncacheSeconds: 0\n${extra}`);
  if (!loaded.ok) throw new Error(JSON.stringify(loaded.errors));
  const config: LxdConfig = loaded.config;
  const api = new LxdApi(config, { backoff: { initialMs: 1, maxMs: 1 } });
  return new LxdInstances(api, new InstanceCache(api, config), config);
}

const node = (name: string, providerID?: string): V1Node => ({ metadata: { name }, spec: providerID ? { providerID } : {} });

test('metadata: providerID by project and name, global addresses of nic interfaces only, type from the user key, zone from the server', async () => {
  instances = [instance('n1', {
    config: { 'user.instance-type': 'edge-small' },
    addresses: {
      eth0: [['inet', '198.51.100.11', 'global'], ['inet6', 'fe80::1', 'link'], ['inet6', '2001:db8::11', 'global']],
      lo: [['inet', '127.0.0.1', 'local']],
      docker0: [['inet', '198.51.100.200', 'global']],
    },
  })];
  const md = await setup().instanceMetadata(node('n1'));
  expect(md).toMatchObject({ providerID: 'lxd://default/n1', instanceType: 'edge-small', zone: 'host1', region: 'r1' });
  expect(md!.nodeAddresses).toEqual([
    { type: 'InternalIP', address: '198.51.100.11' },
    { type: 'InternalIP', address: '2001:db8::11' },
    { type: 'Hostname', address: 'n1' },
  ]);
});

test('zone: the cluster member\'s failure domain, else the member', async () => {
  instances = [instance('c1', { location: 'm1', addresses: { eth0: [['inet', '198.51.100.1', 'global']] } }), instance('c2', { location: 'm2', addresses: { eth0: [['inet', '198.51.100.2', 'global']] } })];
  const lxd = setup();
  expect((await lxd.instanceMetadata(node('c1')))?.zone).toBe('rack-a');
  expect((await lxd.instanceMetadata(node('c2')))?.zone).toBe('m2');
});

test('existence: listed exists; a 404 is not-found; a daemon error or an answer of the wrong shape is unknown; Stopped is shut down', async () => {
  instances = [instance('up', { addresses: { eth0: [['inet', '198.51.100.1', 'global']] } }), instance('off', { status: 'Stopped' })];
  const lxd = setup();
  expect(await lxd.instanceExists(node('up', 'lxd://default/up'))).toBe('exists');
  expect(await lxd.instanceShutdown(node('off', 'lxd://default/off'))).toBe(true);
  expect(await lxd.instanceShutdown(node('up', 'lxd://default/up'))).toBe(false);
  expect(await lxd.instanceExists(node('deleted', 'lxd://default/deleted'))).toBe('not-found');
  expect(await lxd.instanceExists(node('x', 'static://x'))).toBe('unknown');
  down = true;
  expect(await lxd.instanceExists(node('deleted', 'lxd://default/deleted'))).toBe('unknown');
  down = false;
  await Bun.sleep(5);
  garbage = true;
  // The list cannot be trusted; the instance asked for by name still answers.
  expect(await setup().instanceExists(node('up', 'lxd://default/up'))).toBe('exists');
  expect(await setup().instanceExists(node('up'))).toBe('unknown');
  garbage = false;
});

test('an instance that only left the filter is asked for by name: it exists, nothing is deleted', async () => {
  instances = [instance('filtered', { addresses: { eth0: [['inet', '198.51.100.3', 'global']] } })];
  requests.length = 0;
  const lxd = setup('filter: config.user.cluster eq edge\n');
  expect(await lxd.instanceExists(node('filtered', 'lxd://default/filtered'))).toBe('exists');
  expect(requests).toContain('/1.0/instances?recursion=2&project=default&filter=config.user.cluster+eq+edge');
  expect(requests.some((r) => r.startsWith('/1.0/instances/filtered?'))).toBe(true);
});

test('all projects: one request; the same name in two projects is ambiguous, unknown', async () => {
  instances = [instance('dup', { project: 'p1' }), instance('dup', { project: 'p2' }), instance('solo', { project: 'p2', status: 'Stopped' })];
  requests.length = 0;
  const lxd = setup('allProjects: true\n');
  expect(await lxd.instanceExists(node('dup'))).toBe('unknown');
  expect((await lxd.instanceMetadata(node('solo')))?.providerID).toBe('lxd://p2/solo');
  expect(requests.filter((r) => r.startsWith('/1.0/instances?'))).toContain('/1.0/instances?recursion=2&all-projects=true');
});
