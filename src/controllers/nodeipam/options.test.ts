import { describe, expect, test } from 'bun:test';
import { parsePrefix } from '../../net/ip.ts';
import { resolveNodeIPAMOptions, type NodeIPAMFlags } from './options.ts';

const V4 = parsePrefix('10.244.0.0/16')!;
const V6 = parsePrefix('2001:db8::/48')!;

function flags(given: Partial<NodeIPAMFlags>): NodeIPAMFlags {
  return { allocatorType: 'RangeAllocator', clusterCIDRs: [V4], serviceCIDRs: [], maskSize: 0, maskSizeIPv4: 0, maskSizeIPv6: 0, namespace: 'kube-system', leaseName: 'ccm', ...given };
}

describe('resolveNodeIPAMOptions (upstream setNodeCIDRMaskSizes and the start checks)', () => {
  test.each<[string, Partial<NodeIPAMFlags>, number[]]>([
    ['IPv4 default /24', {}, [24]],
    ['IPv6 default /64', { clusterCIDRs: [V6] }, [64]],
    ['dual-stack defaults, in --cluster-cidr order', { clusterCIDRs: [V6, V4] }, [64, 24]],
    ['--node-cidr-mask-size, single stack', { maskSize: 26 }, [26]],
    ['--node-cidr-mask-size-ipv4, IPv4', { maskSizeIPv4: 25 }, [25]],
    ['--node-cidr-mask-size-ipv6, IPv6', { clusterCIDRs: [V6], maskSizeIPv6: 60 }, [60]],
    ['dual-stack per-family sizes', { clusterCIDRs: [V4, V6], maskSizeIPv4: 26, maskSizeIPv6: 56 }, [26, 56]],
  ])('%s', (_label, given, sizes) => {
    expect(resolveNodeIPAMOptions(flags(given)).maskSizes).toEqual(sizes);
  });

  test.each<[string, Partial<NodeIPAMFlags>, string]>([
    ['no --cluster-cidr', { clusterCIDRs: [] }, '--cluster-cidr: required by --allocate-node-cidrs'],
    ['an unknown allocator type', { allocatorType: 'IPAMFromCloud' }, '--cidr-allocator-type: unknown type "IPAMFromCloud" (known: RangeAllocator, CloudAllocator)'],
    ['--node-cidr-mask-size with dual-stack', { clusterCIDRs: [V4, V6], maskSize: 24 }, '--node-cidr-mask-size: not allowed with dual-stack clusters'],
    ['--node-cidr-mask-size with a per-family flag', { maskSize: 24, maskSizeIPv4: 24 }, 'not allowed together with --node-cidr-mask-size'],
    ['--node-cidr-mask-size-ipv4 for IPv6 only', { clusterCIDRs: [V6], maskSizeIPv4: 24 }, '--node-cidr-mask-size-ipv4: not allowed for a single-stack IPv6 cluster'],
    ['--node-cidr-mask-size-ipv6 for IPv4 only', { maskSizeIPv6: 64 }, '--node-cidr-mask-size-ipv6: not allowed for a single-stack IPv4 cluster'],
    ['a node mask shorter than the cluster CIDR', { maskSize: 15 }, '--cluster-cidr 10.244.0.0/16: node mask size /15 is larger than the cluster CIDR'],
    ['more than 2^16 node CIDRs', { clusterCIDRs: [parsePrefix('10.0.0.0/8')!], maskSize: 25 }, 'into more than 2^16 subnets (at most /24)'],
  ])('refused: %s', (_label, given, message) => {
    expect(() => resolveNodeIPAMOptions(flags(given))).toThrow(message);
  });

  test('the record is named after the Lease, in its namespace', () => {
    const o = resolveNodeIPAMOptions(flags({ namespace: 'edge', leaseName: 'my-ccm' }));
    expect([o.recordNamespace, o.recordName]).toEqual(['edge', 'my-ccm-node-ipam']);
  });
});
