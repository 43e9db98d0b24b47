import { afterAll, afterEach, beforeAll, describe, expect, test } from 'bun:test';
import http2 from 'node:http2';
import https from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import net from 'node:net';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { createCertificateAuthority, issueCertificate, type CertificateAuthority, type IssuedCertificate } from '../../test/harness/certs.ts';
import { tempDir } from '../../test/harness/ccm-process.ts';
import { eventually } from '../../test/harness/eventually.ts';
import { transportFor, writeKubeconfig } from '../../test/harness/kubeconfig.ts';
import { HttpVersionChoice } from './http-version.ts';
import { BunKubeTransport, type TransportOptions } from './transport.ts';

/**
 * The HTTP version the transport speaks, checked on the wire: TLS servers that say which
 * version each request came over (node:http2 with HTTP/1.1 allowed, and an HTTP/1.1-only one),
 * and a TCP relay in front that counts connections and can silence one (a black-holed
 * connection, as behind a VIP that moved without a reset).
 */

describe('HttpVersionChoice', () => {
  test('https: HTTP/2; DISABLE_HTTP2 (any non-empty value, as client-go): HTTP/1.1; plain http: left to Bun (HTTP/1.1)', () => {
    expect(new HttpVersionChoice('https://10.0.0.1:6443', {}).protocol).toBe('http2');
    expect(new HttpVersionChoice('https://10.0.0.1:6443', { DISABLE_HTTP2: '' }).protocol).toBe('http2');
    const disabled = new HttpVersionChoice('https://10.0.0.1:6443', { DISABLE_HTTP2: 'true' });
    expect([disabled.protocol, disabled.reason]).toEqual(['http1.1', 'DISABLE_HTTP2']);
    const plain = new HttpVersionChoice('http://127.0.0.1:8080', {});
    expect([plain.protocol, plain.reason]).toEqual([undefined, 'plain http']);
  });

  test('only an h2 refusal of a request sent as HTTP/2 switches, once', () => {
    const choice = new HttpVersionChoice('https://10.0.0.1:6443', {});
    const refusal = Object.assign(new TypeError('HTTP2Unsupported fetching'), { code: 'HTTP2Unsupported' });
    expect(choice.refused(new Error('ECONNREFUSED'), 'http2')).toBe(false);
    expect(choice.refused(refusal, 'http1.1')).toBe(false);
    expect(choice.protocol).toBe('http2');
    expect(choice.refused(refusal, 'http2')).toBe('switched');
    expect(choice.refused(refusal, 'http2')).toBe('again'); // a request that was in flight with it
    expect([choice.protocol, choice.reason]).toEqual(['http1.1', 'server did not select h2']);
  });
});

let dir: string;
let ca: CertificateAuthority;
let serving: IssuedCertificate;
const closers: (() => void)[] = [];

