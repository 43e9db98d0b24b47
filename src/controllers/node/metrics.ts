import { Histogram } from '../../util/prom.ts';
import { perRegistry } from '../../util/per-registry.ts';

/** Upstream metrics.ExponentialBuckets(1, 4, 6): 1s .. ~17m. */
const DELAY_BUCKETS = [1, 4, 16, 64, 256, 1024];

const TAINT_REMOVAL_DELAY = 'node_controller_cloud_provider_taint_removal_delay_seconds';
const INITIAL_SYNC_DELAY = 'node_controller_initial_node_sync_delay_seconds';

/** The cloud node controller's metrics, with upstream's names; created once per registry. */
export interface NodeControllerMetrics {
  taintRemovalDelay: Histogram;
  initialNodeSyncDelay: Histogram;
}

export const nodeControllerMetrics = perRegistry((registry): NodeControllerMetrics => ({
  taintRemovalDelay: new Histogram({
    name: TAINT_REMOVAL_DELAY,
    help: 'Number of seconds after node creation when NodeController removed the cloud-provider taint of a single node.',
    buckets: DELAY_BUCKETS,
    registers: [registry],
  }),
  initialNodeSyncDelay: new Histogram({
    name: INITIAL_SYNC_DELAY,
    help: 'Number of seconds after node creation when NodeController finished the initial synchronization of a single node.',
    buckets: DELAY_BUCKETS,
    registers: [registry],
  }),
}));
