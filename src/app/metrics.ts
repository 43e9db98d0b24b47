import { Counter, Gauge, Histogram, Registry } from '../util/prom.ts';
import heapSizeAndUsed from 'prom-client/lib/metrics/heapSizeAndUsed.js';
import heapSpacesSizeAndUsed from 'prom-client/lib/metrics/heapSpacesSizeAndUsed.js';
import osMemoryHeap from 'prom-client/lib/metrics/osMemoryHeap.js';
import processHandles from 'prom-client/lib/metrics/processHandles.js';
import processMaxFileDescriptors from 'prom-client/lib/metrics/processMaxFileDescriptors.js';
import processOpenFileDescriptors from 'prom-client/lib/metrics/processOpenFileDescriptors.js';
import processRequests from 'prom-client/lib/metrics/processRequests.js';
import processResources from 'prom-client/lib/metrics/processResources.js';
import processStartTime from 'prom-client/lib/metrics/processStartTime.js';
import version from 'prom-client/lib/metrics/version.js';
import type { RequestObserver } from '../kube/transport.ts';

/**
 * The process-wide metrics that are not any one controller's: client request metrics and the
 * controller-manager's running_managed_controllers, with upstream's names so dashboards carry over.
 */
export function createRegistry(): Registry {
  const registry = new Registry();
  for (const register of PROCESS_METRICS) register(registry, {});
  eventLoopLagAtScrape(registry);
  return registry;
}

/**
 * prom-client's default process metrics (process_*, nodejs_*) without its event-loop delay
 * histogram (nodejs_eventloop_lag_{min,max,mean,stddev,p50,p90,p99}_seconds): that histogram is a
 * timer waking the process 10 times a second at the 100 ms period edge-ccm had set (100 times at
 * prom-client's default 10 ms), most of an idle controller's wakeups; and in Bun 1.4.5 it records
 * only the delay beyond its own period, so a block shorter than the period reads as nothing (a
 * 50 ms block as 0.4 ms at 100 ms) and a longer one up to a period short (BENCHMARKS.md run 10).
 * Nor its nodejs_gc_duration_seconds: it observes node's 'gc' performance entries, which Bun
 * 1.4.5 never makes (PerformanceObserver.supportedEntryTypes has no 'gc'), so it was a histogram
 * with no series, and its module loads node:perf_hooks' JavaScript into every process.
 * The list is collectDefaultMetrics' (prom-client 15.1.3) less eventLoopLag and gc.
 */
const PROCESS_METRICS = [
  processCpuSeconds, processStartTime, osMemoryHeap, processOpenFileDescriptors, processMaxFileDescriptors,
  processResources, processHandles, processRequests, heapSizeAndUsed, heapSpacesSizeAndUsed, version,
];

/**
 * process_cpu_user_seconds_total, process_cpu_system_seconds_total and process_cpu_seconds_total,
 * named, described and counted as prom-client's processCpuTotal does (all three brought up to date
 * when scraped), without its module: it loads @opentelemetry/api, 22 KB of code for exemplars
 * edge-ccm never enables, into every process, the speaker and the VIP on every node too.
 */
function processCpuSeconds(registry: Registry): void {
  let last = process.cpuUsage();
  new Counter({
    name: 'process_cpu_user_seconds_total',
    help: 'Total user CPU time spent in seconds.',
    registers: [registry],
    collect() {
      const now = process.cpuUsage();
      const userS = (now.user - last.user) / 1e6;
      const systemS = (now.system - last.system) / 1e6;
      last = now;
      this.inc(userS);
      system.inc(systemS);
      total.inc(userS + systemS);
    },
  });
  const system = new Counter({ name: 'process_cpu_system_seconds_total', help: 'Total system CPU time spent in seconds.', registers: [registry] });
  const total = new Counter({ name: 'process_cpu_seconds_total', help: 'Total user and system CPU time spent in seconds.', registers: [registry] });
}

/**
 * nodejs_eventloop_lag_seconds, the name prom-client gives it: how long a callback queued at the
 * scrape waits for the event loop. No timer between scrapes; measured when scraped (prom-client
 * reported the previous scrape's measurement).
 */
function eventLoopLagAtScrape(registry: Registry): void {
  new Gauge({
    name: 'nodejs_eventloop_lag_seconds',
    help: 'Lag of event loop in seconds.',
    registers: [registry],
    async collect() {
      const start = performance.now();
      await new Promise<void>((resolve) => setImmediate(resolve));
      this.set((performance.now() - start) / 1000);
    },
  });
}

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
