import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { RequestObserver } from '../kube/transport.ts';

/**
 * The process-wide metrics that are not any one controller's: client request metrics and the
 * controller-manager's running_managed_controllers, with upstream's names so dashboards carry over.
 */
export function createRegistry(): Registry {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: EVENT_LOOP_SAMPLE_MS });
  return registry;
}

/**
 * How often the nodejs_eventloop_lag_* histogram samples the event loop. prom-client's default,
 * 10 ms, is a timer waking the process 100 times a second: in Bun 1.4.5 that is 0.2 CPU-s per
 * minute with nothing else to do, twice what the whole upstream controller manager spends idle
 * with 5000 nodes (BENCHMARKS.md run 5). At 100 ms it costs 0.06 and still sees every block
 * longer than that (a 200 ms block measured as 199-200 ms at both).
 */
export const EVENT_LOOP_SAMPLE_MS = 100;

/** rest_client_requests_total{code,method,host} and rest_client_request_duration_seconds{verb,host}. */
export function restClientObserver(registry: Registry): RequestObserver {
  const requests = new Counter({
    name: 'rest_client_requests_total',
    help: 'Number of HTTP requests, partitioned by status code, method, and host.',
    labelNames: ['code', 'method', 'host'],
    registers: [registry],
  });
  const duration = new Histogram({
    name: 'rest_client_request_duration_seconds',
    help: 'Request latency in seconds. Broken down by verb, and host.',
    labelNames: ['verb', 'host'],
    buckets: [0.005, 0.025, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60],
    registers: [registry],
  });
  return ({ method, host, code, seconds }) => {
    requests.inc({ code, method, host });
    duration.observe({ verb: method, host }, seconds);
  };
}

/** running_managed_controllers{name,manager}: 1 while a controller runs (upstream ControllerManagerMetrics). */
export class ControllerManagerMetrics {
  private readonly running: Gauge;
  constructor(registry: Registry, private readonly manager = 'cloud-controller-manager') {
    this.running = new Gauge({
      name: 'running_managed_controllers',
      help: 'Indicates where instances of a controller are currently running',
      labelNames: ['name', 'manager'],
      registers: [registry],
    });
  }
  started(name: string): void {
    this.running.set({ name, manager: this.manager }, 1);
  }
  stopped(name: string): void {
    this.running.set({ name, manager: this.manager }, 0);
  }
}
