import { LxdApiError, REQUEST, type LxdApi } from './api.ts';
import type { LxdConfig } from './config-model.ts';

/**
 * The instances as one `GET /1.0/instances?recursion=2` answers (state included, so addresses
 * and status come in the same request), parsed strictly: an answer of the wrong shape is an
 * error ("cannot tell"), never an empty list. Cached for cacheSeconds so a lifecycle pass over
 * many nodes costs one request.
 */

export interface InstanceAddress {
  family: 'inet' | 'inet6';
  address: string;
  scope: string;
}

export interface Instance {
  name: string;
  project: string;
  /** volatile.uuid: the instance's identity, which survives a rename ('' when the daemon has none). */
  uuid: string;
  /** 'container' or 'virtual-machine'. */
  type: string;
  /** LXD status codes: 103 Running, 102 Stopped, others transitional or Error (112). */
  statusCode: number;
  status: string;
  /** The cluster member it runs on; 'none' (or '') when the daemon is not clustered. */
  location: string;
  profiles: string[];
  config: Record<string, string>;
  /** The names inside the instance of its nic devices (device `name`, else the device's key). */
  nics: string[];
  /** Interface name -> its addresses; empty when stopped (state.network is null). */
  network: Map<string, InstanceAddress[]>;
}

export const STATUS_RUNNING = 103;
export const STATUS_STOPPED = 102;

export interface InstanceSnapshot {
  instances: Instance[];
  /** lower-case name -> instances of that name (one per project at most). */
  byName: Map<string, Instance[]>;
  /** PROJECT/NAME -> instance. */
  byKey: Map<string, Instance>;
}

export function instancesPath(config: Pick<LxdConfig, 'projects' | 'filter'>, project?: string): string {
  const q = new URLSearchParams({ recursion: '2' });
  if (project !== undefined) q.set('project', project);
  else if (config.projects === 'all') q.set('all-projects', 'true');
  if (config.filter) q.set('filter', config.filter);
  return `/1.0/instances?${q}`;
}

export function instanceKey(project: string, name: string): string {
  return `${project}/${name}`;
}

export class InstanceCache {
  private cached?: { at: number; snapshot: InstanceSnapshot };
  private inflight?: Promise<InstanceSnapshot>;

  constructor(
    private readonly api: LxdApi,
    private readonly config: Pick<LxdConfig, 'projects' | 'filter' | 'cacheMs'>,
    private readonly now: () => number = () => performance.now(),
  ) {}

  async get(signal?: AbortSignal): Promise<InstanceSnapshot> {
    if (this.cached && this.now() - this.cached.at < this.config.cacheMs) return this.cached.snapshot;
    this.inflight ??= this.read(signal).finally(() => (this.inflight = undefined));
    return this.inflight;
  }

  private async read(signal?: AbortSignal): Promise<InstanceSnapshot> {
    const { projects } = this.config;
    const lists = projects === 'all'
      ? [await this.api.get<unknown>(REQUEST.instances, instancesPath(this.config), signal)]
      : await Promise.all(projects.map((p) => this.api.get<unknown>(REQUEST.instances, instancesPath(this.config, p), signal).then((l) => withProject(l, p))));
    const instances = lists.flatMap((l) => parseInstanceList(l));
    const snapshot = snapshotOf(instances);
    this.cached = { at: this.now(), snapshot };
    return snapshot;
  }
}

/** A project's list: LXD 5.0 leaves `project` out of instances of the default project. */
function withProject(list: unknown, project: string): unknown {
  return Array.isArray(list) ? list.map((i) => (i && typeof i === 'object' && !(i as { project?: unknown }).project ? { ...i, project } : i)) : list;
}

export function snapshotOf(instances: Instance[]): InstanceSnapshot {
  const byName = new Map<string, Instance[]>();
  const byKey = new Map<string, Instance>();
  for (const i of instances) {
    const key = i.name.toLowerCase();
    byName.set(key, [...(byName.get(key) ?? []), i]);
    byKey.set(instanceKey(i.project, i.name), i);
  }
  return { instances, byName, byKey };
}

export function parseInstanceList(data: unknown): Instance[] {
  if (!Array.isArray(data)) throw new LxdApiError('the instance list is not a list (an older API without recursion=2?)');
  return data.map((d, i) => parseInstance(d, `instance ${i}`));
}

/** One instance of a recursion=2 answer (or of GET /1.0/instances/NAME?recursion=1 plus state). */
export function parseInstance(d: unknown, where: string): Instance {
  const o = record(d, where);
  const name = str(o.name, `${where}.name`);
  const config = stringMap(o.config ?? {}, `${where} (${name}).config`);
  const devices = record(o.expanded_devices ?? o.devices ?? {}, `${where} (${name}).expanded_devices`);
  const nics = Object.entries(devices)
    .filter(([, dev]) => (dev as { type?: unknown })?.type === 'nic')
    .map(([key, dev]) => (typeof (dev as { name?: unknown }).name === 'string' ? (dev as { name: string }).name : key));
  const state = o.state === undefined || o.state === null ? null : record(o.state, `${where} (${name}).state`);
  const network = new Map<string, InstanceAddress[]>();
  if (state?.network) {
    for (const [iface, n] of Object.entries(record(state.network, `${where} (${name}).state.network`))) {
      const addresses = (n as { addresses?: unknown }).addresses ?? [];
      if (!Array.isArray(addresses)) throw new LxdApiError(`${where} (${name}): state.network.${iface}.addresses is not a list`);
      network.set(iface, addresses.flatMap((a) => {
        const { family, address, scope } = (a ?? {}) as Record<string, unknown>;
        return (family === 'inet' || family === 'inet6') && typeof address === 'string' ? [{ family, address, scope: typeof scope === 'string' ? scope : '' }] : [];
      }));
    }
  }
  const statusCode = o.status_code;
  if (typeof statusCode !== 'number') throw new LxdApiError(`${where} (${name}): status_code is not a number`);
  return {
    name,
    project: typeof o.project === 'string' && o.project ? o.project : 'default',
    uuid: config['volatile.uuid'] ?? '',
    type: typeof o.type === 'string' ? o.type : 'container',
    statusCode,
    status: typeof o.status === 'string' ? o.status : '',
    location: typeof o.location === 'string' ? o.location : '',
    profiles: Array.isArray(o.profiles) ? o.profiles.filter((p): p is string => typeof p === 'string') : [],
    config,
    nics,
    network,
  };
}

function record(v: unknown, where: string): Record<string, unknown> {
  if (!v || typeof v !== 'object' || Array.isArray(v)) throw new LxdApiError(`${where} is not an object`);
  return v as Record<string, unknown>;
}

function str(v: unknown, where: string): string {
  if (typeof v !== 'string' || !v) throw new LxdApiError(`${where} is not a name`);
  return v;
}

function stringMap(v: unknown, where: string): Record<string, string> {
  const o = record(v, where);
  return Object.fromEntries(Object.entries(o).filter((e): e is [string, string] => typeof e[1] === 'string'));
}
