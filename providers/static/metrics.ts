import { Counter, Gauge, type Registry } from 'prom-client';
import type { PoolUsage } from './allocator.ts';

/**
 * The static provider's metrics, read from its state at scrape time (so a pool removed by a
 * reload disappears and nothing can go stale):
 *   edge_ccm_lb_pool_addresses_total{pool}, edge_ccm_lb_pool_addresses_used{pool} (also
 *   registered by other providers that use these pools),
 *   edge_ccm_static_config_reloads_total{result="success"|"error"},
 *   edge_ccm_static_config_reload_errors_total (edge_ccm_proxmox_* for the proxmox provider).
 */
export function registerPoolMetrics(registry: Registry, poolUsage: () => PoolUsage[], providerName = 'static'): void {
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

/** edge_ccm_<provider>_config_reloads_total{result} and edge_ccm_<provider>_config_reload_errors_total. */
export function registerReloadMetrics(registry: Registry, reloads: () => { success: number; error: number }, providerName = 'static'): void {
  new Counter({
    name: `edge_ccm_${providerName}_config_reloads_total`,
    help: `Reloads of the ${providerName} provider's configuration file, by result.`,
    labelNames: ['result'],
    registers: [registry],
    collect() {
      const { success, error } = reloads();
      this.reset();
      this.inc({ result: 'success' }, success);
      this.inc({ result: 'error' }, error);
    },
  });
  new Counter({
    name: `edge_ccm_${providerName}_config_reload_errors_total`,
    help: `Edits of the ${providerName} provider's configuration file that were rejected (the last good configuration stayed in force).`,
    registers: [registry],
    collect() {
      this.reset();
      this.inc(reloads().error);
    },
  });
}
