import { afterEach, describe, expect, test } from 'bun:test';
import fc from 'fast-check';
import type { Socket, TCPSocketListener } from 'bun';
import { ANONYMOUS_UNVERIFIED, HealthConnection, parseResponse } from './health-connection.ts';
import { ApiServerHealth } from './health.ts';

/**
 * The health check's own HTTP/1.1 exchange against a raw TCP server that answers as each test
 * says (chunked, split, closing, silent), counting the connections it accepts.
 */

describe('parseResponse', () => {
  test('a head and a Content-Length body: complete only with the whole body', () => {
    expect(parseResponse('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\no')).toBeUndefined();
    expect(parseResponse('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok')).toEqual({ status: '200', keepAlive: true });
    expect(parseResponse('HTTP/1.1 200 OK\r\nContent-Len')).toBeUndefined();
  });

  test('chunked: complete at the last chunk and its empty line, trailers allowed', () => {
    expect(parseResponse('HTTP/1.1 503 x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n')).toBeUndefined();
    expect(parseResponse('HTTP/1.1 503 x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n')).toEqual({ status: '503', keepAlive: true });
    expect(parseResponse('HTTP/1.1 200 x\r\ntransfer-encoding: chunked\r\n\r\n3;ext=1\r\nabc\r\n0\r\nX-T: 1\r\n\r\n')).toEqual({ status: '200', keepAlive: true });
    expect(parseResponse('HTTP/1.1 200 x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n')).toEqual({ status: '200', keepAlive: false });
  });

  test('what cannot be delimited gives its status and ends the connection', () => {
    expect(parseResponse('HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok')).toEqual({ status: '200', keepAlive: false });
    expect(parseResponse('HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok')).toEqual({ status: '200', keepAlive: false });
    expect(parseResponse('HTTP/1.1 200 OK\r\n\r\nuntil the end')).toEqual({ status: '200', keepAlive: false });
    expect(parseResponse(`HTTP/1.1 200 OK\r\nContent-Length: ${1 << 20}\r\n\r\n`)).toEqual({ status: '200', keepAlive: false });
    expect(parseResponse('SSH-2.0-OpenSSH\r\n\r\n')?.status).toStartWith('not an HTTP/1 response');
  });

  test('an interim 100 is skipped; 204 has no body', () => {
    expect(parseResponse('HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n')).toEqual({ status: '200', keepAlive: true });
    expect(parseResponse('HTTP/1.1 204 No Content\r\n\r\n')).toEqual({ status: '204', keepAlive: true });
  });
});

describe('parseResponse, property-based (the decision is taken on bytes from the network)', () => {
  const MAX = 64 * 1024;
  // 204 and 304 carry no body (RFC 9112 6.3): their own test above.
  const statusCode = fc.integer({ min: 200, max: 599 }).filter((n) => n !== 204 && n !== 304).map(String);
  const body = fc.string({ maxLength: 300 });
  const noise = fc.array(fc.tuple(fc.constantFrom('X-A', 'Cache-Control', 'Audit-Id', 'Content-Type'), fc.stringMatching(/^[ -~]{0,40}$/)), { maxLength: 4 });
  /** A well-formed response: its text, its status, and whether it keeps the connection. */
  const response = fc.record({ status: statusCode, body, chunked: fc.boolean(), close: fc.boolean(), headers: noise, interim: fc.boolean() }).map((r) => {
    const chunks = r.chunked ? `${r.body ? `${r.body.length.toString(16)}\r\n${r.body}\r\n` : ''}0\r\n\r\n` : r.body;
    const head = [`HTTP/1.1 ${r.status} Reason`, ...r.headers.map(([k, v]) => `${k}: ${v}`), r.chunked ? 'Transfer-Encoding: chunked' : `Content-Length: ${r.body.length}`, ...(r.close ? ['Connection: close'] : [])];
    return { text: `${r.interim ? 'HTTP/1.1 100 Continue\r\n\r\n' : ''}${head.join('\r\n')}\r\n\r\n${chunks}`, status: r.status, keepAlive: !r.close };
  });

  test('a well-formed response, however it is cut: nothing decided before its last byte, then its status', () => {
    fc.assert(fc.property(response, fc.array(fc.nat(), { maxLength: 5 }), (r, cuts) => {
      // The bodies are ASCII: one character per byte, as the connection decodes them (latin1).
      for (const cut of cuts.map((c) => c % r.text.length)) expect(parseResponse(r.text.slice(0, cut))).toBeUndefined();
      expect(parseResponse(r.text)).toEqual({ status: r.status, keepAlive: r.keepAlive });
    }), { numRuns: 500 });
  });

  test('any bytes: no throw, and a verdict once the buffer is past its bound (memory fed by the server is bounded)', () => {
    const bytes = fc.uint8Array({ maxLength: 2000 }).map((b) => Buffer.from(b).toString('latin1'));
    fc.assert(fc.property(fc.oneof(bytes, response.map((r) => r.text), fc.tuple(response, bytes).map(([r, b]) => r.text.slice(0, r.text.length >> 1) + b)), fc.constantFrom('', 'x', '\r\n', '0\r\n'), (text, pad) => {
      const parsed = parseResponse(text);
      if (parsed) expect(parsed.status.length).toBeGreaterThan(0);
      // Past three bounds (a head, interim heads, a body), whatever came first, something is decided.
      expect(parseResponse(text + pad.repeat(1) + 'y'.repeat(3 * MAX + 16))).toBeDefined();
    }), { numRuns: 300 });
  });
});

