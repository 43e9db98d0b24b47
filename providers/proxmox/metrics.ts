import type { Registry } from 'prom-client';
import { registerApiMetrics, type ApiMetrics } from '../../src/http-api/request-metrics.ts';

export type { ApiMetrics };

/**
 * Proxmox API metrics, with the names of the upstream Proxmox CCM so its dashboards work:
 * cloudprovider_proxmox_api_request_duration_seconds and cloudprovider_proxmox_api_request_errors,
 * by `request` (one of the REQUEST names of api.ts).
 */
export function registerProxmoxMetrics(registry: Registry): ApiMetrics {
  return registerApiMetrics(registry, { api: 'proxmox', title: 'Proxmox VE', buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10] });
}
