import { Gauge, type Registry } from 'prom-client';
import type { PoolUsage } from './allocator.ts';

/**
 * The address pools' metrics, read from the allocator at scrape time (so a pool removed by a
 * reload disappears and nothing can go stale): edge_ccm_lb_pool_addresses_total{pool} and
 * edge_ccm_lb_pool_addresses_used{pool}, registered by whichever provider serves the pools.
 */
export function registerPoolMetrics(registry: Registry, poolUsage: () => PoolUsage[], providerName: string): void {
  new Gauge({
    name: 'edge_ccm_lb_pool_addresses_total',
    help: `Addresses in each load-balancer pool of the ${providerName} provider, exclusions removed.`,
    labelNames: ['pool'],
    registers: [registry],
    collect() {
      this.reset();
      // Beyond 2^53 (large IPv6 pools) a float is as exact as a gauge gets.
      for (const u of poolUsage()) this.set({ pool: u.pool }, Number(u.total));
    },
  });
  new Gauge({
    name: 'edge_ccm_lb_pool_addresses_used',
    help: `Addresses of each load-balancer pool of the ${providerName} provider held by at least one service.`,
    labelNames: ['pool'],
    registers: [registry],
    collect() {
      this.reset();
      for (const u of poolUsage()) this.set({ pool: u.pool }, u.used);
    },
  });
}
