import type { V1Node } from '@kubernetes/client-node';
import { REQUEST, LxdApiError, type LxdApi } from './api.ts';
import { LXD_PROVIDER_ID_PREFIX, type LxdConfig } from './config-model.ts';
import { instanceKey, parseInstance, type Instance, type InstanceCache } from './instance-list.ts';

/**
 * How a node finds its instance:
 * - providerID `lxd://PROJECT/NAME`: that instance in the (cached) list; when the list does not
 *   have it, the instance itself is asked for (GET /1.0/instances/NAME?project=PROJECT), and
 *   only its 404 is "absent" (an instance that merely left the filter or the project list, or a
 *   list that could not be trusted, deletes nothing);
 * - no providerID (a node waiting to be initialised): its name against instance names, in the
 *   configured projects, case-insensitive; two instances of that name (two projects) are
 *   ambiguous: unknown.
 * A node with another platform's providerID is never ours (unknown).
 */

export type InstanceMatch = { kind: 'found'; instance: Instance } | { kind: 'absent' } | { kind: 'unknown'; reason: string };

export function providerIDOf(project: string, name: string): string {
  return `${LXD_PROVIDER_ID_PREFIX}${project}/${name}`;
}

export function parseProviderID(providerID: string): { project: string; name: string } | undefined {
  if (!providerID.startsWith(LXD_PROVIDER_ID_PREFIX)) return undefined;
  const m = /^([^/]+)\/([^/]+)$/.exec(providerID.slice(LXD_PROVIDER_ID_PREFIX.length));
  return m ? { project: m[1]!, name: m[2]! } : undefined;
}

type ListResult = { ok: true; byKey: Map<string, Instance>; byName: Map<string, Instance[]> } | { ok: false; error: string };

/** The list read once per matching pass (the cache shares it across passes too). */
export class ListPass {
  private result?: Promise<ListResult>;
  constructor(private readonly cache: InstanceCache, private readonly signal?: AbortSignal) {}

  get(): Promise<ListResult> {
    this.result ??= this.cache.get(this.signal).then(
      (s): ListResult => ({ ok: true, byKey: s.byKey, byName: s.byName }),
      (e: unknown): ListResult => ({ ok: false, error: (e as Error).message }),
    );
    return this.result;
  }
}

export async function matchNode(node: V1Node, api: LxdApi, config: Pick<LxdConfig, 'projects'>, pass: ListPass, signal?: AbortSignal): Promise<InstanceMatch> {
  const providerID = node.spec?.providerID;
  if (providerID) {
    const parsed = parseProviderID(providerID);
    if (!parsed) {
      return providerID.startsWith(LXD_PROVIDER_ID_PREFIX)
        ? { kind: 'unknown', reason: `malformed providerID ${providerID} (expected ${LXD_PROVIDER_ID_PREFIX}PROJECT/NAME)` }
        : { kind: 'unknown', reason: `providerID ${providerID} belongs to another provider` };
    }
    const list = await pass.get();
    const listed = list.ok ? list.byKey.get(instanceKey(parsed.project, parsed.name)) : undefined;
    if (listed) return { kind: 'found', instance: listed };
    return askInstance(api, parsed.project, parsed.name, signal);
  }
  const name = node.metadata?.name?.toLowerCase();
  if (!name) return { kind: 'unknown', reason: 'the node has no name to match an instance by' };
  const list = await pass.get();
  if (!list.ok) return { kind: 'unknown', reason: list.error };
  const hits = list.byName.get(name) ?? [];
  if (hits.length > 1) return { kind: 'unknown', reason: `${hits.length} instances are named ${name}: ${hits.map((h) => providerIDOf(h.project, h.name)).join(', ')}` };
  return hits.length ? { kind: 'found', instance: hits[0]! } : { kind: 'absent' };
}

/** The one answer that says an instance is gone: its own 404. */
async function askInstance(api: LxdApi, project: string, name: string, signal?: AbortSignal): Promise<InstanceMatch> {
  const q = new URLSearchParams({ project, recursion: '1' });
  try {
    const data = await api.get<Record<string, unknown>>(REQUEST.instance, `/1.0/instances/${encodeURIComponent(name)}?${q}`, signal);
    return { kind: 'found', instance: parseInstance({ project, ...data }, `instance ${project}/${name}`) };
  } catch (e) {
    if (e instanceof LxdApiError && e.status === 404) return { kind: 'absent' };
    return { kind: 'unknown', reason: (e as Error).message };
  }
}
