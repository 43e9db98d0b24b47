import { describe, expect, test } from 'bun:test';
import { KubeApiError } from '../../kube/errors.ts';
import type { KubeRequest, KubeTransport } from '../../kube/transport.ts';
import { bearerToken } from './middleware.ts';
import { CachingAuthenticator, TokenReviewAuthenticator, redact } from './authn.ts';
import type { Authentication, Authenticator, AuthorizationAttributes, AuthorizationDecision, Authorizer } from '../types.ts';
import { CachingAuthorizer, PrivilegedGroupsAuthorizer, SubjectAccessReviewAuthorizer } from './authz.ts';
import { delegatingAuth } from './delegating.ts';
import { alwaysAllowMatcher } from './path-matcher.ts';
import { clientKey, PerClientReviewLimit, TooManyRequestsError } from './per-client-limit.ts';
import { TtlCache } from './ttl-cache.ts';

/** A KubeTransport that records requests and answers from a function. */
class FakeTransport implements KubeTransport {
  readonly server = 'https://api.test';
  readonly requests: KubeRequest[] = [];
  constructor(private readonly answer: (req: KubeRequest) => unknown) {}
  async request<T>(req: KubeRequest): Promise<T> {
    this.requests.push(req);
    return this.answer(req) as T;
  }
  async *watch<T>(): AsyncGenerator<{ type: 'ADDED'; object: T }> {
    throw new Error('not used');
  }
}

/** An authenticator answering from a table, counting the calls it gets. */
class StubAuthenticator implements Authenticator {
  calls = 0;
  constructor(public answers: Record<string, Authentication | Error>) {}
  async authenticateToken(token: string): Promise<Authentication> {
    this.calls++;
    const answer = this.answers[token] ?? { authenticated: false };
    if (answer instanceof Error) throw answer;
    return answer;
  }
}

class StubAuthorizer implements Authorizer {
  calls: AuthorizationAttributes[] = [];
  constructor(public decide: (a: AuthorizationAttributes) => AuthorizationDecision | Error) {}
  async authorize(a: AuthorizationAttributes): Promise<AuthorizationDecision> {
    this.calls.push(a);
    const d = this.decide(a);
    if (d instanceof Error) throw d;
    return d;
  }
}

class FakeClock {
  ms = 1_000;
  readonly now = (): number => this.ms;
}

const alice = { username: 'alice', groups: ['dev'] };

describe('always-allow paths', () => {
  test('match exactly, with or without the leading slash', () => {
    const allowed = alwaysAllowMatcher(['/healthz', 'readyz']);
    expect(allowed('/healthz')).toBe(true);
    expect(allowed('/readyz')).toBe(true);
    expect(allowed('/healthz/ping')).toBe(false);
    expect(allowed('/healthzx')).toBe(false);
    expect(allowed('/metrics')).toBe(false);
  });

  test('a trailing * matches by prefix', () => {
    const allowed = alwaysAllowMatcher(['/healthz*', '/debug/*']);
    expect(allowed('/healthz')).toBe(true);
    expect(allowed('/healthz/leader-election')).toBe(true);
    expect(allowed('/debug/pprof/heap')).toBe(true);
    expect(allowed('/debug')).toBe(false);
    expect(allowed('/metrics')).toBe(false);
  });

  test('"/*" allows everything and "/" only the root', () => {
    expect(alwaysAllowMatcher(['/*'])('/metrics')).toBe(true);
    const root = alwaysAllowMatcher(['/']);
    expect(root('/')).toBe(true);
    expect(root('/metrics')).toBe(false);
  });

  test('a * before the end is refused', () => {
    expect(() => alwaysAllowMatcher(['/he*lthz'])).toThrow('only a trailing * is allowed');
  });

  test('an empty list allows nothing', () => {
    expect(alwaysAllowMatcher([])('/healthz')).toBe(false);
  });
});

