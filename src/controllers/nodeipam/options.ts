import { CIDRSet } from '../../net/cidr-set.ts';
import { formatPrefix, type Prefix } from '../../net/ip.ts';

/**
 * The node IPAM controller's settings from the flags, with upstream's rules (kube-controller-
 * manager's setNodeCIDRMaskSizes and the nodeipam controller's start checks): which mask size
 * each cluster CIDR is cut at, and that the cut fits the CIDR set. Read by src/app/settings.ts,
 * so a bad combination stops the process at start with every problem named.
 */

export const CIDR_ALLOCATOR_TYPES = ['RangeAllocator', 'CloudAllocator'] as const;
export type CIDRAllocatorType = (typeof CIDR_ALLOCATOR_TYPES)[number];

/** Upstream's defaults when no mask size flag is given. */
export const DEFAULT_NODE_MASK_SIZE = { 4: 24, 6: 64 } as const;

/** The ConfigMap the CloudAllocator keeps each machine's pod CIDRs in (see sticky-record.ts): named after the Lease, one per instance. */
export function recordName(leaseName: string): string {
  return `${leaseName}-node-ipam`;
}

export interface NodeIPAMOptions {
  allocatorType: CIDRAllocatorType;
  /** --cluster-cidr, in the flag's order (a node's podCIDRs follow it). */
  clusterCIDRs: Prefix[];
  /** The node mask size of each cluster CIDR, same order. */
  maskSizes: number[];
  /** --service-cluster-ip-range: its part inside a cluster CIDR is never given to a node. */
  serviceCIDRs: Prefix[];
  /** Where the CloudAllocator's record lives: the leader-election namespace. */
  recordNamespace: string;
  recordName: string;
}

export interface NodeIPAMFlags {
  allocatorType: string;
  clusterCIDRs: Prefix[];
  serviceCIDRs: Prefix[];
  maskSize: number;
  maskSizeIPv4: number;
  maskSizeIPv6: number;
  /** The leader-election Lease's namespace and name: the record lives beside it. */
  namespace: string;
  leaseName: string;
}

/** The settings, or a thrown Error listing every problem (one a line). */
export function resolveNodeIPAMOptions(flags: NodeIPAMFlags): NodeIPAMOptions {
  if (flags.clusterCIDRs.length === 0) throw new Error('--cluster-cidr: required by --allocate-node-cidrs (the pod CIDRs nodes are given from)');
  if (!(CIDR_ALLOCATOR_TYPES as readonly string[]).includes(flags.allocatorType)) {
    throw new Error(`--cidr-allocator-type: unknown type ${JSON.stringify(flags.allocatorType)} (known: ${CIDR_ALLOCATOR_TYPES.join(', ')})`);
  }
  const maskSizes = nodeMaskSizes(flags);
  const problems: string[] = [];
  flags.clusterCIDRs.forEach((cluster, i) => {
    try {
      new CIDRSet(cluster, maskSizes[i]!);
    } catch (e) {
      problems.push(`--cluster-cidr ${formatPrefix(cluster)}: ${(e as Error).message}`);
    }
  });
  if (problems.length > 0) throw new Error(problems.join('\n'));
  return {
    allocatorType: flags.allocatorType as CIDRAllocatorType,
    clusterCIDRs: flags.clusterCIDRs,
    maskSizes,
    serviceCIDRs: flags.serviceCIDRs,
    recordNamespace: flags.namespace,
    recordName: recordName(flags.leaseName),
  };
}

/** Upstream's setNodeCIDRMaskSizes: the flags that may be combined, per stack. */
function nodeMaskSizes(flags: NodeIPAMFlags): number[] {
  const { clusterCIDRs, maskSize, maskSizeIPv4, maskSizeIPv6 } = flags;
  const sized = (v4: number, v6: number) => clusterCIDRs.map((c) => (c.family === 4 ? v4 : v6));
  const v4 = maskSizeIPv4 || DEFAULT_NODE_MASK_SIZE[4];
  const v6 = maskSizeIPv6 || DEFAULT_NODE_MASK_SIZE[6];
  if (clusterCIDRs.length > 1) {
    if (maskSize !== 0) throw new Error('--node-cidr-mask-size: not allowed with dual-stack clusters (use --node-cidr-mask-size-ipv4 and --node-cidr-mask-size-ipv6)');
    return sized(v4, v6);
  }
  if (maskSize !== 0) {
    if (maskSizeIPv4 !== 0 || maskSizeIPv6 !== 0) {
      throw new Error('--node-cidr-mask-size-ipv4 and --node-cidr-mask-size-ipv6: not allowed together with --node-cidr-mask-size (for dual-stack clusters, unset it and use the per-family flags)');
    }
    return sized(maskSize, maskSize);
  }
  const ipv6Only = clusterCIDRs[0]!.family === 6;
  if (maskSizeIPv4 !== 0 && ipv6Only) throw new Error('--node-cidr-mask-size-ipv4: not allowed for a single-stack IPv6 cluster');
  if (maskSizeIPv6 !== 0 && !ipv6Only) throw new Error('--node-cidr-mask-size-ipv6: not allowed for a single-stack IPv4 cluster');
  return sized(v4, v6);
}
