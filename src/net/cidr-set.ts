import { formatPrefix, type Prefix } from './ip.ts';

/**
 * The node pod CIDRs of one cluster CIDR, as upstream's nodeipam cidrset: the cluster CIDR cut
 * into subnets of the node mask size, each free or held. Unlike upstream's bitmap, each held
 * subnet remembers its owner, so holding one subnet twice is seen (a conflict) instead of
 * silently counted once, and a release by anyone but the owner frees nothing. Allocation is
 * upstream's round robin: the search starts after the last subnet handed out, so a CIDR just
 * released is the last one given again (routers forget it first).
 */

/** Upstream's clusterSubnetMaxDiff: at most 2^16 node subnets per cluster CIDR. */
export const MAX_SUBNET_BITS = 16;

export type OccupyResult = { ok: true } | { ok: false; reason: 'outside' } | { ok: false; reason: 'conflict'; owner: string };

export class CIDRSet {
  readonly size: number;
  private readonly owners = new Map<number, string>();
  private readonly hostBits: bigint;
  private next = 0;

  constructor(
    readonly cluster: Prefix,
    readonly maskSize: number,
  ) {
    const width = cluster.family === 4 ? 32 : 128;
    if (maskSize < cluster.bits) throw new Error(`node mask size /${maskSize} is larger than the cluster CIDR ${formatPrefix(cluster)}`);
    if (maskSize > width) throw new Error(`node mask size /${maskSize} is longer than an IPv${cluster.family} address`);
    if (maskSize - cluster.bits > MAX_SUBNET_BITS) {
      throw new Error(`node mask size /${maskSize} cuts ${formatPrefix(cluster)} into more than 2^${MAX_SUBNET_BITS} subnets (at most /${cluster.bits + MAX_SUBNET_BITS})`);
    }
    this.size = 2 ** (maskSize - cluster.bits);
    this.hostBits = BigInt(width - maskSize);
  }

  /** How many subnets are held. */
  get used(): number {
    return this.owners.size;
  }

  /** The next free subnet, held for `owner`; undefined when every subnet is held. */
  allocateNext(owner: string): Prefix | undefined {
    if (this.owners.size >= this.size) return undefined;
    for (let i = 0; i < this.size; i++) {
      const index = (this.next + i) % this.size;
      if (this.owners.has(index)) continue;
      this.owners.set(index, owner);
      this.next = (index + 1) % this.size;
      return this.subnet(index);
    }
    return undefined;
  }

  /**
   * Holds every subnet `prefix` overlaps for `owner` (a prefix wider than a subnet holds several,
   * a narrower one the subnet around it, as upstream's Occupy). Nothing is held when the prefix
   * leaves the cluster CIDR or another owner holds one of its subnets.
   */
  occupy(prefix: Prefix, owner: string): OccupyResult {
    const range = this.indexes(prefix);
    if (!range) return { ok: false, reason: 'outside' };
    for (let i = range.from; i <= range.to; i++) {
      const held = this.owners.get(i);
      if (held !== undefined && held !== owner) return { ok: false, reason: 'conflict', owner: held };
    }
    for (let i = range.from; i <= range.to; i++) this.owners.set(i, owner);
    return { ok: true };
  }

  /** Frees the subnets of `prefix` that `owner` holds; others' are left alone. */
  release(prefix: Prefix, owner: string): void {
    const range = this.indexes(prefix);
    if (!range) return;
    for (let i = range.from; i <= range.to; i++) if (this.owners.get(i) === owner) this.owners.delete(i);
  }

  /** Who holds the subnets `prefix` overlaps (the first found); undefined: all free or outside. */
  ownerOf(prefix: Prefix): string | undefined {
    const range = this.indexes(prefix);
    if (!range) return undefined;
    for (let i = range.from; i <= range.to; i++) {
      const held = this.owners.get(i);
      if (held !== undefined) return held;
    }
    return undefined;
  }

  /** True when the prefix lies wholly inside the cluster CIDR. */
  contains(prefix: Prefix): boolean {
    return prefix.family === this.cluster.family && prefix.first >= this.cluster.first && prefix.last <= this.cluster.last;
  }

  /** The subnet indexes a prefix inside the cluster CIDR overlaps; undefined outside it. */
  private indexes(prefix: Prefix): { from: number; to: number } | undefined {
    if (!this.contains(prefix)) return undefined;
    return {
      from: Number((prefix.first - this.cluster.first) >> this.hostBits),
      to: Number((prefix.last - this.cluster.first) >> this.hostBits),
    };
  }

  private subnet(index: number): Prefix {
    const first = this.cluster.first + (BigInt(index) << this.hostBits);
    return { family: this.cluster.family, first, last: first + (1n << this.hostBits) - 1n, bits: this.maskSize };
  }
}
