import type { Registry } from 'prom-client';
import { registerApiMetrics, type ApiMetrics } from '../../src/http-api/request-metrics.ts';

export type { ApiMetrics };

/**
 * LXD API metrics, named as the proxmox provider's: cloudprovider_lxd_api_request_duration_seconds
 * and cloudprovider_lxd_api_request_errors, by `request` (one of the REQUEST names of api.ts).
 */
export function registerLxdMetrics(registry: Registry): ApiMetrics {
  return registerApiMetrics(registry, { api: 'lxd', title: 'LXD (or Incus)', buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5] });
}
