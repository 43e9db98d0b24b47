import { createHmac, randomBytes } from 'node:crypto';
import type { KubeTransport } from '../kube/transport.ts';
import { CachedLookup } from './ttl-cache.ts';
import { errorMessage } from '../util/errors.ts';

/** Who a request comes from, as a TokenReview tells it. */
export interface UserInfo {
  username: string;
  uid?: string;
  groups: string[];
  extra?: Record<string, string[]>;
}

export type Authentication =
  | { authenticated: true; user: UserInfo }
  | { authenticated: false; reason?: string };

/**
 * Decides who a bearer token belongs to. Resolves with authenticated: false for a token the
 * API server rejects; throws only when it could not find out (an API error, or the client's
 * share of reviews is taken: TooManyRequestsError). Neither the answer nor a thrown error ever
 * carries the token. `client` names who sent it (clientKey of its address), when known.
 */
export interface Authenticator {
  authenticateToken(token: string, client?: string): Promise<Authentication>;
}

interface TokenReview {
  status?: {
    authenticated?: boolean;
    user?: { username?: string; uid?: string; groups?: string[]; extra?: Record<string, string[]> };
    error?: string;
  };
}

const TOKEN_REVIEW_PATH = '/apis/authentication.k8s.io/v1/tokenreviews';
const REQUEST_TIMEOUT_MS = 10_000; // upstream's --authentication-token-webhook timeout

/** Asks the API server (TokenReview), as upstream's delegating token authenticator. */
export class TokenReviewAuthenticator implements Authenticator {
  constructor(
    private readonly transport: KubeTransport,
    /** spec.audiences; none means the API server's own audiences. */
    private readonly audiences: string[] = [],
  ) {}

  async authenticateToken(token: string): Promise<Authentication> {
    let review: TokenReview;
    try {
      review = await this.transport.request<TokenReview>({
        method: 'POST',
        path: TOKEN_REVIEW_PATH,
        body: {
          apiVersion: 'authentication.k8s.io/v1',
          kind: 'TokenReview',
          spec: { token, ...(this.audiences.length ? { audiences: this.audiences } : {}) },
        },
        signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
      });
    } catch (e) {
      throw new Error(`TokenReview failed: ${redact(errorMessage(e), token)}`);
    }
    const status = review?.status;
    if (!status?.authenticated || !status.user?.username) {
      return { authenticated: false, reason: status?.error ? redact(status.error, token) : undefined };
    }
    const { username, uid, groups, extra } = status.user;
    return {
      authenticated: true,
      user: { username, groups: groups ?? [], ...(uid ? { uid } : {}), ...(extra ? { extra } : {}) },
    };
  }
}

export interface CachingAuthenticatorOptions {
  /** How long an accepted token's user is kept; upstream's --authentication-token-webhook-cache-ttl, 10s. */
  successTtlMs?: number;
  /** How long a rejected token stays rejected; 10s as upstream. */
  failureTtlMs?: number;
  /** Per kind: accepted and rejected tokens are kept apart, so rejections never evict an accepted token. */
  maxEntries?: number;
  now?: () => number;
}

/**
 * Remembers answers per token for a short time, so a scraper does not cost a TokenReview per
 * scrape. The cache key is an HMAC-SHA-256 of the token under a key made per process (as
 * upstream's cached token authenticator): the raw token is never kept, and a memory dump does
 * not allow checking guesses against the keys.
 */
export class CachingAuthenticator implements Authenticator {
  private readonly lookup: CachedLookup<Authentication>;
  private readonly hmacKey = randomBytes(32);

  constructor(
    private readonly inner: Authenticator,
    options: CachingAuthenticatorOptions = {},
  ) {
    const successTtlMs = options.successTtlMs ?? 10_000;
    const failureTtlMs = options.failureTtlMs ?? 10_000;
    this.lookup = new CachedLookup({
      maxEntries: options.maxEntries ?? 4096,
      ttlMs: (answer) => (answer.authenticated ? successTtlMs : failureTtlMs),
      kindOf: (answer) => (answer.authenticated ? 'accepted' : 'rejected'),
      now: options.now,
    });
  }

  authenticateToken(token: string, client?: string): Promise<Authentication> {
    const key = createHmac('sha256', this.hmacKey).update(token).digest('base64');
    return this.lookup.get(key, () => this.inner.authenticateToken(token, client));
  }
}

/** Removes the token from text that may echo it (an API error body), before it reaches a log. */
export function redact(text: string, token: string): string {
  return token ? text.split(token).join('<redacted>') : text;
}