describe('bearer token', () => {
  test('is read from "Bearer TOKEN", the scheme in any case', () => {
    expect(bearerToken('Bearer abc.def')).toBe('abc.def');
    expect(bearerToken('bearer  abc ')).toBe('abc');
    expect(bearerToken('BEARER abc')).toBe('abc');
  });

  test('is absent for other schemes, an empty token or no header', () => {
    expect(bearerToken('Basic dXNlcjpwYXNz')).toBeUndefined();
    expect(bearerToken('Bearer ')).toBeUndefined();
    expect(bearerToken('Bearer a b')).toBeUndefined();
    expect(bearerToken(undefined)).toBeUndefined();
  });
});

describe('TokenReviewAuthenticator', () => {
  test('posts a TokenReview and returns the user it names', async () => {
    const transport = new FakeTransport(() => ({
      status: { authenticated: true, user: { username: 'system:serviceaccount:monitoring:prometheus', uid: 'u-1', groups: ['system:serviceaccounts'], extra: { scopes: ['a'] } } },
    }));
    const answer = await new TokenReviewAuthenticator(transport).authenticateToken('secret-token');
    expect(answer).toEqual({
      authenticated: true,
      user: { username: 'system:serviceaccount:monitoring:prometheus', uid: 'u-1', groups: ['system:serviceaccounts'], extra: { scopes: ['a'] } },
    });
    expect(transport.requests).toHaveLength(1);
    const [req] = transport.requests;
    expect(req!.method).toBe('POST');
    expect(req!.path).toBe('/apis/authentication.k8s.io/v1/tokenreviews');
    expect(req!.body).toEqual({ apiVersion: 'authentication.k8s.io/v1', kind: 'TokenReview', spec: { token: 'secret-token' } });
    expect(req!.signal).toBeInstanceOf(AbortSignal);
  });

  test('sends audiences when given', async () => {
    const transport = new FakeTransport(() => ({ status: { authenticated: false } }));
    await new TokenReviewAuthenticator(transport, ['edge-ccm']).authenticateToken('t');
    expect(transport.requests[0]!.body).toMatchObject({ spec: { token: 't', audiences: ['edge-ccm'] } });
  });

  test('a rejected token is unauthenticated, with the review\'s reason minus the token', async () => {
    const transport = new FakeTransport(() => ({ status: { authenticated: false, error: 'token "secret-token" expired' } }));
    expect(await new TokenReviewAuthenticator(transport).authenticateToken('secret-token')).toEqual({
      authenticated: false,
      reason: 'token "<redacted>" expired',
    });
  });

  test('an API error is thrown without the token in it', async () => {
    const transport = new FakeTransport(() => {
      throw new KubeApiError(500, 'InternalError', 'could not review secret-token', 'POST', '/apis/authentication.k8s.io/v1/tokenreviews');
    });
    const failure = await new TokenReviewAuthenticator(transport).authenticateToken('secret-token').catch((e: Error) => e);
    expect(failure).toBeInstanceOf(Error);
    expect((failure as Error).message).toStartWith('TokenReview failed: ');
    expect((failure as Error).message).toContain('could not review <redacted>');
    expect((failure as Error).message).not.toContain('secret-token');
  });

  test('redact removes every occurrence and leaves text alone for an empty token', () => {
    expect(redact('a tok b tok', 'tok')).toBe('a <redacted> b <redacted>');
    expect(redact('text', '')).toBe('text');
  });
});

