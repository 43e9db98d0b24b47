import { createHmac, randomBytes } from 'node:crypto';
import type { KubeTransport } from '../../kube/transport.ts';
import { postReview } from './review.ts';
import { yesNoLookup, type YesNoCacheOptions, type CachedLookup } from './ttl-cache.ts';
import type { Authentication, Authenticator } from '../types.ts';


interface TokenReview {
  status?: {
    authenticated?: boolean;
    user?: { username?: string; uid?: string; groups?: string[]; extra?: Record<string, string[]> };
    error?: string;
  };
}

/** Asks the API server (TokenReview), as upstream's delegating token authenticator. */
export class TokenReviewAuthenticator implements Authenticator {
  constructor(
    private readonly transport: KubeTransport,
    /** spec.audiences; none means the API server's own audiences. */
    private readonly audiences: string[] = [],
  ) {}

  async authenticateToken(token: string): Promise<Authentication> {
    const review = await postReview<TokenReview>(this.transport, 'TokenReview', { token, ...(this.audiences.length ? { audiences: this.audiences } : {}) }, (text) => redact(text, token));
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

/** maxEntries counts per kind here: accepted and rejected tokens are kept apart, so rejections never evict an accepted token. */
export interface CachingAuthenticatorOptions extends YesNoCacheOptions {
  /** How long an accepted token's user is kept; upstream's --authentication-token-webhook-cache-ttl, 10s. */
  successTtlMs?: number;
  /** How long a rejected token stays rejected; 10s as upstream. */
  failureTtlMs?: number;
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
    this.lookup = yesNoLookup((answer) => answer.authenticated, { yesMs: options.successTtlMs, noMs: options.failureTtlMs }, { ...options, apart: true });
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
