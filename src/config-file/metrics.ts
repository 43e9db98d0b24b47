import { Counter, type Registry } from '../util/prom.ts';

/**
 * A provider's config-file reload metrics, read from its WatchedConfig at scrape time:
 * edge_ccm_<provider>_config_reloads_total{result="success"|"error"} and
 * edge_ccm_<provider>_config_reload_errors_total.
 */
export function registerReloadMetrics(registry: Registry, reloads: () => { success: number; error: number }, providerName: string): void {
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
