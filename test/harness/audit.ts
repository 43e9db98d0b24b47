import { readFileSync, statSync } from 'node:fs';

/** The fields of a kube-apiserver audit event (level Metadata) the tests read. */
export interface AuditEntry {
  stage: string;
  verb: string;
  requestURI: string;
  userAgent?: string;
  user?: { username?: string };
  objectRef?: { resource?: string; subresource?: string; name?: string; namespace?: string };
  responseStatus?: { code?: number };
  /** When the API server received the request (RFC 3339, microseconds). */
  requestReceivedTimestamp: string;
  /** The request body: only for the writes the harness's policy logs at level Request (services/status). */
  requestObject?: unknown;
}

/** Every completed request in the audit log so far. */
export function readAuditLog(path: string): AuditEntry[] {
  return readFileSync(path, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as AuditEntry)
    .filter((e) => e.stage === 'ResponseComplete');
}

/**
 * The audit log once it has stopped growing for `quietMs`: kube-apiserver writes an event after
 * the response has gone out, so the last requests of a process that just exited may not be in
 * the file yet when the test reads it.
 */
export async function settledAuditLog(path: string, quietMs = 500, timeoutMs = 30_000): Promise<AuditEntry[]> {
  const deadline = performance.now() + timeoutMs;
  let size = statSync(path).size;
  for (;;) {
    await Bun.sleep(quietMs);
    const now = statSync(path).size;
    if (now === size || performance.now() > deadline) return readAuditLog(path);
    size = now;
  }
}
