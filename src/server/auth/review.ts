import type { KubeTransport } from '../../kube/transport.ts';
import { errorMessage } from '../../util/errors.ts';

/** The two reviews delegated auth asks the API server for: who a token is, and what they may do. */
const REVIEWS = {
  TokenReview: { apiVersion: 'authentication.k8s.io/v1', path: '/apis/authentication.k8s.io/v1/tokenreviews' },
  SubjectAccessReview: { apiVersion: 'authorization.k8s.io/v1', path: '/apis/authorization.k8s.io/v1/subjectaccessreviews' },
} as const;

/** Upstream's webhook timeout, for either review. */
const REVIEW_TIMEOUT_MS = 10_000;

/**
 * POSTs a review with `spec` and answers the API server's object. A failure is an Error
 * "KIND failed: ...", its text passed through `scrub` first (the token review removes the token
 * an error body may echo).
 */
export async function postReview<T>(transport: KubeTransport, kind: keyof typeof REVIEWS, spec: object, scrub: (text: string) => string = (text) => text): Promise<T> {
  const { apiVersion, path } = REVIEWS[kind];
  try {
    return await transport.request<T>({ method: 'POST', path, body: { apiVersion, kind, spec }, signal: AbortSignal.timeout(REVIEW_TIMEOUT_MS) });
  } catch (e) {
    throw new Error(`${kind} failed: ${scrub(errorMessage(e))}`);
  }
}
