import { describe, expect, test } from 'bun:test';
import type { V1Service } from '@kubernetes/client-node';
import { AddressAllocator } from './allocator.ts';
import { PoolLoadBalancer } from './load-balancer.ts';
import { COMPATIBLE_ANNOTATIONS, type Compatibility } from './compatibility.ts';
import { AllocationError, addressRequest, sharingTerms } from './requests.ts';
import { loadStaticConfig } from '../../providers/static/config-load.ts';
import { formatIP } from '../net/ip.ts';
import { silentLogger } from '../log.ts';

/**
 * loadBalancer.compatibility: MetalLB's, kube-vip's and Cilium's service annotations read as
 * ours, with the same checks, only when opted in; disagreeing annotations refused by name.
 */

function svc(annotations: Record<string, string>, extra: Partial<V1Service['spec']> = {}): V1Service {
  return {
    metadata: { name: 's', namespace: 'default', annotations },
    spec: { type: 'LoadBalancer', ports: [{ port: 80, protocol: 'TCP' }], ipFamilies: ['IPv4', 'IPv6'], ipFamilyPolicy: 'PreferDualStack', ...extra },
  };
}

const ALL: Compatibility[] = ['metallb', 'kube-vip', 'cilium'];
const ips = (s: V1Service, compat: Compatibility[]) => addressRequest(s, compat).requested?.map(formatIP);