describe('SubjectAccessReviewAuthorizer', () => {
  const attrs: AuthorizationAttributes = { user: { username: 'bob', uid: 'u-2', groups: ['ops'], extra: { k: ['v'] } }, verb: 'get', path: '/metrics' };

  test('posts a SubjectAccessReview on the non-resource path', async () => {
    const transport = new FakeTransport(() => ({ status: { allowed: true } }));
    expect(await new SubjectAccessReviewAuthorizer(transport).authorize(attrs)).toEqual({ allowed: true });
    const [req] = transport.requests;
    expect(req!.method).toBe('POST');
    expect(req!.path).toBe('/apis/authorization.k8s.io/v1/subjectaccessreviews');
    expect(req!.body).toEqual({
      apiVersion: 'authorization.k8s.io/v1',
      kind: 'SubjectAccessReview',
      spec: { user: 'bob', uid: 'u-2', groups: ['ops'], extra: { k: ['v'] }, nonResourceAttributes: { path: '/metrics', verb: 'get' } },
    });
  });

  test('not allowed, or allowed and denied at once, is a denial with the reason', async () => {
    const noOpinion = new FakeTransport(() => ({ status: { allowed: false, reason: 'no RBAC policy matched' } }));
    expect(await new SubjectAccessReviewAuthorizer(noOpinion).authorize(attrs)).toEqual({ allowed: false, reason: 'no RBAC policy matched' });
    const both = new FakeTransport(() => ({ status: { allowed: true, denied: true } }));
    expect(await new SubjectAccessReviewAuthorizer(both).authorize(attrs)).toEqual({ allowed: false });
  });

  test('an API error is thrown', async () => {
    const transport = new FakeTransport(() => {
      throw new Error('connection refused');
    });
    await expect(new SubjectAccessReviewAuthorizer(transport).authorize(attrs)).rejects.toThrow('SubjectAccessReview failed: connection refused');
  });
});