describe('HealthConnection against a raw server', () => {
  let listener: TCPSocketListener<undefined> | undefined;
  let connection: HealthConnection | undefined;
  afterEach(() => {
    connection?.close();
    listener?.stop(true);
    listener = undefined;
  });

  /** A server calling `answer` for each request it reads; returns its URL and its count of connections and requests. */
  function serve(answer: (socket: Socket<undefined>, n: number) => void) {
    const seen = { connections: 0, requests: 0, lastRequest: '' };
    listener = Bun.listen<undefined>({
      hostname: '127.0.0.1',
      port: 0,
      socket: {
        open: () => void (seen.connections += 1),
        data: (socket, data) => {
          seen.lastRequest = data.toString();
          answer(socket, ++seen.requests);
        },
      },
    });
    return { url: `http://127.0.0.1:${listener.port}/readyz?verbose=0`, seen };
  }

  test('a chunked answer split across writes, kept alive: three checks, one connection; the request is a GET of the path', async () => {
    const { url, seen } = serve((socket) => {
      socket.write('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n');
      setTimeout(() => socket.write('ok\r\n0\r\n\r\n'), 5);
    });
    connection = new HealthConnection(url, { tls: { rejectUnauthorized: false }, headers: { authorization: 'Bearer t0ken' } });
    for (let i = 0; i < 3; i++) expect(await connection.check(1000)).toBe('200');
    expect(seen).toMatchObject({ connections: 1, requests: 3 });
    expect(seen.lastRequest).toStartWith('GET /readyz?verbose=0 HTTP/1.1\r\n');
    expect(seen.lastRequest).toContain(`\r\nHost: 127.0.0.1:${listener!.port}\r\n`);
    expect(seen.lastRequest).toContain('\r\nauthorization: Bearer t0ken\r\n');
  });

  test('a server that closes each connection after its answer (no Connection: close said): every check still gets its status', async () => {
    const { url, seen } = serve((socket) => {
      socket.write('HTTP/1.1 503 Service Unavailable\r\nContent-Length: 3\r\n\r\nbad');
      socket.end();
    });
    connection = new HealthConnection(url, ANONYMOUS_UNVERIFIED);
    for (let i = 0; i < 3; i++) {
      expect(await connection.check(1000)).toBe('503');
      await Bun.sleep(20); // the close arrives while idle: the next check retries on a new connection
    }
    expect(seen.connections).toBe(3);
  });

  test('a hung server: a timeout, its connection dropped; the next check opens another', async () => {
    const { url, seen } = serve((socket, n) => {
      if (n > 1) socket.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok');
    });
    connection = new HealthConnection(url, ANONYMOUS_UNVERIFIED);
    expect(await connection.check(100)).toBe('timeout after 100 ms');
    expect(await connection.check(1000)).toBe('200');
    expect(seen.connections).toBe(2);
  });

  test('a server that accepts and never completes the TLS handshake: each check times out and closes its connection (none left open)', async () => {
    let open = 0;
    let accepted = 0;
    listener = Bun.listen<undefined>({
      hostname: '127.0.0.1',
      port: 0,
      socket: { open: () => void ((open += 1), (accepted += 1)), close: () => void (open -= 1), data: () => {} },
    });
    connection = new HealthConnection(`https://127.0.0.1:${listener.port}/readyz`, ANONYMOUS_UNVERIFIED);
    for (let i = 0; i < 4; i++) expect(await connection.check(50)).toBe('timeout after 50 ms');
    await Bun.sleep(50);
    expect(accepted).toBe(4);
    expect(open).toBe(0);
  });

  test('a closed port: the error in one line', async () => {
    const { url } = serve(() => {});
    listener!.stop(true);
    listener = undefined;
    connection = new HealthConnection(url, ANONYMOUS_UNVERIFIED);
    const outcome = await connection.check(1000);
    expect(outcome).toStartWith('ECONNREFUSED');
    expect(outcome).not.toContain('\n');
  });

  // Issue 38: a kube-apiserver killed closes the kept-alive connection; the check that finds it
  // dead runs then, not one interval later (the interval may be seconds, to spare idle CPU).
  test('ApiServerHealth: the server closing the connection between checks makes the next check run at once', async () => {
    let up = true;
    const { url } = serve((socket) => {
      if (up) socket.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok');
    });
    const changes: [boolean, string][] = [];
    const health = new ApiServerHealth({ url, intervalMs: 10_000, timeoutMs: 1000, unhealthyAfter: 1, healthyAfter: 1, onChange: (healthy, why) => changes.push([healthy, why]) });
    health.start();
    try {
      while (changes.length === 0) await Bun.sleep(5);
      expect(changes).toEqual([[true, '200']]);
      up = false;
      listener!.stop(true); // the server's connections closed and its port too, as a process killed
      listener = undefined;
      const closedAt = performance.now();
      while (changes.length === 1 && performance.now() - closedAt < 3000) await Bun.sleep(5);
      expect(changes[1]?.[0]).toBe(false);
      expect(changes[1]?.[1]).toStartWith('ECONNREFUSED');
    } finally {
      health.stop();
    }
  });
});
