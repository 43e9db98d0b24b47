import { describe, expect, test } from 'bun:test';
import { checkImported, renderImported } from '../migrate/imported.ts';
import { convert, readManifests } from './import.ts';
import { loadStaticConfig } from '../../providers/static/config-load.ts';
import type { PoolConfig } from '../lb/config-model.ts';
import { formatIP, parseIP } from '../net/ip.ts';
import { rangesContain } from '../lb/ranges.ts';

/**
 * `edge-ccm import`: each source's pool objects as our pools section, loadable by the daemon,
 * holding exactly the addresses the source hands out; every feature not converted named.
 */

function load(text: string): PoolConfig[] {
  const loaded = loadStaticConfig(text);
  if (!loaded.ok) throw new Error(JSON.stringify(loaded.errors));
  return loaded.config.loadBalancer.pools;
}

const holds = (pools: PoolConfig[], name: string, ip: string) => rangesContain(pools.find((p) => p.name === name)!.ranges, parseIP(ip)!);

describe('metallb', () => {
  const objects = readManifests([{ name: 'metallb.yaml', text: `
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: { name: production, namespace: metallb-system }
spec:
  addresses: [198.51.100.0/24, "203.0.113.10 - 203.0.113.20"]
  serviceAllocation:
    priority: 10
    namespaces: [shop]
    namespaceSelectors: [{ matchLabels: { team: a } }]
    serviceSelectors: [{ matchExpressions: [{ key: tier, operator: In, values: [web, api] }] }]
---
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: { name: first, namespace: metallb-system }
spec:
  addresses: ["2001:db8::/126"]
  serviceAllocation: { priority: 1 }
---
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: { name: buggy, namespace: metallb-system }
spec:
  addresses: [203.0.113.128/25]
  avoidBuggyIPs: true
  autoAssign: false
---
apiVersion: metallb.io/v1beta1
kind: L2Advertisement
metadata: { name: l2, namespace: metallb-system }
spec: { ipAddressPools: [production] }
---
apiVersion: metallb.io/v1beta2
kind: BGPPeer
metadata: { name: tor, namespace: metallb-system }
spec: { peerAddress: 198.51.100.254, peerASN: 64512, myASN: 64513 }
` }]);

  test('pools as MetalLB hands them out, in its priority order; the rest listed', () => {
    const result = convert('metallb', objects);
    expect(checkImported(result)).toEqual([]);
    const text = renderImported(result, 'metallb.yaml');
    const pools = load(text);
    // MetalLB tries priority 1 before 10; edge-ccm the highest number first.
    expect(pools.map((p) => p.name)).toEqual(['first', 'production', 'buggy']);
    // MetalLB gives out a CIDR's network and broadcast addresses: so do these pools.
    expect(holds(pools, 'production', '198.51.100.0')).toBe(true);
    expect(holds(pools, 'production', '198.51.100.255')).toBe(true);
    expect(holds(pools, 'production', '203.0.113.15')).toBe(true);
    expect(holds(pools, 'first', '2001:db8::')).toBe(true);
    // avoidBuggyIPs: no .0 or .255, everything else.
    expect(holds(pools, 'buggy', '203.0.113.255')).toBe(false);
    expect(holds(pools, 'buggy', '203.0.113.128')).toBe(true);
    expect(holds(pools, 'buggy', '203.0.113.254')).toBe(true);
    const production = pools.find((p) => p.name === 'production')!;
    expect(production.namespaces).toEqual(['shop']);
    expect(production.serviceSelector!({ tier: 'api' })).toBe(true);
    expect(production.serviceSelector!({ tier: 'db' })).toBe(false);
    expect(pools.find((p) => p.name === 'buggy')!.autoAssign).toBe(false);
    expect(text).toContain('compatibility:\n    - metallb');
    expect(result.unmapped).toEqual([
      'IPAddressPool metallb-system/production: spec.serviceAllocation.namespaceSelectors (edge-ccm\'s pools list namespaces by name: add them to namespaces)',
      'L2Advertisement metallb-system/l2: announce its pools with announce: l2 (edge-ccm speaker)',
      'BGPPeer metallb-system/tor: a peer of the bgp section',
    ]);
    for (const u of result.unmapped) expect(text).toContain(`#   - ${u}`);
  });

  test('the ConfigMap of MetalLB before 0.13', () => {
    const result = convert('metallb', readManifests([{ name: 'cm.yaml', text: `
apiVersion: v1
kind: ConfigMap
metadata: { name: config, namespace: metallb-system }
data:
  config: |
    peers:
    - peer-address: 10.0.0.1
      peer-asn: 64501
      my-asn: 64500
    address-pools:
    - name: default
      protocol: layer2
      addresses: [198.51.100.10-198.51.100.20]
      auto-assign: false
` }]));
    expect(result.pools).toEqual([{ name: 'default', addresses: ['198.51.100.10-198.51.100.20'], autoAssign: false, exclude: undefined, namespaces: undefined, serviceSelector: undefined, priority: undefined, includeNetworkAndBroadcast: undefined }]);
    expect(result.unmapped).toEqual([
      'ConfigMap metallb-system/config: peers (peers of the bgp section)',
      'ConfigMap metallb-system/config: address-pools default: protocol layer2 (announce: l2)',
    ]);
  });
});

