/**
 * The types the server's parts share (auth/, tls/, app.ts, server.ts): who a request comes from,
 * the decisions about it, what the listener hands the handlers. In one file that imports nothing
 * of the server, so no two of its files need each other for a type.
 */
import type { X509Certificate } from 'node:crypto';

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

/** A request on a non-resource path, as a SubjectAccessReview's nonResourceAttributes. */
export interface AuthorizationAttributes {
  user: UserInfo;
  /** The lowercased HTTP method: get, post, ... */
  verb: string;
  path: string;
}

export interface AuthorizationDecision {
  allowed: boolean;
  /** The authorizer's explanation, shown to the (authenticated) caller when denied. */
  reason?: string;
}

/** Decides whether a user may make a request; throws only when it could not find out. */
export interface Authorizer {
  authorize(attributes: AuthorizationAttributes): Promise<AuthorizationDecision>;
}

/** The client's certificates as the TLS layer got them, leaf first. */
export type PeerChain = readonly X509Certificate[];

/** What the auth middleware leaves for the handlers: the caller, when they authenticated. */
export interface ServerEnv {
  Variables: { user?: UserInfo };
  /** From the client-certificate listener (tls/client-cert-server.ts); absent under Bun.serve. */
  Bindings: { peerChain?: PeerChain; clientAddress?: string };
}

/** One certificate for Bun.serve's `tls`: the default one has no serverName. */
export interface ServingCertificate {
  cert: string;
  key: string;
  serverName?: string;
  ciphers?: string;
  secureOptions?: number;
}
