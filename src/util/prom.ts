/**
 * prom-client's metric classes, each from its own module. prom-client's index also loads its
 * Pushgateway (node:http, node:https, node:zlib), its cluster aggregator (node:cluster), Summary and
 * collectDefaultMetrics, none of which edge-ccm uses: 10.6 MiB of RSS in an empty compiled
 * binary, 0.4-0.9 MiB of anonymous memory in `edge-ccm speaker` (BENCHMARKS.md, "Footprint on
 * every node"). The classes are the index's own (it re-exports these modules), so a registry from
 * here and one from 'prom-client' are the same class. Import the classes from here; types may
 * come from 'prom-client'.
 */
export { default as Counter } from 'prom-client/lib/counter.js';
export { default as Gauge } from 'prom-client/lib/gauge.js';
export { default as Histogram } from 'prom-client/lib/histogram.js';
export { default as Registry } from 'prom-client/lib/registry.js';
