import { objectName, poolName, type ImportResult, type ImportedPool, type ManifestObject } from './imported.ts';
import { compareCodeUnits } from '../util/compare.ts';

/**
 * kube-vip-cloud-provider's pools as edge-ccm pools: its ConfigMap (kube-system/kubevip), whose
 * keys `cidr-<scope>` and `range-<scope>` hold comma-separated CIDRs and ranges, `<scope>`
 * being `global` or a namespace. A namespace's pool comes first for its services (priority 1),
 * the global pool after (kube-vip-cloud-provider does not fall back to the global pool when a
 * namespace's is full; edge-ccm does). kube-vip hands out a CIDR's first and last address
 * unless `skip-end-ips-in-cidr` is "true": includeNetworkAndBroadcast says the same.
 */

const GLOBAL = 'global';

export function importKubeVip(objects: readonly ManifestObject[]): ImportResult {
  const unmapped: string[] = [];
  const byScope = new Map<string, string[]>();
  let skipEnds = false;
  for (const o of objects) {
    if (o.kind !== 'ConfigMap') continue;
    const where = objectName(o);
    for (const [key, value] of Object.entries(o.data ?? {})) {
      const scoped = /^(cidr|range)-(.+)$/.exec(key);
      if (scoped) {
        const entries = value.split(',').map((x) => x.trim()).filter(Boolean);
        byScope.set(scoped[2]!, [...(byScope.get(scoped[2]!) ?? []), ...entries]);
      } else if (key === 'skip-end-ips-in-cidr') skipEnds = value.trim() === 'true';
      else if (key === 'search-order') {
        if (value.trim() === 'desc') unmapped.push(`${where}: search-order desc (edge-ccm hands out the lowest free address first)`);
      } else if (key.startsWith('allow-share-')) {
        unmapped.push(`${where}: ${key} (services share an address here when they carry the same edge-ccm.io/allow-shared-ip key)`);
      } else if (key.startsWith('interface-')) {
        unmapped.push(`${where}: ${key} (the interface the address is announced on: a pool's interfaces with announce: l2)`);
      } else {
        unmapped.push(`${where}: key ${key} (not known to this import)`);
      }
    }
  }
  const pools: ImportedPool[] = [...byScope].map(([scope, addresses]) => ({
    name: poolName(`kube-vip-${scope}`),
    addresses,
    namespaces: scope === GLOBAL ? undefined : [scope],
    priority: scope === GLOBAL ? undefined : 1,
    includeNetworkAndBroadcast: !skipEnds && addresses.some((a) => a.includes('/')) ? true : undefined,
  }));
  // Global last, then by name: the file reads in the order services try the pools.
  pools.sort((a, b) => (b.priority ?? 0) - (a.priority ?? 0) || compareCodeUnits(a.name, b.name));
  return { source: 'kube-vip', pools, unmapped };
}
