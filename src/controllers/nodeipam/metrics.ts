import { Counter, Gauge } from '../../util/prom.ts';
import { formatPrefix } from '../../net/ip.ts';
import type { CIDRSet } from '../../net/cidr-set.ts';
import { perRegistry } from '../../util/per-registry.ts';

/**
 * The node IPAM controller's metrics: upstream's cidrset metrics (subsystem
 * node_ipam_controller, label clusterCIDR), and ours for what upstream only logs or crashes on
 * (conflicts, exhaustion, a CIDR outside the cluster CIDR, a bad inventory pin): one count per
 * Warning event, by its reason.
 */
export interface NodeIPAMMetrics {
  allocations: Counter<'clusterCIDR'>;
  releases: Counter<'clusterCIDR'>;
  problems: Counter<'reason'>;
  /** The sets the gauges read: the current term's (replaced at each rebuild). */
  watch(sets: () => readonly CIDRSet[]): void;
}

export const nodeIPAMMetrics = perRegistry((registry): NodeIPAMMetrics => {
  let sets: () => readonly CIDRSet[] = () => [];
  const gauge = (name: string, help: string, value: (s: CIDRSet) => number) => new Gauge({
    name,
    help,
    labelNames: ['clusterCIDR'],
    registers: [registry],
    collect() {
      this.reset();
      for (const s of sets()) this.set({ clusterCIDR: formatPrefix(s.cluster) }, value(s));
    },
  });
  gauge('node_ipam_controller_cidrset_usage_cidrs', 'Gauge measuring percentage of allocated CIDRs.', (s) => s.used / s.size);
  gauge('node_ipam_controller_cidrset_max_cidrs', 'Maximum number of CIDRs that can be allocated.', (s) => s.size);
  return {
    allocations: new Counter({
      name: 'node_ipam_controller_cidrset_cidrs_allocations_total',
      help: 'Counter measuring total number of CIDR allocations.',
      labelNames: ['clusterCIDR'],
      registers: [registry],
    }),
    releases: new Counter({
      name: 'node_ipam_controller_cidrset_cidrs_releases_total',
      help: 'Counter measuring total number of CIDR releases.',
      labelNames: ['clusterCIDR'],
      registers: [registry],
    }),
    problems: new Counter({
      name: 'edge_ccm_node_ipam_problems_total',
      help: 'Pod CIDR problems reported as Warning events on a node, by reason (CIDRNotAvailable, CIDRConflict, CIDROutsideClusterCIDR, InvalidPodCIDRPin).',
      labelNames: ['reason'],
      registers: [registry],
    }),
    watch(next) {
      sets = next;
    },
  };
});
