/** A meta/v1 Status object: the body of a failed request, or the object of a watch's ERROR event. */
export interface KubeStatus {
  kind?: string;
  code?: number;
  reason?: string;
  message?: string;
  details?: unknown;
}

/** A Kubernetes API answer other than 2xx, with the Status object's reason when it had one. */
export class KubeApiError extends Error {
  constructor(
    readonly status: number,
    readonly reason: string,
    message: string,
    readonly method: string,
    readonly path: string,
    readonly details?: unknown,
  ) {
    super(`${method} ${path}: ${status} ${reason}: ${message}`);
    this.name = 'KubeApiError';
  }
}

export const isNotFound = (e: unknown): boolean => e instanceof KubeApiError && e.status === 404;
export const isConflict = (e: unknown): boolean => e instanceof KubeApiError && e.status === 409;
export const isAlreadyExists = (e: unknown): boolean =>
  e instanceof KubeApiError && e.status === 409 && e.reason === 'AlreadyExists';
export const isGone = (e: unknown): boolean => e instanceof KubeApiError && e.status === 410;
export const isForbidden = (e: unknown): boolean => e instanceof KubeApiError && e.status === 403;
/** The API server did not answer (refused, reset, timed out) or answered that it cannot serve now (5xx). */
export const isUnanswered = (e: unknown): boolean => !(e instanceof KubeApiError) || e.status >= 500;
