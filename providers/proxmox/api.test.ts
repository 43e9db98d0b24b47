import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Registry } from 'prom-client';
import { ProxmoxApi, ProxmoxApiError, REQUEST } from './api.ts';
import { ProxmoxProvider } from './provider.ts';
import type { ProviderContext } from '../../src/cloud/types.ts';
import type { KubeTransport } from '../../src/kube/transport.ts';
import type { ProxmoxResponder } from '../../test/fakes/proxmox-responder.ts';
import { createCertificateAuthority, issueCertificate } from '../../test/harness/certs.ts';
import { Clock, PASSWORD, TOKEN_SECRET, USER, closedAfterEach, loadOrThrow, node, providerFor, quietLogger, recordingLogger, sampleResponder, tokenConfig } from '../../test/fakes/proxmox-fixtures.ts';
import { eventually } from '../../test/harness/eventually.ts';

const t = closedAfterEach();

function start(opts: { users?: Record<string, string>; ticketLifetimeMs?: number } = {}): ProxmoxResponder {
  t.responder = sampleResponder(opts);
  return t.responder;
}

const snapshotReads = () => t.responder!.requestsTo('/cluster/resources').length;

describe('one VM list per period for every node', () => {
  test('the bulk call and many concurrent single calls read /cluster/resources once', async () => {
    const r = start();
    const clock = new Clock();
    t.provider = providerFor(tokenConfig(r.url), clock);
    const names = Array.from({ length: 200 }, (_, i) => `node-${i}`).concat('k8s-worker-1');
    const answers = await t.provider.instances.instancesExist(names.map((n) => node(n)));
    expect(answers[names.indexOf('k8s-worker-1')]).toBe('exists');
    expect(answers[names.indexOf('node-7')]).toBe('not-found');
    expect(answers.length).toBe(201);
    expect(snapshotReads()).toBe(1);
    // Within the cache period, per-node calls arriving together share the same list.
    await Promise.all(names.map((n) => t.provider!.instances.instanceExists(node(n))));
    expect(snapshotReads()).toBe(1);
    clock.advance(5_001);
    await Promise.all(names.slice(0, 50).map((n) => t.provider!.instances.instanceShutdown(node(n))));
    expect(snapshotReads()).toBe(2);
  });

  test('callers arriving while a read is under way share it (single-flight)', async () => {
    const r = start();
    r.delayMs = 200;
    t.provider = providerFor(tokenConfig(r.url), new Clock());
    const answers = await Promise.all(Array.from({ length: 30 }, () => t.provider!.instances.instanceExists(node('k8s-worker-2'))));
    expect(new Set(answers)).toEqual(new Set(['exists']));
    expect(snapshotReads()).toBe(1);
  });
});

describe('unknown when the API cannot answer, and back-off', () => {
  test.each([500, 503, 596])('HTTP %d: unknown, then no request until the back-off has passed', async (status) => {
    const r = start();
    const clock = new Clock();
    t.provider = providerFor(tokenConfig(r.url), clock);
    r.failNext(status);
    expect(await t.provider.instances.instanceExists(node('k8s-worker-1'))).toBe('unknown');
    expect(await t.provider.instances.instanceExists(node('k8s-worker-1'))).toBe('unknown');
    expect(snapshotReads()).toBe(1); // the second call was refused locally
    clock.advance(1_001);
    expect(await t.provider.instances.instanceExists(node('k8s-worker-1'))).toBe('exists');
    expect(snapshotReads()).toBe(2);
  });

  test('the back-off doubles up to its maximum, honours Retry-After, and resets after a success', async () => {
    const r = start();
    const clock = new Clock();
    const api = new ProxmoxApi(loadOrThrow(tokenConfig(r.url)).clusters[0]!, { now: clock.now, backoff: { initialMs: 1_000, maxMs: 8_000 } });
    const tryOnce = () => api.get(REQUEST.clusterResources, '/cluster/resources?type=vm').then(() => 'ok', (e: ProxmoxApiError) => e.status ?? e.message);
    r.failStatus = 503;
    const waits: number[] = [];
    for (let i = 0; i < 5; i++) {
      expect(await tryOnce()).toBe(503);
      let waited = 0;
      while (api.backingOff) {
        clock.advance(250);
        waited += 250;
      }
      waits.push(waited);
    }
    expect(waits).toEqual([1_000, 2_000, 4_000, 8_000, 8_000]);
    r.failStatus = undefined;
    expect(await tryOnce()).toBe('ok');
    r.failNext(429);
    r.retryAfterSeconds = 3;
    expect(await tryOnce()).toBe(429);
    expect(await tryOnce()).toContain('backing off');
    clock.advance(2_000);
    expect(api.backingOff).toBe(true); // Retry-After 3s beats the 1s first step
    clock.advance(1_001);
    expect(await tryOnce()).toBe('ok');
  });

  test('a slow API is unknown after timeoutSeconds; a stopped one is unknown too', async () => {
    const r = start();
    r.delayMs = 2_000;
    t.provider = providerFor(tokenConfig(r.url, { cluster: ['timeoutSeconds: 0.2'] }), new Clock());
    expect(await t.provider.instances.instanceExists(node('k8s-worker-1'))).toBe('unknown');
    await expect(t.provider.instances.instanceMetadata(node('k8s-worker-1'))).rejects.toThrow('backing off');
    r.stop();
    t.provider = providerFor(tokenConfig(r.url), new Clock());
    expect(await t.provider.instances.instanceExists(node('k8s-worker-1'))).toBe('unknown');
    expect(await t.provider.instances.instanceShutdown(node('k8s-worker-1'))).toBeUndefined();
  });

  test('a guest agent that is not running (HTTP 500) is about one VM: no back-off', async () => {
    const r = start();
    t.provider = providerFor(tokenConfig(r.url), new Clock());
    await expect(t.provider.instances.instanceMetadata(node('k8s-gpu-1'))).rejects.toThrow('HTTP 500: QEMU guest agent is not running');
    expect(await t.provider.instances.instanceExists(node('k8s-worker-1'))).toBe('exists');
  });
});

