import { createHash } from 'node:crypto';
import type { V1ConfigMap } from '@kubernetes/client-node';
import { isAlreadyExists, isNotFound } from '../../kube/errors.ts';
import { CONFIGMAPS, ResourceClient } from '../../kube/resources.ts';
import type { KubeTransport } from '../../kube/transport.ts';

/**
 * The CloudAllocator's memory of each machine's pod CIDRs, where a new leader finds it: one
 * ConfigMap in the leader-election namespace, a key per machine (its providerID, escaped to a
 * ConfigMap key), the CIDRs comma-separated as the value. Not a Node annotation: it must outlive
 * the Node (deleted and registered again, it gets the same CIDRs). Not a Lease or a custom
 * resource: a ConfigMap needs no CRD, is readable with kubectl, and one object is one read at
 * start. Its 1 MiB cap holds some 10,000 machines.
 *
 * Writes are grouped: entries asked for while one write is in flight go out together in the
 * next, so 5000 nodes registering at once cost a handful of writes, not 5000 growing PUTs.
 */

const CONFIGMAP_KEY = /^[-._a-zA-Z0-9]+$/;
const MAX_KEY_LENGTH = 253;
/** Keys of machines whose escaped id is too long: the id then travels in the value. */
const HASHED_KEY_PREFIX = 'sha256.';

/** The ConfigMap key of a machine: its id with every other character than [-.a-zA-Z0-9] escaped as _XX. */
export function recordKey(owner: string): string {
  const escaped = [...new TextEncoder().encode(owner)].map((b) => {
    const c = String.fromCharCode(b);
    return /[-.a-zA-Z0-9]/.test(c) ? c : `_${b.toString(16).toUpperCase().padStart(2, '0')}`;
  }).join('');
  return escaped.length <= MAX_KEY_LENGTH ? escaped : HASHED_KEY_PREFIX + createHash('sha256').update(owner).digest('hex');
}

/** The machine id of a key recordKey made (undefined for a hashed key: the value names it). */
export function ownerOfKey(key: string): string | undefined {
  if (key.startsWith(HASHED_KEY_PREFIX) || !CONFIGMAP_KEY.test(key)) return undefined;
  const bytes: number[] = [];
  for (let i = 0; i < key.length; i++) {
    if (key[i] === '_') {
      const hex = key.slice(i + 1, i + 3);
      if (!/^[0-9A-F]{2}$/.test(hex)) return undefined;
      bytes.push(parseInt(hex, 16));
      i += 2;
    } else bytes.push(key.charCodeAt(i));
  }
  return new TextDecoder().decode(Uint8Array.from(bytes));
}

function recordValue(owner: string, key: string, cidrs: readonly string[]): string {
  return key.startsWith(HASHED_KEY_PREFIX) ? `${cidrs.join(',')} ${owner}` : cidrs.join(',');
}

/** Reads one entry: the machine and its CIDRs; undefined for an entry not written by recordKey. */
export function readEntry(key: string, value: string): { owner: string; cidrs: string[] } | undefined {
  const [list = '', named] = value.trim().split(/\s+/, 2);
  const owner = named ?? ownerOfKey(key);
  if (owner === undefined) return undefined;
  return { owner, cidrs: list === '' ? [] : list.split(',') };
}

export class StickyRecord {
  private readonly client: ResourceClient<V1ConfigMap>;
  /** The ConfigMap as last read or written; undefined: it does not exist yet. */
  private current?: V1ConfigMap;
  private pending = new Map<string, readonly string[]>();
  private waiters: { resolve: () => void; reject: (e: unknown) => void }[] = [];
  private flushing = false;

  constructor(
    transport: KubeTransport,
    readonly namespace: string,
    readonly name: string,
  ) {
    this.client = new ResourceClient<V1ConfigMap>(transport, CONFIGMAPS);
  }

  /** Reads the record (none yet: empty); entries it cannot read are returned to be reported. */
  async load(signal?: AbortSignal): Promise<{ entries: Map<string, string[]>; unreadable: string[] }> {
    try {
      this.current = await this.client.get(this.name, { namespace: this.namespace, signal });
    } catch (e) {
      if (!isNotFound(e)) throw e;
      this.current = undefined;
    }
    const entries = new Map<string, string[]>();
    const unreadable: string[] = [];
    for (const [key, value] of Object.entries(this.current?.data ?? {})) {
      const entry = readEntry(key, value);
      if (entry) entries.set(entry.owner, entry.cidrs);
      else unreadable.push(key);
    }
    return { entries, unreadable };
  }

  /** True when the record, as written, says these CIDRs for the machine. */
  says(owner: string, cidrs: readonly string[]): boolean {
    const key = recordKey(owner);
    const value = this.current?.data?.[key];
    return value !== undefined && value === recordValue(owner, key, cidrs);
  }

  /** Records the machine's CIDRs (none: forgets it); resolves once written. */
  write(owner: string, cidrs: readonly string[], signal?: AbortSignal): Promise<void> {
    this.pending.set(owner, cidrs);
    const written = new Promise<void>((resolve, reject) => this.waiters.push({ resolve, reject }));
    if (!this.flushing) void this.flush(signal);
    return written;
  }

  private async flush(signal?: AbortSignal): Promise<void> {
    this.flushing = true;
    try {
      await Promise.resolve(); // entries asked for in the same turn go in the first write too
      while (this.pending.size > 0) {
        const batch = this.pending;
        const waiters = this.waiters;
        this.pending = new Map();
        this.waiters = [];
        try {
          await this.commit(batch, signal);
          for (const w of waiters) w.resolve();
        } catch (e) {
          for (const w of waiters) w.reject(e);
        }
      }
    } finally {
      this.flushing = false;
    }
  }

  /**
   * One write of the batch: a merge patch of its keys only (the request carries the batch, not the
   * whole record; no resourceVersion, so nothing of anyone else's is replaced). The first write
   * creates the ConfigMap; one that finds it made meanwhile patches it.
   */
  private async commit(batch: ReadonlyMap<string, readonly string[]>, signal?: AbortSignal): Promise<void> {
    const data: Record<string, string | null> = {};
    for (const [owner, cidrs] of batch) {
      const key = recordKey(owner);
      data[key] = cidrs.length === 0 ? null : recordValue(owner, key, cidrs);
    }
    const opts = { namespace: this.namespace, signal };
    if (!this.current) {
      try {
        const created = Object.fromEntries(Object.entries(data).filter((e): e is [string, string] => e[1] !== null));
        this.current = await this.client.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: this.name, namespace: this.namespace }, data: created }, opts);
        return;
      } catch (e) {
        if (!isAlreadyExists(e)) throw e;
      }
    }
    this.current = await this.client.patch(this.name, 'merge', { data }, opts);
  }
}
