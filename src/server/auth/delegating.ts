import type { KubeTransport } from '../../kube/transport.ts';
import { CachingAuthenticator, TokenReviewAuthenticator } from './authn.ts';
import type { Authenticator, Authorizer } from '../types.ts';
import { CachingAuthorizer, PrivilegedGroupsAuthorizer, SubjectAccessReviewAuthorizer } from './authz.ts';
import { PerClientReviewLimit } from './per-client-limit.ts';

export interface DelegatingAuthOptions {
  /** Default 10s each, as upstream's delegating authentication and authorization options. */
  tokenSuccessTtlMs?: number;
  tokenFailureTtlMs?: number;
  allowTtlMs?: number;
  denyTtlMs?: number;
  /** Allowed without a SubjectAccessReview; default system:masters, as upstream. */
  alwaysAllowGroups?: string[];
  audiences?: string[];
  /** TokenReviews one client may have in flight; default REVIEWS_IN_FLIGHT_PER_CLIENT. */
  reviewsPerClient?: number;
  now?: () => number;
}

/** Where the reviews go: one transport for both, or each its own (as upstream, each with its own budget). */
export type ReviewTransports = KubeTransport | { tokenReviews: KubeTransport; accessReviews: KubeTransport };

/**
 * The authenticator and authorizer the serving side uses by default: TokenReview and
 * SubjectAccessReview against the API server, each cached; a token that needs a review counts
 * against its client's share (PerClientReviewLimit) first.
 */
export function delegatingAuth(
  transports: ReviewTransports,
  options: DelegatingAuthOptions = {},
): { authenticator: Authenticator; authorizer: Authorizer } {
  const { tokenReviews, accessReviews } = 'tokenReviews' in transports ? transports : { tokenReviews: transports, accessReviews: transports };
  const reviewer = new PerClientReviewLimit(new TokenReviewAuthenticator(tokenReviews, options.audiences), options.reviewsPerClient);
  const authenticator = new CachingAuthenticator(reviewer, {
    successTtlMs: options.tokenSuccessTtlMs,
    failureTtlMs: options.tokenFailureTtlMs,
    now: options.now,
  });
  const reviewed = new CachingAuthorizer(new SubjectAccessReviewAuthorizer(accessReviews), {
    allowTtlMs: options.allowTtlMs,
    denyTtlMs: options.denyTtlMs,
    now: options.now,
  });
  const authorizer = new PrivilegedGroupsAuthorizer(options.alwaysAllowGroups ?? ['system:masters'], reviewed);
  return { authenticator, authorizer };
}
