import { expect, test } from 'bun:test';
import { createRegistry } from './metrics.ts';

test('the process metrics keep the event-loop delay histogram (sampled every 100 ms, not every 10 ms)', async () => {
  const registry = createRegistry();
  const names = (await registry.getMetricsAsJSON()).map((m) => m.name);
  for (const name of ['nodejs_eventloop_lag_seconds', 'nodejs_eventloop_lag_max_seconds', 'nodejs_eventloop_lag_p99_seconds', 'process_cpu_seconds_total', 'process_resident_memory_bytes']) {
    expect(names).toContain(name);
  }
});