describe('kube-vip', () => {
  test('global and namespace pools from the kubevip ConfigMap; ends of CIDRs as kube-vip hands them out', () => {
    const cm = (data: Record<string, string>) => [{ kind: 'ConfigMap', metadata: { name: 'kubevip', namespace: 'kube-system' }, data }];
    const result = convert('kube-vip', cm({ 'cidr-global': '198.51.100.0/28', 'range-global': '198.51.100.100-198.51.100.110', 'cidr-team-a': '203.0.113.0/29', 'allow-share-team-a': 'true', 'search-order': 'desc' }));
    expect(checkImported(result)).toEqual([]);
    const pools = load(renderImported(result, 'x'));
    expect(pools.map((p) => [p.name, p.namespaces])).toEqual([['kube-vip-team-a', ['team-a']], ['kube-vip-global', undefined]]);
    expect(holds(pools, 'kube-vip-global', '198.51.100.0')).toBe(true);
    expect(holds(pools, 'kube-vip-global', '198.51.100.105')).toBe(true);
    expect(result.unmapped).toEqual([
      'ConfigMap kube-system/kubevip: allow-share-team-a (services share an address here when they carry the same edge-ccm.io/allow-shared-ip key)',
      'ConfigMap kube-system/kubevip: search-order desc (edge-ccm hands out the lowest free address first)',
    ]);
    const skipping = load(renderImported(convert('kube-vip', cm({ 'cidr-global': '198.51.100.0/28', 'skip-end-ips-in-cidr': 'true' })), 'x'));
    expect(holds(skipping, 'kube-vip-global', '198.51.100.0')).toBe(false);
    expect(holds(skipping, 'kube-vip-global', '198.51.100.1')).toBe(true);
  });
});

describe('cilium', () => {
  test('blocks, cidrs, service selectors with the namespace key, allowFirstLastIPs, disabled', () => {
    const result = convert('cilium', readManifests([{ name: 'pools.yaml', text: `
apiVersion: v1
kind: List
items:
- apiVersion: cilium.io/v2alpha1
  kind: CiliumLoadBalancerIPPool
  metadata: { name: blue }
  spec:
    allowFirstLastIPs: "Yes"
    blocks: [{ cidr: 198.51.100.0/28 }, { start: 198.51.100.100, stop: 198.51.100.105 }, { start: 198.51.100.200 }]
    serviceSelector:
      matchLabels: { color: blue, io.kubernetes.service.namespace: tenant-a }
- apiVersion: cilium.io/v2alpha1
  kind: CiliumLoadBalancerIPPool
  metadata: { name: old }
  spec:
    disabled: true
    cidrs: [{ cidr: 203.0.113.0/29 }]
    serviceSelector:
      matchLabels: { io.kubernetes.service.name: web }
` }]));
    expect(checkImported(result)).toEqual([]);
    const pools = load(renderImported(result, 'pools.yaml'));
    const blue = pools.find((p) => p.name === 'blue')!;
    expect(blue.namespaces).toEqual(['tenant-a']);
    expect(blue.serviceSelector!({ color: 'blue' })).toBe(true);
    expect(holds(pools, 'blue', '198.51.100.0')).toBe(true);
    expect(holds(pools, 'blue', '198.51.100.200')).toBe(true);
    expect(holds(pools, 'blue', '198.51.100.104')).toBe(true);
    expect(pools.find((p) => p.name === 'old')!.autoAssign).toBe(false);
    expect(holds(pools, 'old', '203.0.113.0')).toBe(false);
    expect(result.unmapped).toEqual([
      'CiliumLoadBalancerIPPool old: spec.serviceSelector io.kubernetes.service.name In web (select the service by a label, or reserve its address in loadBalancer.reservations)',
      'CiliumLoadBalancerIPPool old: spec.allowFirstLastIPs unset (Cilium 1.16 and later hand out a CIDR\'s first and last address: set includeNetworkAndBroadcast: true if services hold them)',
      'CiliumLoadBalancerIPPool old: spec.disabled (converted as autoAssign: false; a service naming the pool still gets an address)',
    ]);
  });

  test('overlapping pools, which Cilium marks conflicting, are reported by our validator', () => {
    const pool = (name: string) => ({ kind: 'CiliumLoadBalancerIPPool', metadata: { name }, spec: { blocks: [{ cidr: '198.51.100.0/28' }], allowFirstLastIPs: 'No' } });
    const problems = checkImported(convert('cilium', [pool('a'), pool('b')]));
    expect(problems).toEqual([`loadBalancer.pools[1].addresses: pool "b" overlaps pool "a" at ${formatIP(parseIP('198.51.100.1')!)}`]);
  });
});
