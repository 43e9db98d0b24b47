export { WorkQueueMetrics, workQueueMetricsFor, type QueueMetrics } from './metrics.ts';
export { processNextItem } from './process.ts';
export { WorkQueue, type GetResult, type WorkQueueOptions } from './queue.ts';
export {
  BucketRateLimiter,
  ItemExponentialFailureRateLimiter,
  MaxOfRateLimiter,
  defaultControllerRateLimiter,
  type RateLimiter,
} from './rate-limiters.ts';
