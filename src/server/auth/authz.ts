import type { KubeTransport } from '../../kube/transport.ts';
import type { AuthorizationAttributes, AuthorizationDecision, Authorizer, UserInfo } from '../types.ts';
import { postReview } from './review.ts';
import { yesNoLookup, type CachedLookup, type YesNoCacheOptions } from './ttl-cache.ts';
import { compareCodeUnits } from '../../util/compare.ts';


interface SubjectAccessReview {
  status?: { allowed?: boolean; denied?: boolean; reason?: string; evaluationError?: string };
}

/** Asks the API server (SubjectAccessReview), as upstream's delegating authorizer. */
export class SubjectAccessReviewAuthorizer implements Authorizer {
  constructor(private readonly transport: KubeTransport) {}

  async authorize({ user, verb, path }: AuthorizationAttributes): Promise<AuthorizationDecision> {
    const review = await postReview<SubjectAccessReview>(this.transport, 'SubjectAccessReview', {
      user: user.username,
      groups: user.groups,
      ...(user.uid ? { uid: user.uid } : {}),
      ...(user.extra ? { extra: user.extra } : {}),
      nonResourceAttributes: { path, verb },
    });
    const status = review?.status ?? {};
    // An explicit deny wins over an allow, as upstream's webhook authorizer.
    const allowed = status.allowed === true && status.denied !== true;
    return { allowed, ...(status.reason ? { reason: status.reason } : {}) };
  }
}

/**
 * Lets members of the given groups through without asking: upstream skips the review for
 * system:masters, which the API server's own authorizer always allows anyway.
 */
export class PrivilegedGroupsAuthorizer implements Authorizer {
  private readonly groups: Set<string>;

  constructor(groups: string[], private readonly inner: Authorizer) {
    this.groups = new Set(groups);
  }

  authorize(attributes: AuthorizationAttributes): Promise<AuthorizationDecision> {
    if (attributes.user.groups.some((g) => this.groups.has(g))) return Promise.resolve({ allowed: true });
    return this.inner.authorize(attributes);
  }
}

export interface CachingAuthorizerOptions extends YesNoCacheOptions {
  /** Upstream's --authorization-webhook-cache-authorized-ttl, 10s. */
  allowTtlMs?: number;
  /** Upstream's --authorization-webhook-cache-unauthorized-ttl, 10s. */
  denyTtlMs?: number;
}

/** Remembers decisions per (user, verb, path) for a short time. */
export class CachingAuthorizer implements Authorizer {
  private readonly lookup: CachedLookup<AuthorizationDecision>;

  constructor(
    private readonly inner: Authorizer,
    options: CachingAuthorizerOptions = {},
  ) {
    this.lookup = yesNoLookup((decision) => decision.allowed, { yesMs: options.allowTtlMs, noMs: options.denyTtlMs }, options);
  }

  authorize(attributes: AuthorizationAttributes): Promise<AuthorizationDecision> {
    return this.lookup.get(cacheKey(attributes), () => this.inner.authorize(attributes));
  }
}

/** Everything the decision depends on, in a fixed order (groups and extra sorted). */
function cacheKey({ user, verb, path }: AuthorizationAttributes): string {
  const extra = Object.entries(user.extra ?? {})
    .map(([k, v]) => [k, [...v].sort()] as const)
    .sort(([a], [b]) => compareCodeUnits(a, b));
  return JSON.stringify([user.username, user.uid ?? '', [...user.groups].sort(), extra, verb, path]);
}
