import type { V1Service } from '@kubernetes/client-node';
import { KUBE_VIP_OWNED_ANNOTATION } from '../kube/service-helpers.ts';

/**
 * `loadBalancer.compatibility: [metallb, kube-vip, cilium]`: the annotations other address
 * managers read, read by edge-ccm too, so the charts and services written for them keep their
 * addresses after a switch (docs/migrating.md). Opt-in: without it, only edge-ccm.io/* counts.
 *
 * Each meaning (requested addresses, pools, sharing key) has our annotation first, then each
 * enabled source's keys, newest spelling first. The value goes through the same parsing and
 * checks as ours; two keys that both say something and disagree are an error naming both,
 * rather than a silent pick.
 */

export const COMPATIBILITY_SOURCES = ['metallb', 'kube-vip', 'cilium'] as const;
export type Compatibility = (typeof COMPATIBILITY_SOURCES)[number];

export type AnnotationMeaning = 'addresses' | 'pools' | 'sharingKey';

/** What each source's annotations mean (MetalLB's metallb.universe.tf/* and Cilium's io.cilium/lb-ipam-* are their older spellings). */
export const COMPATIBLE_ANNOTATIONS: Record<Compatibility, Record<AnnotationMeaning, readonly string[]>> = {
  metallb: {
    addresses: ['metallb.io/loadBalancerIPs', 'metallb.universe.tf/loadBalancerIPs'],
    pools: ['metallb.io/address-pool', 'metallb.universe.tf/address-pool'],
    sharingKey: ['metallb.io/allow-shared-ip', 'metallb.universe.tf/allow-shared-ip'],
  },
  'kube-vip': {
    // Only when someone else wrote it: with --kube-vip-annotation edge-ccm writes it too (marked).
    addresses: ['kube-vip.io/loadbalancerIPs'],
    pools: [],
    sharingKey: [],
  },
  cilium: {
    addresses: ['lbipam.cilium.io/ips', 'io.cilium/lb-ipam-ips'],
    pools: [],
    sharingKey: ['lbipam.cilium.io/sharing-key', 'io.cilium/lb-ipam-sharing-key'],
  },
};

/** The annotation a value was read from, and the value (trimmed, non-empty). */
export interface AnnotatedValue {
  key: string;
  value: string;
}

/**
 * The first of `ours` and the enabled sources' keys for this meaning that the service sets.
 * Throws (message naming both keys) when another one says something different; `same` decides
 * what "the same" is (e.g. the same addresses in another order).
 */
export function readCompatible(
  service: V1Service,
  ours: string,
  meaning: AnnotationMeaning,
  sources: readonly Compatibility[],
  same: (a: string, b: string) => boolean = (a, b) => a === b,
  error: (message: string) => Error = (m) => new Error(m),
): AnnotatedValue | undefined {
  const annotations = service.metadata?.annotations ?? {};
  const found: AnnotatedValue[] = [];
  for (const key of [ours, ...sources.flatMap((s) => COMPATIBLE_ANNOTATIONS[s][meaning])]) {
    const value = annotations[key]?.trim();
    if (!value) continue;
    if (key === 'kube-vip.io/loadbalancerIPs' && annotations[KUBE_VIP_OWNED_ANNOTATION] === 'true') continue;
    found.push({ key, value });
  }
  const [first, ...rest] = found;
  const other = rest.find((f) => !same(first!.value, f.value));
  if (first && other) {
    throw error(`annotations ${first.key} (${JSON.stringify(first.value)}) and ${other.key} (${JSON.stringify(other.value)}) disagree: remove one, or make them say the same`);
  }
  return first;
}