describe('requested addresses', () => {
  const cases: [string, Compatibility][] = [
    ['metallb.io/loadBalancerIPs', 'metallb'],
    ['metallb.universe.tf/loadBalancerIPs', 'metallb'],
    ['kube-vip.io/loadbalancerIPs', 'kube-vip'],
    ['lbipam.cilium.io/ips', 'cilium'],
    ['io.cilium/lb-ipam-ips', 'cilium'],
  ];
  for (const [key, source] of cases) {
    test(`${key} counts with compatibility [${source}] only`, () => {
      const s = svc({ [key]: '2001:db8::5, 198.51.100.5' });
      expect(ips(s, [])).toBeUndefined();
      expect(ips(s, ALL.filter((c) => c !== source))).toBeUndefined();
      // In the service's family order, as ours.
      expect(ips(s, [source])).toEqual(['198.51.100.5', '2001:db8::5']);
    });
    test(`${key}: the same checks as ours, naming the annotation`, () => {
      expect(() => addressRequest(svc({ [key]: '198.51.100.5,nope' }), [source])).toThrow(`invalid address "nope" in annotation ${key}`);
      expect(() => addressRequest(svc({ [key]: '198.51.100.5,198.51.100.6' }), [source])).toThrow('at most one IPv4 address per service');
      expect(() => addressRequest(svc({ [key]: '2001:db8::5' }, { ipFamilies: ['IPv4'], ipFamilyPolicy: 'SingleStack' }), [source])).toThrow('is IPv6 but the service\'s IP families are IPv4');
    });
  }

  test('ours wins over spec.loadBalancerIP and theirs; agreeing annotations are fine; disagreeing ones are refused by name', () => {
    expect(ips(svc({ 'metallb.io/loadBalancerIPs': '198.51.100.7' }, { loadBalancerIP: '198.51.100.7' }), ['metallb'])).toEqual(['198.51.100.7']);
    expect(ips(svc({ 'metallb.io/loadBalancerIPs': '198.51.100.7' }, { loadBalancerIP: '198.51.100.8' }), ['metallb'])).toEqual(['198.51.100.7']);
    expect(ips(svc({ 'edge-ccm.io/load-balancer-ips': '198.51.100.7', 'metallb.io/loadBalancerIPs': '198.51.100.7' }), ['metallb'])).toEqual(['198.51.100.7']);
    expect(ips(svc({ 'lbipam.cilium.io/ips': '2001:db8::1,198.51.100.7', 'metallb.io/loadBalancerIPs': '198.51.100.7, 2001:db8::1' }), ALL)).toEqual(['198.51.100.7', '2001:db8::1']);
    let error: unknown;
    try {
      addressRequest(svc({ 'edge-ccm.io/load-balancer-ips': '198.51.100.7', 'lbipam.cilium.io/ips': '198.51.100.9' }), ['cilium']);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(AllocationError);
    expect((error as AllocationError).reason).toBe('InvalidRequest');
    expect((error as Error).message).toBe('annotations edge-ccm.io/load-balancer-ips ("198.51.100.7") and lbipam.cilium.io/ips ("198.51.100.9") disagree: remove one, or make them say the same');
  });

  test('kube-vip.io/loadbalancerIPs that edge-ccm itself wrote (--kube-vip-annotation) is not a request', () => {
    const s = svc({ 'kube-vip.io/loadbalancerIPs': '198.51.100.5', 'edge-ccm.io/kube-vip-annotation': 'true' });
    expect(ips(s, ['kube-vip'])).toBeUndefined();
  });
});

describe('pools and sharing keys', () => {
  test('metallb.io/address-pool and the older spelling name pools; sharing keys from MetalLB and Cilium', () => {
    expect(addressRequest(svc({ 'metallb.io/address-pool': 'a' }), ['metallb']).pools).toEqual(['a']);
    expect(addressRequest(svc({ 'metallb.universe.tf/address-pool': 'b' }), ['metallb']).pools).toEqual(['b']);
    expect(addressRequest(svc({ 'metallb.io/address-pool': 'a' }), ['cilium']).pools).toBeUndefined();
    expect(sharingTerms(svc({ 'metallb.io/allow-shared-ip': 'k1' }), ['metallb']).sharingKey).toBe('k1');
    expect(sharingTerms(svc({ 'metallb.universe.tf/allow-shared-ip': 'k1' }), ['metallb']).sharingKey).toBe('k1');
    expect(sharingTerms(svc({ 'lbipam.cilium.io/sharing-key': 'k2' }), ['cilium']).sharingKey).toBe('k2');
    expect(sharingTerms(svc({ 'lbipam.cilium.io/sharing-key': 'k2' }), []).sharingKey).toBeUndefined();
    expect(() => sharingTerms(svc({ 'edge-ccm.io/allow-shared-ip': 'x', 'metallb.io/allow-shared-ip': 'y' }), ['metallb'])).toThrow('disagree');
  });

  test('every source key is listed once', () => {
    const keys = Object.values(COMPATIBLE_ANNOTATIONS).flatMap((m) => Object.values(m).flat());
    expect(new Set(keys).size).toBe(keys.length);
  });

  test('through the pool load balancer: a MetalLB sharing pair shares one address; rebuilt from status with their key', async () => {
    const loaded = loadStaticConfig(`loadBalancer:
  compatibility: [metallb]
  pools:
    - name: web
      addresses: [198.51.100.10-198.51.100.20]
`);
    if (!loaded.ok) throw new Error(JSON.stringify(loaded.errors));
    const lb = loaded.config.loadBalancer;
    const balancer = new PoolLoadBalancer(new AddressAllocator(lb.pools, lb), () => [], silentLogger, () => lb.compatibility ?? []);
    const mk = (name: string, port: number, ip?: string): V1Service => ({
      metadata: { name, namespace: 'default', annotations: { 'metallb.io/allow-shared-ip': 'pair', 'metallb.io/loadBalancerIPs': '198.51.100.15' } },
      spec: { type: 'LoadBalancer', ports: [{ port, protocol: 'TCP' }], ipFamilies: ['IPv4'] },
      status: ip ? { loadBalancer: { ingress: [{ ip }] } } : {},
    });
    balancer.rebuild([mk('a', 80, '198.51.100.15'), mk('b', 443, '198.51.100.15')]);
    // Both kept their address: the rebuild read MetalLB's key, so the two may hold it together.
    expect((await balancer.getLoadBalancer('c', mk('b', 443))).status.ingress).toEqual([{ ip: '198.51.100.15' }]);
    expect((await balancer.ensureLoadBalancer('c', mk('b', 443), [])).ingress).toEqual([{ ip: '198.51.100.15' }]);
    expect(balancer.assignedPools(mk('a', 80))).toEqual(['web']);
  });
});

describe('config', () => {
  test('compatibility accepts the three sources and names a wrong one', () => {
    const bad = loadStaticConfig('loadBalancer:\n  compatibility: [metallb, calico]\n');
    expect(bad.ok).toBe(false);
    expect(JSON.stringify(!bad.ok && bad.errors)).toContain('must be one of metallb, kube-vip, cilium');
    const good = loadStaticConfig('loadBalancer:\n  compatibility: [metallb, kube-vip, cilium, metallb]\n');
    expect(good.ok && good.config.loadBalancer.compatibility).toEqual(['metallb', 'kube-vip', 'cilium']);
  });
});
