import type { WorkQueue } from './queue.ts';

/**
 * One turn of the usual controller worker loop: takes an item, syncs it, forgets its backoff on
 * success or requeues it rate-limited on failure (after telling onError), and marks it done.
 * Returns false once the queue is shut down and empty, so a worker runs `while (await processNextItem(...))`.
 */
export async function processNextItem<K>(
  queue: WorkQueue<K>,
  sync: (item: K) => Promise<void>,
  onError?: (item: K, error: unknown) => void,
): Promise<boolean> {
  const next = await queue.get();
  if (next.shutdown) return false;
  try {
    await sync(next.item);
    queue.forget(next.item);
  } catch (error) {
    onError?.(next.item, error);
    queue.addRateLimited(next.item);
  } finally {
    queue.done(next.item);
  }
  return true;
}
