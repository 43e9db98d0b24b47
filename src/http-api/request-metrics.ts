import { Counter, Histogram, type Registry } from '../util/prom.ts';

/**
 * An HTTP API provider's request metrics, named as the upstream Proxmox CCM names its own (so its
 * dashboards work), one pair per API:
 *   cloudprovider_<api>_api_request_duration_seconds{request} (histogram, every answer or failure),
 *   cloudprovider_<api>_api_request_errors{request} (counter: HTTP errors, timeouts, refused connections).
 * `request` is one of the provider's REQUEST names.
 */
export interface ApiMetrics {
  observe(request: string, seconds: number): void;
  error(request: string): void;
}

export interface ApiMetricsNames {
  /** The name's part: `proxmox` gives cloudprovider_proxmox_api_…. */
  api: string;
  /** The API as the help text names it, e.g. `Proxmox VE`. */
  title: string;
  /** Latency buckets (seconds), suited to how fast the API answers. */
  buckets: number[];
}

export function registerApiMetrics(registry: Registry, { api, title, buckets }: ApiMetricsNames): ApiMetrics {
  const duration = new Histogram({
    name: `cloudprovider_${api}_api_request_duration_seconds`,
    help: `Latency of ${title} API requests, by request.`,
    labelNames: ['request'],
    buckets,
    registers: [registry],
  });
  const errors = new Counter({
    name: `cloudprovider_${api}_api_request_errors`,
    help: `${title} API requests that failed (HTTP error, timeout, connection), by request.`,
    labelNames: ['request'],
    registers: [registry],
  });
  return {
    observe: (request, seconds) => duration.observe({ request }, seconds),
    error: (request) => errors.inc({ request }),
  };
}
