import { objectName, poolName, selectorText, type ImportResult, type ImportedPool, type ManifestObject } from './imported.ts';

/**
 * Cilium LB IPAM's pools (CiliumLoadBalancerIPPool, cilium.io/v2alpha1 or v2) as edge-ccm
 * pools: blocks (a CIDR, or start and stop) and the older cidrs; a serviceSelector as ours,
 * its io.kubernetes.service.namespace requirement as the pool's namespaces; allowFirstLastIPs
 * as includeNetworkAndBroadcast; a disabled pool hands out no new address: autoAssign false.
 */

const NAMESPACE_KEY = 'io.kubernetes.service.namespace';
const NAME_KEY = 'io.kubernetes.service.name';

export function importCilium(objects: readonly ManifestObject[]): ImportResult {
  const unmapped: string[] = [];
  const pools: ImportedPool[] = [];
  for (const o of objects) {
    if (o.kind !== 'CiliumLoadBalancerIPPool') continue;
    const where = objectName(o);
    const spec = (o.spec ?? {}) as {
      blocks?: { cidr?: string; start?: string; stop?: string }[];
      cidrs?: { cidr?: string }[];
      serviceSelector?: unknown;
      disabled?: boolean;
      allowFirstLastIPs?: string;
    };
    const addresses = [...(spec.blocks ?? []), ...(spec.cidrs ?? [])].flatMap((b: { cidr?: string; start?: string; stop?: string }) => {
      if (b.cidr) return [b.cidr];
      if (b.start) return [b.stop ? `${b.start}-${b.stop}` : b.start];
      return [];
    });
    let namespaces: string[] | undefined;
    const serviceSelector = selectorText(spec.serviceSelector, `${where}: spec.serviceSelector`, unmapped, {
      [NAMESPACE_KEY]: (op, values) => {
        if (op === 'In') namespaces = values;
        else unmapped.push(`${where}: spec.serviceSelector ${NAMESPACE_KEY} ${op} (a pool here lists the namespaces it serves)`);
        return true;
      },
      [NAME_KEY]: (op, values) => {
        unmapped.push(`${where}: spec.serviceSelector ${NAME_KEY} ${op} ${values.join(',')} (select the service by a label, or reserve its address in loadBalancer.reservations)`);
        return true;
      },
    });
    const allow = spec.allowFirstLastIPs?.toLowerCase();
    if (allow === undefined && addresses.some((a) => a.includes('/'))) {
      unmapped.push(`${where}: spec.allowFirstLastIPs unset (Cilium 1.16 and later hand out a CIDR's first and last address: set includeNetworkAndBroadcast: true if services hold them)`);
    }
    if (spec.disabled) unmapped.push(`${where}: spec.disabled (converted as autoAssign: false; a service naming the pool still gets an address)`);
    pools.push({
      name: poolName(o.metadata?.name ?? 'imported'),
      addresses,
      namespaces,
      serviceSelector,
      autoAssign: spec.disabled ? false : undefined,
      includeNetworkAndBroadcast: allow === 'yes' ? true : undefined,
    });
  }
  return { source: 'cilium', pools, unmapped };
}
