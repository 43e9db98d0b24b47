import { Gauge, type Registry } from '../util/prom.ts';
import { perRegistry } from '../util/per-registry.ts';
import type { PoolUsage } from './allocator.ts';

/**
 * The address pools' metrics, read from the allocator at scrape time (so a pool removed by a
 * reload disappears and nothing can go stale): edge_ccm_lb_pool_addresses_total{pool} and
 * edge_ccm_lb_pool_addresses_used{pool}, registered by whichever provider serves the pools.
 * Made once per registry: with several providers in one process each registers its pools
 * (those after the first hold none), and a registry refuses a name registered twice.
 */
export function registerPoolMetrics(registry: Registry, poolUsage: () => PoolUsage[], providerName: string): void {
  poolSources(registry).set(providerName, poolUsage);
}

const poolSources = perRegistry((registry) => {
  const sources = new Map<string, () => PoolUsage[]>();
  const usage = () => [...sources.values()].flatMap((read) => read());
  new Gauge({
    name: 'edge_ccm_lb_pool_addresses_total',
    help: 'Addresses in each load-balancer pool, exclusions removed.',
    labelNames: ['pool'],
    registers: [registry],
    collect() {
      this.reset();
      // Beyond 2^53 (large IPv6 pools) a float is as exact as a gauge gets.
      for (const u of usage()) this.set({ pool: u.pool }, Number(u.total));
    },
  });
  new Gauge({
    name: 'edge_ccm_lb_pool_addresses_used',
    help: 'Addresses of each load-balancer pool held by at least one service.',
    labelNames: ['pool'],
    registers: [registry],
    collect() {
      this.reset();
      for (const u of usage()) this.set({ pool: u.pool }, u.used);
    },
  });
  return sources;
});