beforeAll(async () => {
  dir = tempDir('edge-ccm-http-version-');
  ca = await createCertificateAuthority(dir, 'ca', 'http-version-test-ca');
  serving = await issueCertificate(ca, dir, 'server', { commonName: 'localhost', usage: 'server', dnsNames: ['localhost'], ipAddresses: ['127.0.0.1'] });
});
afterEach(() => {
  for (const close of closers.splice(0)) close();
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

interface Seen { method: string; path: string; version: string }

/** A TLS server answering every request with `{}` (or holding it, for paths starting /hold), recording its HTTP version. */
async function tlsServer(kind: 'h2 and http/1.1' | 'http/1.1 only'): Promise<{ port: number; seen: Seen[] }> {
  const seen: Seen[] = [];
  // node:http2's compatibility API answers as node:http's does: one handler serves both.
  const handler = (req: IncomingMessage, res: ServerResponse) => {
    seen.push({ method: req.method ?? '', path: req.url ?? '', version: req.httpVersion });
    if (req.url?.startsWith('/hold')) return; // never answered; the client's timeout ends it
    if (req.url?.startsWith('/stream')) {
      res.writeHead(200, { 'content-type': 'application/json' });
      const tick = setInterval(() => res.write(`${JSON.stringify({ type: 'BOOKMARK', object: { metadata: { resourceVersion: '1' } } })}\n`), 50);
      res.on('close', () => clearInterval(tick));
      closers.push(() => clearInterval(tick));
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('{}');
  };
  const options = { key: serving.keyPem, cert: serving.certPem };
  const server = kind === 'h2 and http/1.1'
    ? http2.createSecureServer({ ...options, allowHTTP1: true }, handler as never)
    : https.createServer(options, handler as never);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  closers.push(() => server.close());
  return { port: (server.address() as net.AddressInfo).port, seen };
}

/** A TCP relay to `port` that counts the connections through it and can silence them all: bytes then go nowhere, nothing is closed. */
async function relay(port: number): Promise<{ port: number; connections: () => number; silenceAll: () => void; closeSilenced: () => void }> {
  const silenced = new Set<number>();
  let opened = 0;
  const sockets: net.Socket[] = [];
  const clients = new Map<number, net.Socket>();
  const server = net.createServer((client) => {
    const id = ++opened;
    const upstream = net.connect(port, '127.0.0.1');
    clients.set(id, client);
    sockets.push(client, upstream);
    client.on('data', (d) => { if (!silenced.has(id)) upstream.write(d); });
    upstream.on('data', (d) => { if (!silenced.has(id)) client.write(d); });
    for (const s of [client, upstream]) s.on('error', () => {});
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  closers.push(() => {
    for (const s of sockets) s.destroy();
    server.close();
  });
  return {
    port: (server.address() as net.AddressInfo).port,
    connections: () => opened,
    silenceAll: () => { for (let id = 1; id <= opened; id++) silenced.add(id); },
    closeSilenced: () => { for (const id of silenced) clients.get(id)?.destroy(); },
  };
}

/** A transport to the TLS server at `port`, through a kubeconfig file as the product reads one; no rate limit unless the options say. */
async function transport(port: number, options: TransportOptions = {}): Promise<BunKubeTransport> {
  const path = await writeKubeconfig(join(dir, `kubeconfig-${port}.yaml`), `https://localhost:${port}`, ca.certPem, 'u', { token: 'not-a-secret' });
  return transportFor(path, { qps: 0, ...options });
}

const get = (t: BunKubeTransport, path = '/api/v1/nodes') => t.request({ method: 'GET', path });

test('to a server that offers h2, requests go over HTTP/2, twenty at once on one connection', async () => {
  const server = await tlsServer('h2 and http/1.1');
  const through = await relay(server.port);
  const t = await transport(through.port);
  await get(t); // the connection open first: the twenty below meet it rather than race to open their own
  await Promise.all(Array.from({ length: 20 }, () => get(t)));
  expect(server.seen.map((s) => s.version)).toEqual(Array(21).fill('2.0'));
  expect(through.connections()).toBe(1);
  expect(t.protocol).toEqual({ version: 'http2', reason: 'default' });
});

test('with DISABLE_HTTP2 set, the same server gets HTTP/1.1', async () => {
  const server = await tlsServer('h2 and http/1.1');
  const before = process.env.DISABLE_HTTP2;
  process.env.DISABLE_HTTP2 = '1';
  try {
    const t = await transport(server.port);
    await Promise.all([get(t), get(t)]);
    expect(t.protocol).toEqual({ version: 'http1.1', reason: 'DISABLE_HTTP2' });
  } finally {
    if (before === undefined) delete process.env.DISABLE_HTTP2;
    else process.env.DISABLE_HTTP2 = before;
  }
  expect(server.seen.map((s) => s.version)).toEqual(['1.1', '1.1']);
});

test('a server that does not select h2 gets every request once, over HTTP/1.1, and the fallback is told once', async () => {
  const server = await tlsServer('http/1.1 only');
  const told: unknown[] = [];
  const t = await transport(server.port, { userAgent: 'edge-ccm/test', onHttpVersionChange: (info) => told.push(info) });
  // Five at once, all sent as HTTP/2 before the first refusal came back, one of them a POST.
  await Promise.all([
    ...Array.from({ length: 4 }, () => get(t)),
    t.request({ method: 'POST', path: '/api/v1/namespaces/default/events', body: { kind: 'Event' } }),
  ]);
  await get(t);
  expect(server.seen.map((s) => s.version)).toEqual(Array(6).fill('1.1'));
  expect(server.seen.filter((s) => s.method === 'POST')).toHaveLength(1);
  expect(told).toEqual([{ change: 'h2 refused', server: `https://localhost:${server.port}`, userAgent: 'edge-ccm/test' }]);
  expect(t.protocol).toEqual({ version: 'http1.1', reason: 'server did not select h2' });
});

test('a request timing out on a healthy HTTP/2 connection ends its own stream only: a watch beside it goes on', async () => {
  const server = await tlsServer('h2 and http/1.1');
  const through = await relay(server.port);
  const t = await transport(through.port, { requestTimeoutMs: 300, http2Probe: { intervalMs: 100, timeoutMs: 1000 } });
  const stop = new AbortController();
  let events = 0;
  const watching = (async () => {
    for await (const _ of t.watch('/stream', {}, stop.signal)) events++;
  })();
  while (events < 2) await Bun.sleep(20);
  await expect(get(t, '/hold')).rejects.toThrow(/timed out|abort/i);
  const afterTimeout = events;
  await Bun.sleep(300);
  expect(events).toBeGreaterThan(afterTimeout); // still delivering
  // The timeout moved the client to HTTP/1.1 (it cannot tell a slow answer from a dead
  // connection); the connection answers, so the first probe brings it back.
  await eventually('back on HTTP/2', () => t.protocol.version === 'http2', 5000);
  stop.abort();
  await watching;
  expect(through.connections()).toBe(1);
});

test('a black-holed HTTP/2 connection: the request on it times out, the client goes on over HTTP/1.1, and comes back to HTTP/2 once a probe is answered', async () => {
  const server = await tlsServer('h2 and http/1.1');
  const through = await relay(server.port);
  const told: string[] = [];
  const t = await transport(through.port, { requestTimeoutMs: 300, http2Probe: { intervalMs: 100, timeoutMs: 100 }, onHttpVersionChange: (info) => told.push(info.change) });
  await get(t);
  through.silenceAll();
  await expect(get(t)).rejects.toThrow(/timed out|abort/i);
  expect(told).toEqual(['h2 unanswered']);
  // Bun keeps the silent connection pooled for HTTP/2 (every request would time out on it):
  // this one goes over HTTP/1.1, on a new connection.
  await get(t);
  expect(server.seen.at(-1)?.version).toBe('1.1');
  expect(through.connections()).toBe(2);
  await Bun.sleep(500); // several probes, all unanswered on the silent connection
  expect(t.protocol).toEqual({ version: 'http1.1', reason: 'an HTTP/2 request went unanswered' });
  await get(t);
  expect(server.seen.at(-1)?.version).toBe('1.1');

  through.closeSilenced(); // the dead connection finally ends (a reset, or TCP giving up)
  await eventually('back on HTTP/2', () => t.protocol.version === 'http2', 5000);
  expect(told).toEqual(['h2 unanswered', 'h2 answers again']);
  await get(t);
  expect(server.seen.at(-1)?.version).toBe('2.0');
});

test('a caller giving up on an HTTP/2 request (a shutdown, a term ending) leaves the client on HTTP/2', async () => {
  const server = await tlsServer('h2 and http/1.1');
  const t = await transport(server.port, { requestTimeoutMs: 60_000 });
  const caller = new AbortController();
  const held = t.request({ method: 'GET', path: '/hold', signal: caller.signal });
  while (!server.seen.some((s) => s.path === '/hold')) await Bun.sleep(10);
  caller.abort(new Error('shutdown'));
  await expect(held).rejects.toThrow(/shutdown|abort/i);
  expect(t.protocol).toEqual({ version: 'http2', reason: 'default' });
  await get(t);
  expect(server.seen.at(-1)?.version).toBe('2.0');
});

test('a request the server refused h2 for is sent again without taking a second rate-limit token', async () => {
  const server = await tlsServer('http/1.1 only');
  // Five tokens and no refill to speak of: a second token per request would never come.
  const t = await transport(server.port, { qps: 0.0001, burst: 5 });
  await Promise.all(Array.from({ length: 5 }, () => get(t)));
  expect(server.seen.map((s) => s.version)).toEqual(Array(5).fill('1.1'));
});
