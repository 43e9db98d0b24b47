import type { Context, MiddlewareHandler } from 'hono';
import type { Logger } from '../../log.ts';
import { redact } from './authn.ts';
import type { Authenticator, Authorizer, PeerChain, ServerEnv, UserInfo } from '../types.ts';
import { clientKey, TooManyRequestsError } from './per-client-limit.ts';
import { forbidden, internalError, tooManyRequests, unauthorized } from '../status.ts';
import { errorMessage } from '../../util/errors.ts';


export interface DelegatedAuthOptions {
  isAlwaysAllowed: (path: string) => boolean;
  /** Absent: no token can be checked, so every path outside the always-allow list answers 401. */
  authenticator?: Authenticator;
  /** Absent: authenticated callers are still refused (403) outside the always-allow list. */
  authorizer?: Authorizer;
  /** The address the request came from, when the runtime knows it; token reviews are shared out per client by it. */
  clientAddress?: (c: Context) => string | undefined;
  logger: Logger;
}

/**
 * Upstream's WithAuthentication + WithAuthorization for the serving side. Outcomes:
 * - always-allowed path: served with no questions asked (a token sent along is not looked at);
 * - no bearer token, a token the API server rejects, or a TokenReview that failed: 401
 *   (as upstream, where an authenticator error is an authentication failure);
 * - a token that needs a review while its client already has its share in flight: 429 with
 *   Retry-After (a flood from one address cannot queue everyone else's reviews);
 * - a SubjectAccessReview that denies (or has no opinion): 403 with the Kubernetes message;
 * - a SubjectAccessReview that failed: 500 (as upstream's authorization filter).
 * Tokens are never logged: log lines carry the username at most.
 */
export function delegatedAuth(opts: DelegatedAuthOptions): MiddlewareHandler<ServerEnv> {
  const log = opts.logger;
  return async (c, next) => {
    const path = c.req.path;
    if (opts.isAlwaysAllowed(path)) return next();

    // A verified client certificate (clientCertificateAuth, before this) authenticates first, as upstream's union.
    const certified = c.get('user');
    const token = bearerToken(c.req.header('authorization')) ?? '';
    if (!certified && (!token || !opts.authenticator)) {
      log.debug(4, 'unauthenticated request refused', { path, reason: token ? 'no authenticator' : 'no bearer token' });
      return unauthorized();
    }
    let user: UserInfo;
    const client = clientKey(opts.clientAddress?.(c));
    if (certified) user = certified;
    else try {
      const answer = await opts.authenticator!.authenticateToken(token, client);
      if (!answer.authenticated) {
        // redact again: the authenticator is pluggable, and this line must stay token-free whatever it says
        log.debug(2, 'bearer token rejected', { path, reason: answer.reason && redact(answer.reason, token) });
        return unauthorized();
      }
      user = answer.user;
    } catch (e) {
      if (e instanceof TooManyRequestsError) {
        // debug, not warn: a flood would otherwise flood the log as well
        log.debug(2, 'request refused: too many token reviews in flight for its client', { path, client });
        return tooManyRequests(e.retryAfterSeconds);
      }
      log.warn('could not authenticate request', { path, error: redact(errorMessage(e), token) });
      return unauthorized();
    }

    const verb = c.req.method.toLowerCase();
    if (!opts.authorizer) {
      log.debug(2, 'request refused: no authorizer configured', { path, user: user.username });
      return forbidden(user.username, verb, path, 'no authorizer configured');
    }
    try {
      const decision = await opts.authorizer.authorize({ user, verb, path });
      if (!decision.allowed) {
        log.debug(2, 'request forbidden', { path, verb, user: user.username, reason: decision.reason });
        return forbidden(user.username, verb, path, decision.reason);
      }
    } catch (e) {
      log.warn('could not authorize request', { path, verb, user: user.username, error: errorMessage(e) });
      return internalError('authorization check failed');
    }
    c.set('user', user);
    return next();
  };
}

/** The token of an `Authorization: Bearer TOKEN` header (scheme case-insensitive), if any. */
export function bearerToken(header: string | undefined): string | undefined {
  const match = /^\s*bearer\s+(\S+)\s*$/i.exec(header ?? '');
  return match?.[1];
}