describe('authentication', () => {
  test('an API token is sent as PVEAPIToken=USER@REALM!TOKENID=SECRET; a wrong one is unknown without back-off', async () => {
    const r = start();
    t.provider = providerFor(tokenConfig(r.url), new Clock());
    expect(await t.provider.instances.instanceExists(node('k8s-worker-1'))).toBe('exists');
    expect(r.requests.map((q) => q.auth)).toEqual(['token']);
    const wrong = tokenConfig(r.url).replace('tokenSecretFile: /secrets/token', 'tokenSecret: nope');
    const clock = new Clock();
    t.provider = providerFor(wrong, clock);
    expect(await t.provider.instances.instanceExists(node('k8s-worker-1'))).toBe('unknown');
    expect(await t.provider.instances.instanceExists(node('k8s-worker-1'))).toBe('unknown');
    expect(r.requests.slice(1).map((q) => q.auth)).toEqual(['bad', 'bad']);
  });

  const passwordConfig = (url: string, renew = 3600) =>
    ['clusters:', '  - region: fra1', `    url: ${url}`, '    allowInsecureHTTP: true', `    username: ${USER}`, '    passwordFile: /secrets/password', `    ticketRenewSeconds: ${renew}`, '    cacheSeconds: 0', '    qps: 1000', '    burst: 1000', ''].join('\n');

  test('user and password: one login, the ticket as cookie, renewed when old', async () => {
    const r = start({ users: { [USER]: PASSWORD } });
    const clock = new Clock();
    t.provider = providerFor(passwordConfig(r.url, 600), clock);
    await Promise.all(['a', 'b', 'c'].map((n) => t.provider!.instances.instanceExists(node(n))));
    expect(r.requestsTo('/access/ticket')).toHaveLength(1);
    expect(r.requestsTo('/cluster/resources').every((q) => q.auth === 'ticket')).toBe(true);
    clock.advance(599_000);
    await t.provider.instances.instanceExists(node('k8s-worker-1'));
    expect(r.requestsTo('/access/ticket')).toHaveLength(1);
    clock.advance(1_000);
    expect(await t.provider.instances.instanceExists(node('k8s-worker-1'))).toBe('exists');
    expect(r.requestsTo('/access/ticket')).toHaveLength(2);
    expect(r.ticketCount).toBe(2);
  });

  test('a ticket the cluster no longer accepts (401) is replaced and the request retried once', async () => {
    const r = start({ users: { [USER]: PASSWORD } });
    t.provider = providerFor(passwordConfig(r.url), new Clock());
    expect(await t.provider.instances.instanceExists(node('k8s-worker-1'))).toBe('exists');
    r.revokeTickets();
    expect(await t.provider.instances.instanceExists(node('k8s-worker-1'))).toBe('exists');
    expect(r.requests.map((q) => `${q.path.split('?')[0]!.replace('/api2/json', '')} ${q.auth}`)).toEqual([
      '/access/ticket none',
      '/cluster/resources ticket',
      '/cluster/resources bad',
      '/access/ticket none',
      '/cluster/resources ticket',
    ]);
  });

  test('a wrong password is unknown', async () => {
    const r = start({ users: { [USER]: 'other' } });
    t.provider = providerFor(passwordConfig(r.url), new Clock());
    expect(await t.provider.instances.instanceExists(node('k8s-worker-1'))).toBe('unknown');
    expect(r.requestsTo('/cluster/resources')).toHaveLength(0);
  });
});

