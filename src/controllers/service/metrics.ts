import { Counter, Histogram, type Registry } from '../../util/prom.ts';
import { perRegistry } from '../../util/per-registry.ts';

// Upstream: metrics.ExponentialBuckets(1, 2, 15), i.e. 1s .. 16384s.
const LATENCY_BUCKETS = Array.from({ length: 15 }, (_, i) => 2 ** i);

/** The service controller's metrics, with upstream's names (subsystem service_controller). */
export class ServiceControllerMetrics {
  readonly loadBalancerSyncs: Counter;
  readonly nodeSyncErrors: Counter;
  readonly nodeSyncLatency: Histogram;
  readonly updateLoadBalancerHostLatency: Histogram;

  private constructor(registry: Registry) {
    const registers = [registry];
    this.loadBalancerSyncs = new Counter({
      name: 'service_controller_loadbalancer_sync_total',
      help: 'A metric counting the amount of times any load balancer has been configured, as an effect of service/node changes on the cluster',
      registers,
    });
    this.nodeSyncErrors = new Counter({
      name: 'service_controller_nodesync_error_total',
      help: 'A metric counting the amount of times any load balancer has been configured and errored, as an effect of node changes on the cluster',
      registers,
    });
    this.nodeSyncLatency = new Histogram({
      name: 'service_controller_nodesync_latency_seconds',
      help: 'A metric measuring the latency for nodesync which updates loadbalancer hosts on cluster node updates.',
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.updateLoadBalancerHostLatency = new Histogram({
      name: 'service_controller_update_loadbalancer_host_latency_seconds',
      help: 'A metric measuring the latency for updating each load balancer hosts.',
      buckets: LATENCY_BUCKETS,
      registers,
    });
  }

  /** The metrics of a registry, created on first use. */
  static readonly for = perRegistry((registry) => new ServiceControllerMetrics(registry));
}
