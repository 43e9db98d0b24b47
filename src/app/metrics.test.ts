import { expect, test } from 'bun:test';
import { createRegistry } from './metrics.ts';
import processCpuTotal from 'prom-client/lib/metrics/processCpuTotal.js';
import { Registry } from '../util/prom.ts';

test('the process metrics are prom-client\'s defaults without the event-loop delay histogram, whose timer woke the process 10 times a second', async () => {
  const names = (await createRegistry().getMetricsAsJSON()).map((m) => m.name);
  for (const name of ['nodejs_eventloop_lag_seconds', 'process_cpu_seconds_total', 'process_resident_memory_bytes', 'process_start_time_seconds', 'process_open_fds', 'nodejs_heap_size_used_bytes', 'nodejs_version_info']) {
    expect(names).toContain(name);
  }
  expect(names.filter((n) => /^nodejs_eventloop_lag_(min|max|mean|stddev|p50|p90|p99)_seconds$/.test(n))).toEqual([]);
});

test("the gc histogram is left out because Bun makes no 'gc' performance entry for it to observe", async () => {
  const { PerformanceObserver } = await import('node:perf_hooks');
  expect(PerformanceObserver.supportedEntryTypes).not.toContain('gc');
  expect((await createRegistry().getMetricsAsJSON()).map((m) => m.name)).not.toContain('nodejs_gc_duration_seconds');
});

test('nodejs_eventloop_lag_seconds is the wait of the scrape itself: a 60 ms block queued before it is in it', async () => {
  const registry = createRegistry();
  setImmediate(() => {
    const end = performance.now() + 60;
    while (performance.now() < end);
  });
  const lag = await registry.getSingleMetric('nodejs_eventloop_lag_seconds')?.get();
  expect(lag?.values[0]?.value).toBeGreaterThanOrEqual(0.06);
});

test("the process CPU counters are prom-client's processCpuTotal's: same names, help and type, the CPU spent counted", async () => {
  const ours = createRegistry();
  const theirs = new Registry();
  processCpuTotal(theirs, {});
  const end = performance.now() + 80;
  while (performance.now() < end);
  const names = ['process_cpu_user_seconds_total', 'process_cpu_system_seconds_total', 'process_cpu_seconds_total'];
  // The user counter's collect brings all three up to date: scraped first, as a scrape of the registry does.
  const read = async (registry: Registry) => (await registry.getMetricsAsJSON()).filter((m) => names.includes(m.name));
  const [a, b] = [await read(ours), await read(theirs)];
  expect(a.map(({ name, help, type }) => ({ name, help, type }))).toEqual(b.map(({ name, help, type }) => ({ name, help, type })));
  const total = (ms: typeof a) => ms.find((m) => m.name === 'process_cpu_seconds_total')!.values[0]!.value;
  expect(total(a)).toBeGreaterThanOrEqual(0.07);
  expect(Math.abs(total(a) - total(b))).toBeLessThan(0.03);
  const sum = (ms: typeof a) => ms.filter((m) => m.name !== 'process_cpu_seconds_total').reduce((s, m) => s + m.values[0]!.value, 0);
  expect(sum(a)).toBeCloseTo(total(a), 6);
});