describe('metrics', () => {
  test('request durations and errors by request, registered on the context registry', async () => {
    const r = start();
    t.provider = providerFor(tokenConfig(r.url), new Clock(), quietLogger);
    const registry = new Registry();
    const stop = new AbortController();
    const ctx: ProviderContext = { transport: emptyServicesTransport(), logger: quietLogger, signal: stop.signal, registry };
    await t.provider.initialize(ctx);
    await t.provider.instances.instanceMetadata(node('k8s-worker-1'));
    r.failNext(596);
    await t.provider.instances.instanceExists(node('x', { providerID: 'proxmox://fra1/1' })).catch(() => undefined);
    const text = await registry.metrics();
    expect(text).toContain('cloudprovider_proxmox_api_request_duration_seconds_count{request="cluster_resources"} 1');
    expect(text).toContain('cloudprovider_proxmox_api_request_duration_seconds_count{request="vm_config"} 1');
    expect(text).toContain('edge_ccm_lb_pool_addresses_total');
    stop.abort();
  });

  test('errors are counted', async () => {
    const r = start();
    const clock = new Clock();
    t.provider = providerFor(tokenConfig(r.url), clock);
    const registry = new Registry();
    await t.provider.initialize({ transport: emptyServicesTransport(), logger: quietLogger, signal: new AbortController().signal, registry });
    r.failNext(596);
    expect(await t.provider.instances.instanceExists(node('k8s-worker-1'))).toBe('unknown');
    expect(await registry.metrics()).toContain('cloudprovider_proxmox_api_request_errors{request="cluster_resources"} 1');
  });
});

describe('TLS: CA file and fingerprint pinning', () => {
  let dir: string;
  let caSigned: { cert: string; key: string; ca: string };
  let selfSigned: { cert: string; key: string; fingerprint: string };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'edge-ccm-proxmox-tls-'));
    const ca = await createCertificateAuthority(dir, 'pve-root-ca', 'Proxmox Virtual Environment');
    const leaf = await issueCertificate(ca, dir, 'pve-ssl', { commonName: 'pve1', usage: 'server', ipAddresses: ['127.0.0.1'] });
    caSigned = { cert: leaf.certPem, key: leaf.keyPem, ca: ca.certPem };
    // A self-signed server certificate (as a custom pveproxy-ssl.pem can be).
    const self = await createCertificateAuthority(dir, 'self', 'pve-self');
    selfSigned = { cert: self.certPem, key: readFileSync(self.keyPath, 'utf8'), fingerprint: new (await import('node:crypto')).X509Certificate(self.certPem).fingerprint256 };
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const leafOnly = () => ({ cert: caSigned.cert, key: caSigned.key });

  function tlsProvider(tls: { cert: string; key: string }, clusterLines: string[]): ProxmoxProvider {
    t.responder = sampleResponder({ tls });
    const secrets = { readFile: (p: string) => (p === '/ca.pem' ? caSigned.ca : `${TOKEN_SECRET}\n`), env: () => undefined };
    t.provider = new ProxmoxProvider(loadOrThrow(tokenConfig(t.responder.url, { cluster: clusterLines }), secrets), { logger: quietLogger, now: new Clock().now });
    return t.provider;
  }

  test('caFile: the chain must lead to the CA', async () => {
    expect(await tlsProvider(leafOnly(), ['caFile: /ca.pem']).instances.instanceExists(node('k8s-worker-1'))).toBe('exists');
  });

  test('no caFile: the system roots refuse the cluster CA (unknown)', async () => {
    expect(await tlsProvider(caSigned, []).instances.instanceExists(node('k8s-worker-1'))).toBe('unknown');
  });

  test('caFile plus the leaf fingerprint: a different fingerprint is refused', async () => {
    const leafPrint = new (await import('node:crypto')).X509Certificate(caSigned.cert).fingerprint256;
    expect(await tlsProvider(leafOnly(), ['caFile: /ca.pem', `fingerprint: "${leafPrint}"`]).instances.instanceExists(node('k8s-worker-1'))).toBe('exists');
    t.responder!.stop();
    await t.provider!.close();
    expect(await tlsProvider(caSigned, ['caFile: /ca.pem', `fingerprint: "${'AB:'.repeat(31)}AB"`]).instances.instanceExists(node('k8s-worker-1'))).toBe('unknown');
  });

  test('a fingerprint alone pins a self-signed certificate', async () => {
    expect(await tlsProvider(selfSigned, [`fingerprint: "${selfSigned.fingerprint}"`]).instances.instanceExists(node('k8s-worker-1'))).toBe('exists');
    t.responder!.stop();
    await t.provider!.close();
    expect(await tlsProvider(selfSigned, [`fingerprint: "${'01:'.repeat(31)}01"`]).instances.instanceExists(node('k8s-worker-1'))).toBe('unknown');
    expect(t.responder!.requests).toHaveLength(0); // nothing was sent to the wrong server
  });

  test('a fingerprint alone cannot pin a CA-signed certificate whose CA is not presented: unknown, and the log says to use caFile', async () => {
    const leafPrint = new (await import('node:crypto')).X509Certificate(caSigned.cert).fingerprint256;
    t.responder = sampleResponder({ tls: { cert: caSigned.cert, key: caSigned.key } });
    const { logger, lines } = recordingLogger();
    t.provider = providerFor(tokenConfig(t.responder.url, { cluster: [`fingerprint: "${leafPrint}"`] }), new Clock(), logger);
    expect(await t.provider.instances.instanceExists(node('k8s-worker-1'))).toBe('unknown');
    expect(lines.join('\n')).toContain('set caFile');
  });

  test('a fingerprint alone pins a CA-signed certificate when the server presents its CA too', async () => {
    const leafPrint = new (await import('node:crypto')).X509Certificate(caSigned.cert).fingerprint256;
    // Bun.serve sends `ca` after the certificate, as a pveproxy-ssl.pem holding the chain would.
    expect(await tlsProvider(caSigned, [`fingerprint: "${leafPrint}"`]).instances.instanceExists(node('k8s-worker-1'))).toBe('exists');
  });

  test('insecureSkipVerify accepts any certificate', async () => {
    expect(await tlsProvider(caSigned, ['insecureSkipVerify: true']).instances.instanceExists(node('k8s-worker-1'))).toBe('exists');
  });
});

