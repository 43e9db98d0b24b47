import { describe, expect, test } from 'bun:test';
import { Registry } from 'prom-client';
import { FakeClock } from '../../../test/fakes/fake-clock.ts';
import { WorkQueueMetrics, workQueueMetricsFor } from './metrics.ts';
import { WorkQueue } from './queue.ts';
import { ItemExponentialFailureRateLimiter } from './rate-limiters.ts';

/** A sample's value from the registry (collect callbacks run), or undefined if the series is absent. */
async function sample(registry: Registry, metric: string, queueName: string, series = metric): Promise<number | undefined> {
  const found = registry.getSingleMetric(metric);
  if (!found) throw new Error(`${metric} is not registered`);
  const { values } = await found.get();
  // Histogram samples carry their series name (_sum, _count, _bucket); the other types don't.
  const named = values as { value: number; labels: Record<string, string | number | undefined>; metricName?: string }[];
  return named.find((v) => v.labels.name === queueName && (v.metricName ?? metric) === series)?.value;
}

function setup() {
  const registry = new Registry();
  const metrics = new WorkQueueMetrics(registry);
  const clock = new FakeClock(1_000);
  const queue = new WorkQueue<string>('nodes', { metrics, clock, rateLimiter: new ItemExponentialFailureRateLimiter(10, 100) });
  return { registry, metrics, clock, queue };
}

async function take(queue: WorkQueue<string>): Promise<string> {
  const next = await queue.get();
  if (next.shutdown) throw new Error('queue unexpectedly shut down');
  return next.item;
}

describe('WorkQueueMetrics', () => {
  test('registers the upstream names with a name label and upstream buckets', async () => {
    const { registry } = setup();
    const names = (await registry.getMetricsAsJSON()).map((m) => m.name).sort();
    expect(names).toEqual([
      'workqueue_adds_total',
      'workqueue_depth',
      'workqueue_longest_running_processor_seconds',
      'workqueue_queue_duration_seconds',
      'workqueue_retries_total',
      'workqueue_unfinished_work_seconds',
      'workqueue_work_duration_seconds',
    ]);
    const text = await registry.metrics();
    const buckets = [...text.matchAll(/workqueue_queue_duration_seconds_bucket\{le="([^"]+)",name="nodes"\}/g)].map((m) => m[1]);
    expect(buckets).toEqual(['1e-8', '1e-7', '0.000001', '0.00001', '0.0001', '0.001', '0.01', '0.1', '1', '10', '+Inf']);
    // Series exist before anything happens, as upstream.
    expect(await sample(registry, 'workqueue_depth', 'nodes')).toBe(0);
    expect(await sample(registry, 'workqueue_adds_total', 'nodes')).toBe(0);
  });

  test('a second WorkQueueMetrics on the same registry is refused (make one per registry)', () => {
    const { registry } = setup();
    expect(() => new WorkQueueMetrics(registry)).toThrow();
  });

  test('one per registry through workQueueMetricsFor; a queue shut down with items queued takes them off the depth, so the next term\'s queue of that name starts at 0', async () => {
    const registry = new Registry();
    const metrics = workQueueMetricsFor(registry);
    expect(workQueueMetricsFor(registry)).toBe(metrics);
    const first = new WorkQueue<string>('nodes', { metrics, clock: new FakeClock(1_000), rateLimiter: new ItemExponentialFailureRateLimiter(10, 100) });
    first.add('a');
    first.add('b');
    expect(await sample(registry, 'workqueue_depth', 'nodes')).toBe(2);
    first.shutDown();
    const second = new WorkQueue<string>('nodes', { metrics, clock: new FakeClock(1_000), rateLimiter: new ItemExponentialFailureRateLimiter(10, 100) });
    expect(await sample(registry, 'workqueue_depth', 'nodes')).toBe(0);
    second.add('c');
    expect(await sample(registry, 'workqueue_depth', 'nodes')).toBe(1);
  });

  test('adds_total counts only real adds; depth follows the queue', async () => {
    const { registry, queue } = setup();
    queue.add('a');
    queue.add('b');
    queue.add('a');
    expect(await sample(registry, 'workqueue_adds_total', 'nodes')).toBe(2);
    expect(await sample(registry, 'workqueue_depth', 'nodes')).toBe(2);
    await take(queue);
    expect(await sample(registry, 'workqueue_depth', 'nodes')).toBe(1);
    queue.add('a'); // dirty while processing: an add, and counted in depth until requeued and taken
    expect(await sample(registry, 'workqueue_adds_total', 'nodes')).toBe(3);
    expect(await sample(registry, 'workqueue_depth', 'nodes')).toBe(2);
  });

  test('retries_total counts addAfter and addRateLimited', async () => {
    const { registry, queue } = setup();
    queue.addAfter('a', 50);
    queue.addAfter('b', 0);
    queue.addRateLimited('c');
    expect(await sample(registry, 'workqueue_retries_total', 'nodes')).toBe(3);
    expect(await sample(registry, 'workqueue_adds_total', 'nodes')).toBe(1);
  });

  test('queue and work durations are observed in seconds', async () => {
    const { registry, clock, queue } = setup();
    queue.add('a');
    clock.advance(2_000);
    await take(queue);
    clock.advance(3_000);
    queue.done('a');
    expect(await sample(registry, 'workqueue_queue_duration_seconds', 'nodes', 'workqueue_queue_duration_seconds_sum')).toBe(2);
    expect(await sample(registry, 'workqueue_queue_duration_seconds', 'nodes', 'workqueue_queue_duration_seconds_count')).toBe(1);
    expect(await sample(registry, 'workqueue_work_duration_seconds', 'nodes', 'workqueue_work_duration_seconds_sum')).toBe(3);
  });

  test('unfinished work and longest running processor are measured at scrape time', async () => {
    const { registry, clock, queue } = setup();
    queue.add('a');
    queue.add('b');
    await take(queue);
    clock.advance(4_000);
    await take(queue);
    clock.advance(1_000);
    expect(await sample(registry, 'workqueue_unfinished_work_seconds', 'nodes')).toBe(6);
    expect(await sample(registry, 'workqueue_longest_running_processor_seconds', 'nodes')).toBe(5);

    queue.done('a');
    queue.done('b');
    expect(await sample(registry, 'workqueue_unfinished_work_seconds', 'nodes')).toBe(0);

    // Once shut down with nothing in flight, the queue no longer reports in-flight work.
    queue.shutDown();
    expect(await sample(registry, 'workqueue_unfinished_work_seconds', 'nodes')).toBeUndefined();
  });

  test('queues sharing a registry report separately by name', async () => {
    const { registry, metrics, queue } = setup();
    const services = new WorkQueue<string>('services', { metrics, clock: new FakeClock() });
    queue.add('n1');
    services.add('s1');
    services.add('s2');
    expect(await sample(registry, 'workqueue_adds_total', 'nodes')).toBe(1);
    expect(await sample(registry, 'workqueue_adds_total', 'services')).toBe(2);
    expect(await sample(registry, 'workqueue_unfinished_work_seconds', 'services')).toBe(0);
  });
});