describe('CachingAuthenticator', () => {
  test('an accepted token is asked about once per TTL', async () => {
    const clock = new FakeClock();
    const inner = new StubAuthenticator({ good: { authenticated: true, user: alice } });
    const cached = new CachingAuthenticator(inner, { successTtlMs: 10_000, failureTtlMs: 3_000, now: clock.now });
    expect(await cached.authenticateToken('good')).toEqual({ authenticated: true, user: alice });
    clock.ms += 9_999;
    expect(await cached.authenticateToken('good')).toEqual({ authenticated: true, user: alice });
    expect(inner.calls).toBe(1);
    clock.ms += 1;
    await cached.authenticateToken('good');
    expect(inner.calls).toBe(2);
  });

  test('a rejected token stays rejected for its own TTL', async () => {
    const clock = new FakeClock();
    const inner = new StubAuthenticator({});
    const cached = new CachingAuthenticator(inner, { successTtlMs: 10_000, failureTtlMs: 3_000, now: clock.now });
    expect(await cached.authenticateToken('bad')).toEqual({ authenticated: false });
    // The token becomes valid, but the cached rejection holds until its TTL ends.
    inner.answers.bad = { authenticated: true, user: alice };
    clock.ms += 2_999;
    expect((await cached.authenticateToken('bad')).authenticated).toBe(false);
    clock.ms += 1;
    expect((await cached.authenticateToken('bad')).authenticated).toBe(true);
    expect(inner.calls).toBe(2);
  });

  test('defaults to 10 seconds for both, as upstream', async () => {
    const clock = new FakeClock();
    const inner = new StubAuthenticator({ good: { authenticated: true, user: alice } });
    const cached = new CachingAuthenticator(inner, { now: clock.now });
    await cached.authenticateToken('good');
    await cached.authenticateToken('bad');
    clock.ms += 9_999;
    await cached.authenticateToken('good');
    await cached.authenticateToken('bad');
    expect(inner.calls).toBe(2);
    clock.ms += 1;
    await cached.authenticateToken('good');
    await cached.authenticateToken('bad');
    expect(inner.calls).toBe(4);
  });

  test('tokens are cached apart', async () => {
    const inner = new StubAuthenticator({ a: { authenticated: true, user: alice }, b: { authenticated: true, user: { username: 'bob', groups: [] } } });
    const cached = new CachingAuthenticator(inner);
    expect(await cached.authenticateToken('a')).toMatchObject({ user: { username: 'alice' } });
    expect(await cached.authenticateToken('b')).toMatchObject({ user: { username: 'bob' } });
    expect(await cached.authenticateToken('a')).toMatchObject({ user: { username: 'alice' } });
    expect(inner.calls).toBe(2);
  });

  test('errors are not cached: the next request asks again', async () => {
    const inner = new StubAuthenticator({ t: new Error('API server unavailable') });
    const cached = new CachingAuthenticator(inner);
    await expect(cached.authenticateToken('t')).rejects.toThrow('API server unavailable');
    inner.answers.t = { authenticated: true, user: alice };
    expect((await cached.authenticateToken('t')).authenticated).toBe(true);
    expect(inner.calls).toBe(2);
  });

  test('concurrent requests with one token make one review', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let calls = 0;
    const slow: Authenticator = {
      async authenticateToken() {
        calls++;
        await gate;
        return { authenticated: true, user: alice };
      },
    };
    const cached = new CachingAuthenticator(slow);
    const answers = Promise.all([cached.authenticateToken('t'), cached.authenticateToken('t'), cached.authenticateToken('t')]);
    release();
    expect((await answers).every((a) => a.authenticated)).toBe(true);
    expect(calls).toBe(1);
  });

  test('a flood of rejected tokens does not push an accepted one out of the cache', async () => {
    const inner = new StubAuthenticator({ good: { authenticated: true, user: alice } });
    const cached = new CachingAuthenticator(inner, { maxEntries: 100 });
    await cached.authenticateToken('good');
    for (let i = 0; i < 500; i++) expect((await cached.authenticateToken(`random-${i}`)).authenticated).toBe(false);
    expect(inner.calls).toBe(501);
    expect((await cached.authenticateToken('good')).authenticated).toBe(true);
    expect(inner.calls).toBe(501); // still cached: no TokenReview for the scraper's token
    // Rejections stay bounded all the same: the oldest ones went.
    await cached.authenticateToken('random-0');
    expect(inner.calls).toBe(502);
  });

  test('the client is handed to the reviewer on a miss', async () => {
    const clients: (string | undefined)[] = [];
    const inner: Authenticator = {
      async authenticateToken(_token, client) {
        clients.push(client);
        return { authenticated: false };
      },
    };
    const cached = new CachingAuthenticator(inner);
    await cached.authenticateToken('t', '203.0.113.7');
    await cached.authenticateToken('t', '203.0.113.8'); // cached: not asked again
    expect(clients).toEqual(['203.0.113.7']);
  });

  test('a TTL of 0 turns caching off', async () => {
    const inner = new StubAuthenticator({ good: { authenticated: true, user: alice } });
    const cached = new CachingAuthenticator(inner, { successTtlMs: 0 });
    await cached.authenticateToken('good');
    await cached.authenticateToken('good');
    expect(inner.calls).toBe(2);
  });
});

