import { closeSync, existsSync, openSync, readSync, statSync } from 'node:fs';

/** The fields of a kube-apiserver audit event the soak's checkers read. */
export interface AuditEvent {
  stage: string;
  verb: string;
  requestURI: string;
  user?: { username?: string };
  objectRef?: { resource?: string; subresource?: string; name?: string; namespace?: string };
  responseStatus?: { code?: number };
  requestReceivedTimestamp: string;
  stageTimestamp: string;
  /** Only for the requests the soak's policy logs at level Request (its Leases). */
  requestObject?: { spec?: { holderIdentity?: string; leaseDurationSeconds?: number } };
}

/**
 * Reads the audit log as it grows (by byte offset, whole lines only), so a half-hour run never
 * reads the file twice. kube-apiserver appends, also across its restarts.
 */
export class AuditTail {
  private offset = 0;
  private partial = '';
  lines = 0;
  malformed = 0;

  constructor(private readonly path: string) {}

  /** The completed requests (stage ResponseComplete) logged since the last call. */
  read(): AuditEvent[] {
    if (!existsSync(this.path)) return [];
    const size = statSync(this.path).size;
    if (size <= this.offset) return [];
    const fd = openSync(this.path, 'r');
    const chunks: string[] = [];
    try {
      const buf = Buffer.alloc(1 << 20);
      while (this.offset < size) {
        const n = readSync(fd, buf, 0, Math.min(buf.length, size - this.offset), this.offset);
        if (n <= 0) break;
        this.offset += n;
        chunks.push(buf.toString('utf8', 0, n));
      }
    } finally {
      closeSync(fd);
    }
    const text = this.partial + chunks.join('');
    const lines = text.split('\n');
    this.partial = lines.pop() ?? '';
    const out: AuditEvent[] = [];
    for (const line of lines) {
      if (!line) continue;
      this.lines++;
      try {
        const e = JSON.parse(line) as AuditEvent;
        if (e.stage === 'ResponseComplete') out.push(e);
      } catch {
        // A line cut by a SIGKILLed kube-apiserver: counted, not fatal.
        this.malformed++;
      }
    }
    return out;
  }
}

/** Milliseconds since the epoch of an audit timestamp (RFC 3339 with microseconds). */
export function auditTime(ts: string): number {
  const m = /^(.*T\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$/.exec(ts);
  if (!m) return Date.parse(ts);
  const fraction = (m[2] ?? '0').padEnd(6, '0').slice(0, 6);
  return Date.parse(`${m[1]}${m[3]}`) + Number(fraction) / 1000;
}

export const isWriteVerb = (verb: string) => verb === 'create' || verb === 'update' || verb === 'patch' || verb === 'delete' || verb === 'deletecollection';
