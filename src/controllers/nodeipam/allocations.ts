import { CIDRSet, type OccupyResult } from '../../net/cidr-set.ts';
import { formatPrefix, type Prefix } from '../../net/ip.ts';
import type { NodeIPAMOptions } from './options.ts';

/**
 * Who holds which pod CIDR: one CIDRSet per cluster CIDR, and each owner's CIDRs. An owner is a
 * machine (the CloudAllocator: its providerID, so its CIDRs outlive its Node objects) or a node
 * (the RangeAllocator, and a node whose machine is not known yet: `node/NAME`). The part of
 * --service-cluster-ip-range inside a cluster CIDR is held by SERVICE_RANGE_OWNER.
 */

export const SERVICE_RANGE_OWNER = 'service-cluster-ip-range';

/** The owner of a node's CIDRs when no machine is known for it (and always for the RangeAllocator). */
export function nodeOwner(nodeName: string): string {
  return `node/${nodeName}`;
}

export class Allocations {
  private readonly sets: CIDRSet[];
  private readonly byOwner = new Map<string, Map<string, Prefix>>();

  constructor(readonly options: Pick<NodeIPAMOptions, 'clusterCIDRs' | 'maskSizes' | 'serviceCIDRs'>) {
    this.sets = options.clusterCIDRs.map((cluster, i) => new CIDRSet(cluster, options.maskSizes[i]!));
    for (const set of this.sets) {
      for (const service of options.serviceCIDRs) {
        // CIDRs nest or are apart: the overlap is the service range, or the whole cluster CIDR.
        if (set.contains(service)) set.occupy(service, SERVICE_RANGE_OWNER);
        else if (service.family === set.cluster.family && service.first <= set.cluster.first && service.last >= set.cluster.last) set.occupy(set.cluster, SERVICE_RANGE_OWNER);
      }
    }
  }

  /** The CIDR set of the cluster CIDR containing the prefix; undefined: outside every one. */
  setFor(prefix: Prefix): CIDRSet | undefined {
    return this.sets.find((s) => s.contains(prefix));
  }

  /** The sets, in --cluster-cidr order. */
  clusterSets(): readonly CIDRSet[] {
    return this.sets;
  }

  /** The owner's CIDRs, in the order they were taken. */
  held(owner: string): Prefix[] {
    return [...(this.byOwner.get(owner)?.values() ?? [])];
  }

  owners(): string[] {
    return [...this.byOwner.keys()];
  }

  ownerOf(prefix: Prefix): string | undefined {
    return this.setFor(prefix)?.ownerOf(prefix);
  }

  /** Holds the prefix for the owner (see CIDRSet.occupy). */
  occupy(prefix: Prefix, owner: string): OccupyResult {
    const set = this.setFor(prefix);
    if (!set) return { ok: false, reason: 'outside' };
    const result = set.occupy(prefix, owner);
    if (result.ok) this.remember(owner, prefix);
    return result;
  }

  /** The next free CIDR of the i-th cluster CIDR for the owner; undefined: exhausted. */
  allocate(index: number, owner: string): Prefix | undefined {
    const prefix = this.sets[index]?.allocateNext(owner);
    if (prefix) this.remember(owner, prefix);
    return prefix;
  }

  release(prefix: Prefix, owner: string): void {
    this.setFor(prefix)?.release(prefix, owner);
    const mine = this.byOwner.get(owner);
    mine?.delete(formatPrefix(prefix));
    if (mine?.size === 0) this.byOwner.delete(owner);
  }

  releaseAll(owner: string): void {
    for (const prefix of this.held(owner)) this.release(prefix, owner);
  }

  /** Moves everything `from` holds to `to` (a node's CIDRs once its machine is known). */
  transfer(from: string, to: string): void {
    for (const prefix of this.held(from)) {
      this.release(prefix, from);
      this.occupy(prefix, to);
    }
  }

  private remember(owner: string, prefix: Prefix): void {
    let mine = this.byOwner.get(owner);
    if (!mine) this.byOwner.set(owner, (mine = new Map()));
    mine.set(formatPrefix(prefix), prefix);
  }
}