describe('PerClientReviewLimit', () => {
  /** Holds every review until released, so that reviews stay in flight. */
  function heldReviews() {
    const releases: (() => void)[] = [];
    const inner: Authenticator = {
      authenticateToken: () => new Promise<Authentication>((resolve) => releases.push(() => resolve({ authenticated: false }))),
    };
    return { inner, releaseAll: () => releases.splice(0).forEach((r) => r()), held: () => releases.length };
  }

  test('a client with its share of reviews in flight is refused at once; other clients are not', async () => {
    const { inner, releaseAll, held } = heldReviews();
    const limit = new PerClientReviewLimit(inner, 3);
    const first = [1, 2, 3].map((i) => limit.authenticateToken(`t${i}`, '203.0.113.7'));
    const refused = await limit.authenticateToken('t4', '203.0.113.7').catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(TooManyRequestsError);
    expect((refused as Error).message).not.toContain('t4');
    expect(held()).toBe(3); // the refused one cost no review
    const other = limit.authenticateToken('good', '203.0.113.8');
    expect(held()).toBe(4);
    releaseAll();
    await Promise.all([...first, other]);
    // Its reviews done, the client has its share back.
    const again = limit.authenticateToken('t5', '203.0.113.7');
    expect(held()).toBe(1);
    releaseAll();
    await again;
  });

  test('a failed review gives the share back too', async () => {
    const limit = new PerClientReviewLimit({ authenticateToken: async () => { throw new Error('API down'); } }, 1);
    await expect(limit.authenticateToken('a', '203.0.113.7')).rejects.toThrow('API down');
    await expect(limit.authenticateToken('b', '203.0.113.7')).rejects.toThrow('API down');
  });

  test('requests without a known address share one share', async () => {
    const { inner, releaseAll } = heldReviews();
    const limit = new PerClientReviewLimit(inner, 1);
    const held = limit.authenticateToken('a');
    expect(await limit.authenticateToken('b').catch((e: unknown) => e)).toBeInstanceOf(TooManyRequestsError);
    releaseAll();
    await held;
  });

  test('nonsense limits are refused', () => {
    expect(() => new PerClientReviewLimit(heldReviews().inner, 0)).toThrow('at least 1');
  });
});

describe('clientKey', () => {
  test('IPv4 as it is, IPv4-mapped IPv6 as IPv4, IPv6 by its /64 (one host can use a whole /64)', () => {
    expect(clientKey('203.0.113.7')).toBe('203.0.113.7');
    expect(clientKey('::ffff:127.0.0.1')).toBe('127.0.0.1');
    expect(clientKey('2001:db8:1:2:aaaa::1')).toBe('2001:db8:1:2::/64');
    expect(clientKey('2001:db8:1:2:bbbb::9')).toBe('2001:db8:1:2::/64');
    expect(clientKey('2001:db8:1:3::1')).toBe('2001:db8:1:3::/64');
  });

  test('no address, or one that does not parse, is a key of its own', () => {
    expect(clientKey(undefined)).toBe('unknown');
    expect(clientKey('not-an-address')).toBe('not-an-address');
  });
});

describe('CachingAuthorizer', () => {
  const get = (path: string, user = alice): AuthorizationAttributes => ({ user, verb: 'get', path });

  test('allow and deny decisions are kept for their own TTLs', async () => {
    const clock = new FakeClock();
    const inner = new StubAuthorizer((a) => ({ allowed: a.path === '/metrics' }));
    const cached = new CachingAuthorizer(inner, { allowTtlMs: 5_000, denyTtlMs: 1_000, now: clock.now });
    expect(await cached.authorize(get('/metrics'))).toEqual({ allowed: true });
    expect(await cached.authorize(get('/debug'))).toEqual({ allowed: false });
    clock.ms += 999;
    await cached.authorize(get('/metrics'));
    await cached.authorize(get('/debug'));
    expect(inner.calls).toHaveLength(2);
    clock.ms += 1; // the denial expires, the allow does not
    await cached.authorize(get('/metrics'));
    await cached.authorize(get('/debug'));
    expect(inner.calls.map((c) => c.path)).toEqual(['/metrics', '/debug', '/debug']);
    clock.ms += 4_000;
    await cached.authorize(get('/metrics'));
    expect(inner.calls).toHaveLength(4);
  });

  test('the key covers user, groups, verb and path, but not the order of groups', async () => {
    const inner = new StubAuthorizer(() => ({ allowed: true }));
    const cached = new CachingAuthorizer(inner);
    await cached.authorize({ user: { username: 'alice', groups: ['a', 'b'] }, verb: 'get', path: '/metrics' });
    await cached.authorize({ user: { username: 'alice', groups: ['b', 'a'] }, verb: 'get', path: '/metrics' });
    expect(inner.calls).toHaveLength(1);
    await cached.authorize({ user: { username: 'alice', groups: ['a'] }, verb: 'get', path: '/metrics' });
    await cached.authorize({ user: { username: 'mallory', groups: ['a', 'b'] }, verb: 'get', path: '/metrics' });
    await cached.authorize({ user: { username: 'alice', groups: ['a', 'b'] }, verb: 'post', path: '/metrics' });
    await cached.authorize({ user: { username: 'alice', groups: ['a', 'b'] }, verb: 'get', path: '/healthz/ping' });
    await cached.authorize({ user: { username: 'alice', groups: ['a', 'b'], extra: { scope: ['x'] } }, verb: 'get', path: '/metrics' });
    expect(inner.calls).toHaveLength(6);
  });

  test('errors are not cached', async () => {
    let fail = true;
    const inner = new StubAuthorizer(() => (fail ? new Error('timeout') : { allowed: true }));
    const cached = new CachingAuthorizer(inner);
    await expect(cached.authorize(get('/metrics'))).rejects.toThrow('timeout');
    fail = false;
    expect(await cached.authorize(get('/metrics'))).toEqual({ allowed: true });
  });
});

