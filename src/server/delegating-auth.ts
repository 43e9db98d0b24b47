import type { KubeTransport } from '../kube/transport.ts';
import { CachingAuthenticator, TokenReviewAuthenticator, type Authenticator } from './authn.ts';
import { CachingAuthorizer, PrivilegedGroupsAuthorizer, SubjectAccessReviewAuthorizer, type Authorizer } from './authz.ts';

export interface DelegatingAuthOptions {
  /** Default 10s each, as upstream's delegating authentication and authorization options. */
  tokenSuccessTtlMs?: number;
  tokenFailureTtlMs?: number;
  allowTtlMs?: number;
  denyTtlMs?: number;
  /** Allowed without a SubjectAccessReview; default system:masters, as upstream. */
  alwaysAllowGroups?: string[];
  audiences?: string[];
  now?: () => number;
}

/**
 * The authenticator and authorizer the serving side uses by default: TokenReview and
 * SubjectAccessReview against the API server behind `transport`, each cached.
 */
export function delegatingAuth(
  transport: KubeTransport,
  options: DelegatingAuthOptions = {},
): { authenticator: Authenticator; authorizer: Authorizer } {
  const authenticator = new CachingAuthenticator(new TokenReviewAuthenticator(transport, options.audiences), {
    successTtlMs: options.tokenSuccessTtlMs,
    failureTtlMs: options.tokenFailureTtlMs,
    now: options.now,
  });
  const reviewed = new CachingAuthorizer(new SubjectAccessReviewAuthorizer(transport), {
    allowTtlMs: options.allowTtlMs,
    denyTtlMs: options.denyTtlMs,
    now: options.now,
  });
  const authorizer = new PrivilegedGroupsAuthorizer(options.alwaysAllowGroups ?? ['system:masters'], reviewed);
  return { authenticator, authorizer };
}
