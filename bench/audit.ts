/**
 * API requests per client identity, read from the API server's audit log (level Metadata, one
 * JSON line per stage). apiserver_request_total has no user label, so each side of the bench
 * runs as its own client-certificate user and is counted here by user, verb and resource.
 * Each request is counted once, at its RequestReceived stage.
 */

export interface RequestCount {
  /** verb -> count (get, list, watch, create, update, patch, delete). */
  byVerb: Record<string, number>;
  /** "verb resource[/subresource]" -> count. */
  byVerbResource: Record<string, number>;
  total: number;
}

export interface AuditEvent {
  stage?: string;
  verb?: string;
  user?: { username?: string };
  objectRef?: { resource?: string; subresource?: string };
  requestReceivedTimestamp?: string;
}

const WRITE_VERBS = new Set(['create', 'update', 'patch', 'delete', 'deletecollection']);

export function emptyCount(): RequestCount {
  return { byVerb: {}, byVerbResource: {}, total: 0 };
}

export function writes(count: RequestCount, resource?: string): number {
  let sum = 0;
  for (const [key, n] of Object.entries(count.byVerbResource)) {
    const [verb, res] = key.split(' ');
    if (verb && WRITE_VERBS.has(verb) && (!resource || res === resource || res?.startsWith(`${resource}/`))) sum += n;
  }
  return sum;
}

/** Counts the requests of `user`, optionally only those received in [from, to] (epoch ms). */
export async function countRequests(auditLogPath: string, user: string, window?: { from: number; to: number }): Promise<RequestCount> {
  const count = emptyCount();
  const needle = `"username":"${user}"`;
  const text = await Bun.file(auditLogPath).text();
  for (const line of text.split('\n')) {
    if (!line.includes(needle) || !line.includes('"stage":"RequestReceived"')) continue;
    const event = JSON.parse(line) as AuditEvent;
    if (event.user?.username !== user) continue;
    if (window) {
      const at = Date.parse(event.requestReceivedTimestamp ?? '');
      if (at < window.from || at > window.to) continue;
    }
    const verb = event.verb ?? '?';
    const resource = event.objectRef?.resource
      ? event.objectRef.resource + (event.objectRef.subresource ? `/${event.objectRef.subresource}` : '')
      : 'nonresource';
    count.byVerb[verb] = (count.byVerb[verb] ?? 0) + 1;
    const key = `${verb} ${resource}`;
    count.byVerbResource[key] = (count.byVerbResource[key] ?? 0) + 1;
    count.total++;
  }
  return count;
}

/** Reads an audit log as it grows: each read() returns the events of `user` appended since the last. */
export class AuditTail {
  private offset = 0;
  private partial = '';

  constructor(private readonly path: string, private readonly user: string) {}

  async read(): Promise<AuditEvent[]> {
    const file = Bun.file(this.path);
    const size = file.size;
    if (size <= this.offset) return [];
    const text = this.partial + (await file.slice(this.offset, size).text());
    this.offset = size;
    const lines = text.split('\n');
    this.partial = lines.pop() ?? '';
    const needle = `"username":"${this.user}"`;
    return lines
      .filter((l) => l.includes(needle) && l.includes('"stage":"RequestReceived"'))
      .map((l) => JSON.parse(l) as AuditEvent);
  }
}

export function isWrite(event: AuditEvent): boolean {
  return WRITE_VERBS.has(event.verb ?? '') && event.objectRef?.resource !== 'leases';
}
