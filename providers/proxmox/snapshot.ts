import { REQUEST, type ProxmoxApi } from './api.ts';

/**
 * One cluster's VMs as GET /cluster/resources?type=vm lists them, read at most once per
 * `cacheMs` whatever the number of nodes asking (single-flight: callers arriving while a read
 * is under way share it). A failed read is never cached as "no VMs": it rejects, and callers
 * answer "unknown".
 */

export interface Vm {
  vmid: number;
  name: string;
  /** The Proxmox host running (or holding) the VM. */
  host: string;
  /** running, stopped, or unknown (its host is offline). */
  status: string;
  cores: number;
  memoryBytes: number;
  tags: string[];
  /** The resource pool the VM is in, if any (node rules may select on it). */
  pool?: string;
  /** With zoneFrom haGroup: the VM's HA group, if it has one. */
  haGroup?: string;
}

export interface VmSnapshot {
  vms: readonly Vm[];
  byId: ReadonlyMap<number, Vm>;
  /** Lower-case VM name -> VMs of that name (names are not unique in Proxmox). */
  byName: ReadonlyMap<string, readonly Vm[]>;
}

/** Raw rows of /cluster/resources (type vm lists QEMU VMs and LXC containers). */
interface ResourceRow {
  id?: string;
  type?: string;
  vmid?: number | string;
  name?: string;
  node?: string;
  status?: string;
  maxcpu?: number;
  maxmem?: number;
  tags?: string;
  pool?: string;
  template?: number | boolean;
}

export function parseResources(rows: unknown, haGroups?: ReadonlyMap<number, string>): VmSnapshot {
  if (!Array.isArray(rows)) throw new Error('cluster/resources: the answer is not a list');
  const vms: Vm[] = [];
  for (const r of rows as ResourceRow[]) {
    // QEMU VMs only (containers run no kubelet of their own here); templates never run.
    if (r?.type !== 'qemu' || r.template === 1 || r.template === true) continue;
    const vmid = Number(r.vmid);
    if (!Number.isInteger(vmid) || typeof r.node !== 'string') throw new Error(`cluster/resources: malformed row ${JSON.stringify(r)}`);
    vms.push({
      vmid,
      name: r.name ?? '',
      host: r.node,
      status: r.status ?? 'unknown',
      cores: Number(r.maxcpu ?? 0),
      memoryBytes: Number(r.maxmem ?? 0),
      tags: (r.tags ?? '').split(/[;, ]/).filter((t) => t !== ''),
      ...(typeof r.pool === 'string' && r.pool !== '' ? { pool: r.pool } : {}),
      haGroup: haGroups?.get(vmid),
    });
  }
  return snapshotOf(vms);
}

export function snapshotOf(vms: Vm[]): VmSnapshot {
  const byId = new Map(vms.map((vm) => [vm.vmid, vm]));
  const byName = new Map<string, Vm[]>();
  for (const vm of vms) {
    const key = vm.name.toLowerCase();
    if (!byName.has(key)) byName.set(key, []);
    byName.get(key)!.push(vm);
  }
  return { vms, byId, byName };
}

/** GET /cluster/ha/resources: sid "vm:100" -> group (Proxmox VE 8 HA groups). */
export function parseHaGroups(rows: unknown): Map<number, string> {
  const out = new Map<number, string>();
  if (!Array.isArray(rows)) throw new Error('cluster/ha/resources: the answer is not a list');
  for (const r of rows as { sid?: string; group?: string }[]) {
    const m = /^vm:(\d+)$/.exec(r?.sid ?? '');
    if (m && r.group) out.set(Number(m[1]), r.group);
  }
  return out;
}

/** Told when a VM's placement (host or HA group) differs between two successive snapshots. */
export type PlacementListener = (moved: { vmid: number; from: string; to: string }[]) => void;

export class SnapshotCache {
  private last?: { snapshot: VmSnapshot; at: number };
  private pending?: Promise<VmSnapshot>;
  private readonly listeners = new Set<PlacementListener>();
  private readonly snapshotListeners = new Set<(snapshot: VmSnapshot) => void>();

  constructor(
    private readonly api: ProxmoxApi,
    private readonly opts: { cacheMs: number; haGroups: boolean; now?: () => number },
  ) {}

  /** The VMs, from the cache when fresh; rejects when the API gave no good answer. */
  get(signal?: AbortSignal): Promise<VmSnapshot> {
    const now = this.now();
    if (this.last && now - this.last.at < this.opts.cacheMs) return Promise.resolve(this.last.snapshot);
    this.pending ??= this.read().finally(() => (this.pending = undefined));
    return signal ? raceAbort(this.pending, signal) : this.pending;
  }

  /** Called with every VM list read from the API (e.g. to forget what is cached of VMs that are gone). */
  onSnapshot(listener: (snapshot: VmSnapshot) => void): () => void {
    this.snapshotListeners.add(listener);
    return () => this.snapshotListeners.delete(listener);
  }

  onPlacementChange(listener: PlacementListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private async read(): Promise<VmSnapshot> {
    // Not tied to a caller's signal: others may be waiting for the same read.
    const [rows, ha] = await Promise.all([
      this.api.get<unknown>(REQUEST.clusterResources, '/cluster/resources?type=vm'),
      this.opts.haGroups ? this.api.get<unknown>(REQUEST.haResources, '/cluster/ha/resources').then(parseHaGroups) : undefined,
    ]);
    const snapshot = parseResources(rows, ha);
    const previous = this.last?.snapshot;
    this.last = { snapshot, at: this.now() };
    if (previous) this.notifyMoves(previous, snapshot);
    for (const listener of this.snapshotListeners) listener(snapshot);
    return snapshot;
  }

  private notifyMoves(before: VmSnapshot, after: VmSnapshot): void {
    const moved: { vmid: number; from: string; to: string }[] = [];
    for (const vm of after.vms) {
      const old = before.byId.get(vm.vmid);
      if (old && placement(old) !== placement(vm)) moved.push({ vmid: vm.vmid, from: placement(old), to: placement(vm) });
    }
    if (!moved.length) return;
    for (const listener of this.listeners) listener(moved);
  }

  private now(): number {
    return (this.opts.now ?? (() => performance.now()))();
  }
}

function placement(vm: Vm): string {
  return vm.haGroup === undefined ? vm.host : `${vm.host}/${vm.haGroup}`;
}

/** Resolves or rejects with `promise`, or rejects when `signal` aborts first (the promise goes on for others). */
function raceAbort<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (e: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(e);
      },
    );
  });
}
