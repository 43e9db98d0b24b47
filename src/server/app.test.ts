import { describe, expect, test } from 'bun:test';
import { Counter, Registry } from 'prom-client';
import { createLogger } from '../log.ts';
import { createServerApp, type ServerAppOptions } from './app.ts';
import type { Authentication, Authenticator, AuthorizationAttributes, AuthorizationDecision, Authorizer, UserInfo } from './types.ts';
import { HealthChecks } from './health.ts';
import { TooManyRequestsError } from './auth/per-client-limit.ts';

const ADMIN_TOKEN = 'admin-token-0123456789';
const VIEWER_TOKEN = 'viewer-token-0123456789';
const BROKEN_TOKEN = 'broken-token-0123456789';
const ALL_TOKENS = [ADMIN_TOKEN, VIEWER_TOKEN, BROKEN_TOKEN, 'unknown-token-0123456789'];

const users: Record<string, UserInfo> = {
  [ADMIN_TOKEN]: { username: 'admin', groups: ['system:masters'] },
  [VIEWER_TOKEN]: { username: 'viewer', groups: [] },
};

/**
 * Knows two tokens; the broken one makes it fail as an unreachable API server would. Careless on
 * purpose: its reasons and errors repeat the token, which the middleware must keep out of the log.
 */
class StubAuthenticator implements Authenticator {
  tokensSeen: string[] = [];
  async authenticateToken(token: string): Promise<Authentication> {
    this.tokensSeen.push(token);
    if (token === BROKEN_TOKEN) throw new Error(`TokenReview of ${token} failed: connection refused`);
    const user = users[token];
    return user ? { authenticated: true, user } : { authenticated: false, reason: `invalid bearer token ${token}` };
  }
}

/** Allows the admin everything; the viewer gets a reason; "explode" paths fail. */
class StubAuthorizer implements Authorizer {
  calls: AuthorizationAttributes[] = [];
  async authorize(a: AuthorizationAttributes): Promise<AuthorizationDecision> {
    this.calls.push(a);
    if (a.path === '/explode') throw new Error('SubjectAccessReview failed: 503');
    return a.user.username === 'admin' ? { allowed: true } : { allowed: false, reason: 'no RBAC policy matched' };
  }
}

interface Setup {
  app: ReturnType<typeof createServerApp>;
  checks: HealthChecks;
  registry: Registry;
  authenticator: StubAuthenticator;
  authorizer: StubAuthorizer;
  logLines: string[];
}

function setup(overrides: Partial<ServerAppOptions> = {}): Setup {
  const registry = new Registry();
  const counter = new Counter({ name: 'service_controller_loadbalancer_sync_total', help: 'LB syncs', registers: [registry] });
  counter.inc(3);
  const checks = new HealthChecks();
  checks.add('ping', () => {});
  const authenticator = new StubAuthenticator();
  const authorizer = new StubAuthorizer();
  const logLines: string[] = [];
  const logger = createLogger({ verbosity: 10, write: (l) => logLines.push(l) });
  const app = createServerApp({ registry, checks, logger, authenticator, authorizer, ...overrides });
  return { app, checks, registry, authenticator, authorizer, logLines };
}

const bearer = (token: string): RequestInit => ({ headers: { authorization: `Bearer ${token}` } });

async function status(res: Response): Promise<{ code: number; reason: string; message: string }> {
  expect(res.headers.get('content-type')).toBe('application/json');
  const body = (await res.json()) as { kind: string; code: number; reason: string; message: string };
  expect(body.kind).toBe('Status');
  return { code: body.code, reason: body.reason, message: body.message };
}

