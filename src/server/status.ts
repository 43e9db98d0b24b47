/**
 * Kubernetes Status bodies for the serving side's refusals, byte-compatible with what
 * upstream's handler chain answers, so clients that parse API errors parse ours.
 */
function status(code: number, reason: string, message: string, details?: object, headers: Record<string, string> = {}): Response {
  const body = { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, details, code };
  return new Response(JSON.stringify(body) + '\n', {
    status: code,
    headers: { 'content-type': 'application/json', 'x-content-type-options': 'nosniff', ...headers },
  });
}

export const unauthorized = (): Response => status(401, 'Unauthorized', 'Unauthorized');

export function forbidden(username: string, verb: string, path: string, reason?: string): Response {
  const message = `forbidden: User ${JSON.stringify(username)} cannot ${verb} path ${JSON.stringify(path)}`;
  return status(403, 'Forbidden', reason ? `${message}: ${reason}` : message, {});
}

/** The cause goes to the log, not to the caller. */
export const internalError = (what: string): Response =>
  status(500, 'InternalError', `Internal error occurred: ${what}`, { causes: [{ message: what }] });

/** As upstream's max-in-flight filter and errors.NewTooManyRequests: come back in retryAfterSeconds. */
export const tooManyRequests = (retryAfterSeconds: number): Response =>
  status(429, 'TooManyRequests', 'Too many requests, please try again later.', { retryAfterSeconds }, { 'retry-after': String(retryAfterSeconds) });
