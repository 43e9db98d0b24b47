import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Server } from 'bun';
import { stringify } from 'yaml';
import type { BunKubeTransport } from '../../src/kube/transport.ts';
import type { HttpMethod } from '../../src/kube/http-method.ts';
import { transportFor } from './kubeconfig.ts';

/**
 * A slow API server for tests: a plain-HTTP proxy on loopback in front of the real kube-apiserver
 * that forwards every request with the admin's credentials, except the ones a test holds. A held
 * request waits until the test lets it go, then reaches the API server only if its client is still
 * connected (a request stuck on a slow link: one the client gave up on never arrives), or, with
 * `landsAnyway`, whether or not (an API server that already has the request and is slow to
 * commit it: the client giving up does not undo it). Every write that reached the API server is
 * recorded in the order it landed, so a test can tell what landed after what.
 */

export interface ForwardedWrite {
  method: HttpMethod;
  /** Path and query, as the client sent them. */
  path: string;
  body: string;
  status: number;
}

type Matcher = (method: string, path: string) => boolean;

export class ApiProxy {
  /** Writes (anything but GET) in the order the API server answered them. */
  readonly writes: ForwardedWrite[] = [];
  /** Held requests whose client went away before they were let go: they never reached the API server. */
  readonly abandoned: { method: string; path: string }[] = [];
  private readonly held: { match: Matcher; landsAnyway: boolean; waiting: number; release: Promise<void>; let: () => void }[] = [];

  private constructor(
    private readonly server: Server<undefined>,
    private readonly upstream: BunKubeTransport,
  ) {}

  static start(adminKubeconfig: string): ApiProxy {
    // No client-side bound: watches pass through for as long as the client keeps them.
    const upstream = transportFor(adminKubeconfig, { qps: 0, requestTimeoutMs: 0 });
    let proxy: ApiProxy | undefined;
    const server = Bun.serve({ hostname: '127.0.0.1', port: 0, idleTimeout: 0, fetch: (req) => proxy!.handle(req) });
    proxy = new ApiProxy(server, upstream);
    return proxy;
  }

  get url(): string {
    return `http://127.0.0.1:${this.server.port}`;
  }

  /** A kubeconfig that reaches the API server through this proxy (no credentials of its own). */
  kubeconfig(dir: string): string {
    const path = join(dir, 'proxy.kubeconfig');
    writeFileSync(path, stringify({
      apiVersion: 'v1',
      kind: 'Config',
      // client-node takes plain HTTP only with skipTLSVerify set (there is no TLS to verify).
      clusters: [{ name: 'proxy', cluster: { server: this.url, 'insecure-skip-tls-verify': true } }],
      users: [{ name: 'proxy', user: {} }],
      contexts: [{ name: 'proxy', context: { cluster: 'proxy', user: 'proxy' } }],
      'current-context': 'proxy',
    }), { mode: 0o600 });
    return path;
  }

  /**
   * Holds every request `match` selects from now on, until the returned function is called.
   * `waiting()` says how many are held at the moment.
   */
  hold(match: Matcher, opts: { landsAnyway?: boolean } = {}): { release: () => void; waiting: () => number } {
    let open!: () => void;
    const entry = { match, landsAnyway: opts.landsAnyway ?? false, waiting: 0, release: new Promise<void>((r) => (open = r)), let: () => open() };
    this.held.push(entry);
    return {
      release: () => {
        this.held.splice(this.held.indexOf(entry), 1);
        entry.let();
      },
      waiting: () => entry.waiting,
    };
  }

  stop(): void {
    for (const h of this.held.splice(0)) h.let();
    this.server.stop(true);
  }

  private async handle(req: Request): Promise<Response> {
    const url = new URL(req.url);
    const path = url.pathname + url.search;
    const body = req.method === 'GET' ? undefined : await req.text();
    const hold = this.held.find((h) => h.match(req.method, url.pathname));
    if (hold) {
      hold.waiting++;
      const gone = new Promise<'gone'>((r) => (req.signal.aborted ? r('gone') : req.signal.addEventListener('abort', () => r('gone'), { once: true })));
      const outcome = await Promise.race([hold.release.then(() => 'released' as const), gone]);
      if (outcome === 'gone' && hold.landsAnyway) await hold.release;
      hold.waiting--;
      if (req.signal.aborted) this.abandoned.push({ method: req.method, path });
      if (req.signal.aborted && !hold.landsAnyway) return new Response(null, { status: 499 });
    }
    const res = await this.upstream.sendRaw({
      method: req.method as HttpMethod,
      path,
      rawBody: body,
      contentType: req.headers.get('content-type') ?? undefined,
    });
    if (req.method !== 'GET') this.writes.push({ method: req.method as HttpMethod, path, body: body ?? '', status: res.status });
    return new Response(res.body, { status: res.status, headers: { 'content-type': res.headers.get('content-type') ?? 'application/json' } });
  }
}
