import type { V1Node } from '@kubernetes/client-node';
import type { ProxmoxApi } from './api.ts';
import { PROXMOX_PROVIDER_ID_PREFIX, type ProxmoxMatchCriterion, type ProxmoxCluster } from './config-model.ts';
import type { SnapshotCache, Vm, VmSnapshot } from './snapshot.ts';
import type { VmDetails } from './vm-details.ts';

/**
 * How a node finds its VM. Criteria are tried in the configured order (default providerID,
 * name, systemUUID):
 * - providerID `proxmox://REGION/VMID` names the cluster and the VM: decisive (present or not);
 * - systemUUID: the kubelet's status.nodeInfo.systemUUID against each VM's smbios1 uuid;
 * - name: the node name against VM names (case-insensitive).
 * A node is "absent" only when every cluster it could be in answered and no criterion found it;
 * an unreachable cluster, a duplicate name or UUID, or a node with nothing to match by is
 * "unknown". A node with another provider's providerID is never ours (unknown).
 */

/** One configured cluster and what reads it. */
export interface ProxmoxClusterView {
  cluster: ProxmoxCluster;
  api: ProxmoxApi;
  snapshots: SnapshotCache;
  details: VmDetails;
}

export type VmMatch =
  | { kind: 'found'; view: ProxmoxClusterView; vm: Vm }
  | { kind: 'absent' }
  | { kind: 'unknown'; reason: string };

export function providerIDOf(region: string, vmid: number): string {
  return `${PROXMOX_PROVIDER_ID_PREFIX}${region}/${vmid}`;
}

export function parseProviderID(providerID: string): { region: string; vmid: number } | undefined {
  if (!providerID.startsWith(PROXMOX_PROVIDER_ID_PREFIX)) return undefined;
  const m = /^([^/]+)\/(\d+)$/.exec(providerID.slice(PROXMOX_PROVIDER_ID_PREFIX.length));
  return m ? { region: m[1]!, vmid: Number(m[2]) } : undefined;
}

type SnapshotResult = { ok: true; snapshot: VmSnapshot } | { ok: false; error: string };

/** Snapshots read once per matching pass (the cache shares them across passes too). */
export class SnapshotPass {
  private readonly results = new Map<ProxmoxClusterView, Promise<SnapshotResult>>();
  constructor(private readonly signal?: AbortSignal) {}

  get(view: ProxmoxClusterView): Promise<SnapshotResult> {
    let r = this.results.get(view);
    if (!r) {
      r = view.snapshots.get(this.signal).then(
        (snapshot): SnapshotResult => ({ ok: true, snapshot }),
        (e: unknown): SnapshotResult => ({ ok: false, error: `cluster ${view.cluster.region}: ${(e as Error).message}` }),
      );
      this.results.set(view, r);
    }
    return r;
  }
}

export async function matchNode(node: V1Node, views: readonly ProxmoxClusterView[], matchBy: readonly ProxmoxMatchCriterion[], pass: SnapshotPass): Promise<VmMatch> {
  const providerID = node.spec?.providerID;
  if (providerID && !providerID.startsWith(PROXMOX_PROVIDER_ID_PREFIX)) return { kind: 'unknown', reason: `providerID ${providerID} belongs to another provider` };
  let searched = false;
  for (const criterion of matchBy) {
    if (criterion === 'providerID') {
      if (!providerID) continue;
      return matchByProviderID(providerID, views, pass);
    }
    const key = criterion === 'name' ? node.metadata?.name?.toLowerCase() : node.status?.nodeInfo?.systemUUID?.toLowerCase();
    if (!key) continue;
    searched = true;
    const found = await search(views, pass, criterion, key);
    if (found.kind !== 'absent') return found;
  }
  return searched ? { kind: 'absent' } : { kind: 'unknown', reason: 'the node has nothing to match a VM by (no providerID, systemUUID or name for the configured matchBy)' };
}

async function matchByProviderID(providerID: string, views: readonly ProxmoxClusterView[], pass: SnapshotPass): Promise<VmMatch> {
  const parsed = parseProviderID(providerID);
  if (!parsed) return { kind: 'unknown', reason: `malformed providerID ${providerID} (expected ${PROXMOX_PROVIDER_ID_PREFIX}REGION/VMID)` };
  const view = views.find((v) => v.cluster.region === parsed.region);
  if (!view) return { kind: 'unknown', reason: `no cluster with region ${parsed.region} is configured` };
  const result = await pass.get(view);
  if (!result.ok) return { kind: 'unknown', reason: result.error };
  const vm = result.snapshot.byId.get(parsed.vmid);
  return vm ? { kind: 'found', view, vm } : { kind: 'absent' };
}

/** Every cluster searched; one hit is a match, two are ambiguous, a cluster that did not answer leaves it unknown. */
async function search(views: readonly ProxmoxClusterView[], pass: SnapshotPass, criterion: 'name' | 'systemUUID', key: string): Promise<VmMatch> {
  const hits: { view: ProxmoxClusterView; vm: Vm }[] = [];
  const failures: string[] = [];
  await Promise.all(
    views.map(async (view) => {
      const result = await pass.get(view);
      if (!result.ok) return void failures.push(result.error);
      if (criterion === 'name') {
        for (const vm of result.snapshot.byName.get(key) ?? []) hits.push({ view, vm });
        return;
      }
      await Promise.all(
        result.snapshot.vms.map(async (vm) => {
          try {
            if ((await view.details.config(vm)).uuid === key) hits.push({ view, vm });
          } catch (e) {
            failures.push(`cluster ${view.cluster.region}: config of VM ${vm.vmid}: ${(e as Error).message}`);
          }
        }),
      );
    }),
  );
  if (hits.length > 1) {
    return { kind: 'unknown', reason: `${hits.length} VMs have ${criterion} ${key}: ${hits.map((h) => providerIDOf(h.view.cluster.region, h.vm.vmid)).join(', ')}` };
  }
  if (hits.length === 1) return { kind: 'found', ...hits[0]! };
  if (failures.length) return { kind: 'unknown', reason: failures.slice(0, 3).join('; ') };
  return { kind: 'absent' };
}