describe('/metrics', () => {
  test('serves the registry in the Prometheus text format, with its content type', async () => {
    const { app, registry } = setup();
    const res = await app.request('/metrics', bearer(ADMIN_TOKEN));
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe(registry.contentType);
    expect(res.headers.get('content-type')).toStartWith('text/plain; version=0.0.4');
    const text = await res.text();
    expect(text).toContain('# TYPE service_controller_loadbalancer_sync_total counter');
    expect(text).toContain('service_controller_loadbalancer_sync_total 3');
  });

  test('without a token: 401 Unauthorized, as a Kubernetes Status', async () => {
    const { app, authenticator } = setup();
    const res = await app.request('/metrics');
    expect(res.status).toBe(401);
    expect(await status(res)).toEqual({ code: 401, reason: 'Unauthorized', message: 'Unauthorized' });
    expect(authenticator.tokensSeen).toEqual([]);
  });

  test('a token the API server rejects, or a non-bearer header: 401', async () => {
    const { app } = setup();
    expect((await app.request('/metrics', bearer('unknown-token-0123456789'))).status).toBe(401);
    expect((await app.request('/metrics', { headers: { authorization: 'Basic YWRtaW46YWRtaW4=' } })).status).toBe(401);
  });

  test('a TokenReview that fails: 401, as upstream', async () => {
    const { app, logLines } = setup();
    const res = await app.request('/metrics', bearer(BROKEN_TOKEN));
    expect(res.status).toBe(401);
    expect(logLines.some((l) => l.includes('could not authenticate request') && l.includes('TokenReview of <redacted> failed: connection refused'))).toBe(true);
  });

  test('an authenticated user the authorizer denies: 403 naming user, verb and path', async () => {
    const { app, authorizer } = setup();
    const res = await app.request('/metrics', bearer(VIEWER_TOKEN));
    expect(res.status).toBe(403);
    expect(await status(res)).toEqual({
      code: 403,
      reason: 'Forbidden',
      message: 'forbidden: User "viewer" cannot get path "/metrics": no RBAC policy matched',
    });
    expect(authorizer.calls).toEqual([{ user: users[VIEWER_TOKEN]!, verb: 'get', path: '/metrics' }]);
  });

  test('a SubjectAccessReview that fails: 500 without the cause', async () => {
    const { app } = setup();
    const res = await app.request('/explode', bearer(ADMIN_TOKEN));
    expect(res.status).toBe(500);
    const s = await status(res);
    expect(s.reason).toBe('InternalError');
    expect(s.message).not.toContain('503');
  });

  test('the verb is the lowercased HTTP method; an allowed request to no route is 404', async () => {
    const { app, authorizer } = setup();
    const res = await app.request('/metrics', { method: 'POST', ...bearer(ADMIN_TOKEN) });
    expect(res.status).toBe(404);
    expect(authorizer.calls.map((c) => c.verb)).toEqual(['post']);
  });

  test('unknown paths need a token too: their existence is not told to strangers', async () => {
    const { app } = setup();
    expect((await app.request('/debug/pprof')).status).toBe(401);
    expect((await app.request('/debug/pprof', bearer(ADMIN_TOKEN))).status).toBe(404);
  });

  test('without an authenticator nothing outside the always-allow list is served (401)', async () => {
    const { app } = setup({ authenticator: undefined });
    expect((await app.request('/metrics', bearer(ADMIN_TOKEN))).status).toBe(401);
    expect((await app.request('/healthz')).status).toBe(200);
  });

  test('without an authorizer an authenticated caller is still refused (403)', async () => {
    const { app } = setup({ authorizer: undefined });
    const res = await app.request('/metrics', bearer(ADMIN_TOKEN));
    expect(res.status).toBe(403);
    expect((await status(res)).message).toBe('forbidden: User "admin" cannot get path "/metrics": no authorizer configured');
  });

  test('the authenticator is told which client asks, by address key (IPv4-mapped as IPv4)', async () => {
    const clients: (string | undefined)[] = [];
    const authenticator: Authenticator = {
      async authenticateToken(_token, client) {
        clients.push(client);
        return { authenticated: false };
      },
    };
    const { app } = setup({ authenticator, clientAddress: () => '::ffff:203.0.113.7' });
    await app.request('/metrics', bearer('some-token-0123456789'));
    expect(clients).toEqual(['203.0.113.7']);
  });

  test('a client over its share of token reviews: 429 with Retry-After, as a Kubernetes Status, logged without the token', async () => {
    const token = 'flood-token-0123456789';
    const authenticator: Authenticator = {
      async authenticateToken() {
        throw new TooManyRequestsError();
      },
    };
    const { app, logLines } = setup({ authenticator, clientAddress: () => '203.0.113.7' });
    const res = await app.request('/metrics', bearer(token));
    expect(res.status).toBe(429);
    expect(res.headers.get('retry-after')).toBe('1');
    expect(await status(res)).toEqual({ code: 429, reason: 'TooManyRequests', message: 'Too many requests, please try again later.' });
    expect(logLines.some((l) => l.includes('too many token reviews in flight') && l.includes('203.0.113.7'))).toBe(true);
    for (const l of logLines) expect(l).not.toContain(token);
  });
});

describe('always-allow paths', () => {
  test('the default list serves /healthz, /readyz and /livez without asking anyone', async () => {
    const { app, authenticator, authorizer } = setup();
    for (const path of ['/healthz', '/readyz', '/livez']) {
      const res = await app.request(path);
      expect(res.status).toBe(200);
      expect(await res.text()).toBe('ok');
    }
    // A token sent along is not looked at either.
    expect((await app.request('/healthz', bearer(VIEWER_TOKEN))).status).toBe(200);
    expect(authenticator.tokensSeen).toEqual([]);
    expect(authorizer.calls).toEqual([]);
  });

  test('a custom list replaces the default', async () => {
    const { app } = setup({ alwaysAllowPaths: ['/metrics'] });
    expect((await app.request('/metrics')).status).toBe(200);
    expect((await app.request('/healthz')).status).toBe(401);
    expect((await app.request('/healthz', bearer(ADMIN_TOKEN))).status).toBe(200);
  });

  test('prefix patterns open every path below them', async () => {
    const { app } = setup({ alwaysAllowPaths: ['/healthz*'] });
    expect((await app.request('/healthz')).status).toBe(200);
    expect((await app.request('/healthz/ping')).status).toBe(200);
    expect((await app.request('/readyz')).status).toBe(401);
  });
});

