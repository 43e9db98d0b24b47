import { expect, test } from 'bun:test';
import { createRegistry } from './metrics.ts';

test('the process metrics are prom-client\'s defaults without the event-loop delay histogram, whose timer woke the process 10 times a second', async () => {
  const names = (await createRegistry().getMetricsAsJSON()).map((m) => m.name);
  for (const name of ['nodejs_eventloop_lag_seconds', 'process_cpu_seconds_total', 'process_resident_memory_bytes', 'process_start_time_seconds', 'process_open_fds', 'nodejs_heap_size_used_bytes', 'nodejs_version_info']) {
    expect(names).toContain(name);
  }
  expect(names.filter((n) => /^nodejs_eventloop_lag_(min|max|mean|stddev|p50|p90|p99)_seconds$/.test(n))).toEqual([]);
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
