import { Counter, Histogram, type Registry } from 'prom-client';

/**
 * LXD API metrics, named as the proxmox provider's:
 *   cloudprovider_lxd_api_request_duration_seconds{request} (histogram, every answer or failure),
 *   cloudprovider_lxd_api_request_errors{request} (counter: HTTP errors, timeouts, refused connections).
 * `request` is one of the REQUEST names of api.ts.
 */
export interface ApiMetrics {
  observe(request: string, seconds: number): void;
  error(request: string): void;
}

export function registerLxdMetrics(registry: Registry): ApiMetrics {
  const duration = new Histogram({
    name: 'cloudprovider_lxd_api_request_duration_seconds',
    help: 'Latency of LXD (or Incus) API requests, by request.',
    labelNames: ['request'],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [registry],
  });
  const errors = new Counter({
    name: 'cloudprovider_lxd_api_request_errors',
    help: 'LXD (or Incus) API requests that failed (HTTP error, timeout, connection), by request.',
    labelNames: ['request'],
    registers: [registry],
  });
  return { observe: (request, seconds) => duration.observe({ request }, seconds), error: (request) => errors.inc({ request }) };
}