describe('health endpoints', () => {
  test('text/plain answers; a failing check makes its endpoints 500 and leaves the others alone', async () => {
    const { app, checks } = setup();
    checks.add('leader-election', () => {
      throw new Error('lease held by host-b');
    }, { endpoints: ['healthz'] });
    const healthz = await app.request('/healthz');
    expect(healthz.status).toBe(500);
    expect(healthz.headers.get('content-type')).toBe('text/plain; charset=utf-8');
    expect(healthz.headers.get('x-content-type-options')).toBe('nosniff');
    expect(await healthz.text()).toBe('[+]ping ok\n[-]leader-election failed: reason withheld\nhealthz check failed\n');
    const readyz = await app.request('/readyz?verbose');
    expect(readyz.status).toBe(200);
    expect(await readyz.text()).toBe('[+]ping ok\nreadyz check passed\n');
  });

  test('?exclude skips checks, several at once', async () => {
    const { app, checks } = setup();
    checks.add('a', () => {
      throw new Error('a');
    });
    checks.add('b', () => {
      throw new Error('b');
    });
    const res = await app.request('/livez?exclude=a&exclude=b&verbose=1');
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('[+]ping ok\n[+]a excluded: ok\n[+]b excluded: ok\nlivez check passed\n');
  });

  test('checks added after the app was built are served (controllers start later)', async () => {
    const { app, checks } = setup();
    expect(await (await app.request('/healthz?verbose')).text()).toBe('[+]ping ok\nhealthz check passed\n');
    checks.add('node-controller', () => {});
    expect(await (await app.request('/healthz?verbose')).text()).toBe('[+]ping ok\n[+]node-controller ok\nhealthz check passed\n');
  });

  test('/ENDPOINT/NAME runs one check: the reason for an authenticated caller', async () => {
    const { app, checks } = setup();
    checks.add('leader-election', () => {
      throw new Error('lease held by host-b');
    }, { endpoints: ['healthz', 'livez'] });
    expect((await app.request('/healthz/leader-election')).status).toBe(401); // not on the default always-allow list
    const res = await app.request('/livez/leader-election', bearer(ADMIN_TOKEN));
    expect(res.status).toBe(500);
    expect(await res.text()).toBe('internal server error: lease held by host-b\n');
    const ping = await app.request('/healthz/ping', bearer(ADMIN_TOKEN));
    expect(ping.status).toBe(200);
    expect(await ping.text()).toBe('ok');
  });

  test('/ENDPOINT/NAME withholds the reason when the path is open to all', async () => {
    const { app, checks } = setup({ alwaysAllowPaths: ['/healthz*'] });
    checks.add('leader-election', () => {
      throw new Error('lease held by host-b');
    });
    const res = await app.request('/healthz/leader-election');
    expect(res.status).toBe(500);
    expect(await res.text()).toBe('internal server error: reason withheld\n');
  });

  test('/ENDPOINT/NAME is 404 for a check that endpoint does not run', async () => {
    const { app, checks } = setup();
    checks.add('informers-synced', () => {}, { endpoints: ['readyz'] });
    expect((await app.request('/readyz/informers-synced', bearer(ADMIN_TOKEN))).status).toBe(200);
    expect((await app.request('/livez/informers-synced', bearer(ADMIN_TOKEN))).status).toBe(404);
    expect((await app.request('/readyz/nope', bearer(ADMIN_TOKEN))).status).toBe(404);
  });

  test('failing checks\' reasons are logged', async () => {
    const { app, checks, logLines } = setup();
    checks.add('leader-election', () => {
      throw new Error('lease held by host-b');
    });
    await app.request('/readyz');
    expect(logLines.some((l) => l.includes('health check failed') && l.includes('lease held by host-b'))).toBe(true);
  });
});

test('no token ever reaches the log, whatever the outcome', async () => {
  const { app, checks, logLines } = setup();
  checks.add('bad', () => {
    throw new Error('broken');
  });
  for (const token of ALL_TOKENS) {
    for (const path of ['/metrics', '/explode', '/healthz', '/healthz/bad', '/nope']) {
      await app.request(path, bearer(token));
    }
  }
  expect(logLines.length).toBeGreaterThan(5);
  for (const line of logLines) for (const token of ALL_TOKENS) expect(line).not.toContain(token);
});