describe('PrivilegedGroupsAuthorizer', () => {
  test('members of the groups are allowed without a review; others are asked about', async () => {
    const inner = new StubAuthorizer(() => ({ allowed: false, reason: 'nope' }));
    const authorizer = new PrivilegedGroupsAuthorizer(['system:masters'], inner);
    expect(await authorizer.authorize({ user: { username: 'root', groups: ['x', 'system:masters'] }, verb: 'get', path: '/metrics' })).toEqual({ allowed: true });
    expect(inner.calls).toHaveLength(0);
    expect(await authorizer.authorize({ user: alice, verb: 'get', path: '/metrics' })).toEqual({ allowed: false, reason: 'nope' });
    expect(inner.calls).toHaveLength(1);
  });
});

describe('delegatingAuth', () => {
  test('reviews through the transport, cached, with system:masters let through', async () => {
    const transport = new FakeTransport((req) => {
      if (req.path.endsWith('/tokenreviews')) {
        const token = (req.body as { spec: { token: string } }).spec.token;
        if (token === 'admin') return { status: { authenticated: true, user: { username: 'admin', groups: ['system:masters'] } } };
        if (token === 'viewer') return { status: { authenticated: true, user: { username: 'viewer', groups: [] } } };
        return { status: { authenticated: false } };
      }
      return { status: { allowed: false } };
    });
    const { authenticator, authorizer } = delegatingAuth(transport);
    const admin = await authenticator.authenticateToken('admin');
    const viewer = await authenticator.authenticateToken('viewer');
    await authenticator.authenticateToken('admin');
    if (!admin.authenticated || !viewer.authenticated) throw new Error('expected both to authenticate');
    expect(await authorizer.authorize({ user: admin.user, verb: 'get', path: '/metrics' })).toEqual({ allowed: true });
    expect(await authorizer.authorize({ user: viewer.user, verb: 'get', path: '/metrics' })).toEqual({ allowed: false });
    expect(await authorizer.authorize({ user: viewer.user, verb: 'get', path: '/metrics' })).toEqual({ allowed: false });
    expect(transport.requests.map((r) => r.path.split('/').pop())).toEqual(['tokenreviews', 'tokenreviews', 'subjectaccessreviews']);
  });
});

describe('TtlCache', () => {
  test('drops the entry written longest ago when full', () => {
    const cache = new TtlCache<number>(2, () => 0);
    cache.set('a', 1, 100);
    cache.set('b', 2, 100);
    cache.set('a', 3, 100); // rewriting makes "a" the newest
    cache.set('c', 4, 100);
    expect(cache.get('b')).toBeUndefined();
    expect(cache.get('a')).toBe(3);
    expect(cache.get('c')).toBe(4);
    expect(cache.size).toBe(2);
  });

  test('refuses a size below 1', () => {
    expect(() => new TtlCache(0)).toThrow('cache size must be at least 1');
  });
});
