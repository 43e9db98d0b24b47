import { Histogram, type Registry } from 'prom-client';

/** Upstream metrics.ExponentialBuckets(1, 4, 6): 1s .. ~17m. */
const DELAY_BUCKETS = [1, 4, 16, 64, 256, 1024];

const TAINT_REMOVAL_DELAY = 'node_controller_cloud_provider_taint_removal_delay_seconds';
const INITIAL_SYNC_DELAY = 'node_controller_initial_node_sync_delay_seconds';

/** The cloud node controller's metrics, with upstream's names; created once per registry. */
export interface NodeControllerMetrics {
  taintRemovalDelay: Histogram;
  initialNodeSyncDelay: Histogram;
}

export function nodeControllerMetrics(registry: Registry): NodeControllerMetrics {
  return {
    taintRemovalDelay: histogram(registry, TAINT_REMOVAL_DELAY,
      'Number of seconds after node creation when NodeController removed the cloud-provider taint of a single node.'),
    initialNodeSyncDelay: histogram(registry, INITIAL_SYNC_DELAY,
      'Number of seconds after node creation when NodeController finished the initial synchronization of a single node.'),
  };
}

/** The registry's histogram of that name, registering it on first use (a second controller instance reuses it). */
function histogram(registry: Registry, name: string, help: string): Histogram {
  const existing = registry.getSingleMetric(name);
  if (existing) return existing as Histogram;
  return new Histogram({ name, help, buckets: DELAY_BUCKETS, registers: [registry] });
}