describe('topology label re-sync after live migration', () => {
  test('relabelNodes follows topologyLabelResync; onChange fires when a VM changed host between two lists', async () => {
    const r = start();
    const clock = new Clock();
    t.provider = providerFor(tokenConfig(r.url, { top: ['topologyLabelResync: true'] }), clock);
    expect(t.provider.relabelNodes).toBe(true);
    let changes = 0;
    const unsubscribe = t.provider.onChange(() => changes++);
    expect((await t.provider.instances.instanceMetadata(node('k8s-worker-1')))?.zone).toBe('pve1');
    r.updateVm(101, { node: 'pve2' });
    clock.advance(5_001);
    expect((await t.provider.instances.instanceMetadata(node('k8s-worker-1')))?.zone).toBe('pve2');
    expect(changes).toBe(1);
    clock.advance(5_001);
    await t.provider.instances.instanceExists(node('k8s-worker-1'));
    expect(changes).toBe(1); // nothing moved since
    unsubscribe();
    r.updateVm(101, { node: 'pve1' });
    clock.advance(5_001);
    await t.provider.instances.instanceExists(node('k8s-worker-1'));
    expect(changes).toBe(1);
  });

  test('off by default: no relabelNodes, no onChange calls', async () => {
    const r = start();
    const clock = new Clock();
    t.provider = providerFor(tokenConfig(r.url), clock);
    expect(t.provider.relabelNodes).toBe(false);
    let changes = 0;
    t.provider.onChange(() => changes++);
    await t.provider.instances.instanceExists(node('k8s-worker-1'));
    r.updateVm(101, { node: 'pve2' });
    clock.advance(5_001);
    await t.provider.instances.instanceExists(node('k8s-worker-1'));
    expect(changes).toBe(0);
  });

  test('with re-sync on, initialize reads the VM list every resyncPeriodSeconds even when nobody asks', async () => {
    const r = start();
    t.provider = providerFor(tokenConfig(r.url, { cluster: ['cacheSeconds: 0'], top: ['topologyLabelResync: true', 'resyncPeriodSeconds: 0.05'] }), new Clock());
    let changes = 0;
    t.provider.onChange(() => changes++);
    const stop = new AbortController();
    await t.provider.initialize({ transport: emptyServicesTransport(), logger: quietLogger, signal: stop.signal });
    await eventually('two VM lists read by the poller', () => snapshotReads() >= 2, 20_000, 20);
    r.updateVm(102, { node: 'pve1' });
    await eventually('the migration told to onChange', () => changes >= 1, 20_000, 20);
    expect(changes).toBeGreaterThanOrEqual(1);
    stop.abort();
    await t.provider.close();
    const reads = snapshotReads();
    await Bun.sleep(200);
    expect(snapshotReads()).toBe(reads); // the poller stopped
  });
});

/** A transport that answers the service list (for the load-balancer rebuild) with no services. */
function emptyServicesTransport(): KubeTransport {
  return {
    request: async () => ({ apiVersion: 'v1', kind: 'ServiceList', metadata: {}, items: [] }),
  } as unknown as KubeTransport;
}
