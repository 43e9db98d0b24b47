import { describe, expect, test } from 'bun:test';
import { FakeClock } from '../../../test/fakes/fake-clock.ts';
import { processNextItem } from './process.ts';
import { WorkQueue, type GetResult } from './queue.ts';
import { ItemExponentialFailureRateLimiter } from './rate-limiters.ts';

/** Lets pending promise callbacks run. */
const settle = () => new Promise<void>((resolve) => setTimeout(resolve, 0));

/** Tracks whether a promise has settled, so tests can assert that a get() or drain is still waiting. */
function track<T>(promise: Promise<T>): { settled: () => boolean; value: Promise<T> } {
  let settled = false;
  void promise.then(() => (settled = true));
  return { settled: () => settled, value: promise };
}

async function getItem<K>(queue: WorkQueue<K>): Promise<K> {
  const result = await queue.get();
  if (result.shutdown) throw new Error('queue unexpectedly shut down');
  return result.item;
}

function fakeQueue(clock = new FakeClock()): { queue: WorkQueue<string>; clock: FakeClock } {
  return { queue: new WorkQueue<string>('test', { clock, rateLimiter: new ItemExponentialFailureRateLimiter(100, 1000) }), clock };
}

describe('WorkQueue basics', () => {
  test('an item added while queued is queued once, in FIFO order', async () => {
    const { queue } = fakeQueue();
    queue.add('a');
    queue.add('b');
    queue.add('a');
    expect(queue.len()).toBe(2);
    expect(await getItem(queue)).toBe('a');
    expect(await getItem(queue)).toBe('b');
    expect(queue.len()).toBe(0);
  });

  test('an item added while processing is requeued on done, never handed out twice at once', async () => {
    const { queue } = fakeQueue();
    queue.add('a');
    expect(await getItem(queue)).toBe('a');
    queue.add('a');
    queue.add('a');
    expect(queue.len()).toBe(0);

    const second = track(queue.get());
    await settle();
    expect(second.settled()).toBe(false);

    queue.done('a');
    expect(await second.value).toEqual({ item: 'a', shutdown: false });
    queue.done('a');
    expect(queue.len()).toBe(0);
  });

  test('other items are served while a dirty item is still processing', async () => {
    const { queue } = fakeQueue();
    queue.add('a');
    expect(await getItem(queue)).toBe('a');
    queue.add('a');
    queue.add('b');
    expect(await getItem(queue)).toBe('b');
    queue.done('b');
    expect(queue.len()).toBe(0);
    queue.done('a');
    expect(queue.len()).toBe(1);
    expect(await getItem(queue)).toBe('a');
  });

  test('done for an item that is not processing changes nothing', () => {
    const { queue } = fakeQueue();
    queue.add('a');
    queue.done('a');
    expect(queue.len()).toBe(1);
  });

  test('concurrent get() waiters are each given a different item, first come first served', async () => {
    const { queue } = fakeQueue();
    const waiters = [queue.get(), queue.get(), queue.get()];
    queue.add('x');
    queue.add('y');
    queue.add('x');
    queue.add('z');
    const results = await Promise.all(waiters);
    expect(results).toEqual([
      { item: 'x', shutdown: false },
      { item: 'y', shutdown: false },
      { item: 'z', shutdown: false },
    ]);
    expect(queue.len()).toBe(0);
  });
});

describe('WorkQueue.addAfter', () => {
  test('items become ready in time order; equal times keep arrival order', async () => {
    const { queue, clock } = fakeQueue();
    queue.addAfter('c', 300);
    queue.addAfter('a', 100);
    queue.addAfter('b', 200);
    queue.addAfter('b2', 200);
    expect(queue.len()).toBe(0);

    clock.advance(99);
    expect(queue.len()).toBe(0);
    clock.advance(1);
    expect(queue.len()).toBe(1);
    clock.advance(150);
    expect(queue.len()).toBe(3);
    clock.advance(50);
    expect(queue.len()).toBe(4);
    expect(await Promise.all([getItem(queue), getItem(queue), getItem(queue), getItem(queue)])).toEqual(['a', 'b', 'b2', 'c']);
    expect(clock.pendingTimers).toBe(0);
  });

  test('a later addAfter for a waiting item keeps the earlier time', () => {
    const { queue, clock } = fakeQueue();
    queue.addAfter('early', 100);
    queue.addAfter('early', 500);
    queue.addAfter('late', 500);
    queue.addAfter('late', 100);

    clock.advance(100);
    expect(queue.len()).toBe(2);
    // Each waited once: nothing more arrives at the later time.
    clock.advance(1000);
    expect(queue.len()).toBe(2);
    expect(clock.pendingTimers).toBe(0);
  });

  test('a zero or negative delay adds at once', () => {
    const { queue } = fakeQueue();
    queue.addAfter('zero', 0);
    queue.addAfter('negative', -5);
    expect(queue.len()).toBe(2);
  });

  test('a delayed item wakes a waiting worker with the real clock', async () => {
    const queue = new WorkQueue<string>('real');
    const waiter = queue.get();
    queue.addAfter('soon', 20);
    expect(await waiter).toEqual({ item: 'soon', shutdown: false });
    queue.shutDown();
  });
});

describe('WorkQueue rate limiting', () => {
  test('addRateLimited waits the limiter delay; numRequeues counts and forget resets', () => {
    const { queue, clock } = fakeQueue();
    queue.addRateLimited('a');
    expect(queue.numRequeues('a')).toBe(1);
    clock.advance(99);
    expect(queue.len()).toBe(0);
    clock.advance(1);
    expect(queue.len()).toBe(1);

    queue.addRateLimited('b');
    queue.addRateLimited('b');
    expect(queue.numRequeues('b')).toBe(2);
    // The second failure doubles the wait (200ms), but 'b' already waits until 100ms from now.
    clock.advance(100);
    expect(queue.len()).toBe(2);

    queue.forget('b');
    expect(queue.numRequeues('b')).toBe(0);
  });

  test('processNextItem forgets on success and requeues with backoff on failure', async () => {
    const { queue, clock } = fakeQueue();
    const errors: unknown[] = [];
    let fail = true;
    const sync = async (item: string) => {
      if (fail) throw new Error(`cannot sync ${item}`);
    };

    queue.add('a');
    expect(await processNextItem(queue, sync, (_item, error) => errors.push(error))).toBe(true);
    expect(errors).toHaveLength(1);
    expect(queue.numRequeues('a')).toBe(1);
    expect(queue.len()).toBe(0);
    clock.advance(100);
    expect(queue.len()).toBe(1);

    fail = false;
    expect(await processNextItem(queue, sync)).toBe(true);
    expect(queue.numRequeues('a')).toBe(0);
    expect(queue.len()).toBe(0);

    queue.shutDown();
    expect(await processNextItem(queue, sync)).toBe(false);
  });
});

describe('WorkQueue shutdown', () => {
  test('shutDown wakes every waiting worker with shutdown', async () => {
    const { queue } = fakeQueue();
    const waiters = [queue.get(), queue.get()];
    queue.shutDown();
    expect(await Promise.all(waiters)).toEqual([{ shutdown: true }, { shutdown: true }]);
    expect(queue.shuttingDown()).toBe(true);
  });

  test('after shutDown, queued items are still handed out, then shutdown; new adds are ignored', async () => {
    const { queue } = fakeQueue();
    queue.add('queued');
    queue.shutDown();
    queue.add('late');
    queue.addAfter('late', 0);
    queue.addRateLimited('late');
    expect(queue.numRequeues('late')).toBe(0);
    expect(await getItem(queue)).toBe('queued');
    expect(await queue.get()).toEqual({ shutdown: true } satisfies GetResult<string>);
  });

  test('shutDown drops waiting items and clears the timer', () => {
    const { queue, clock } = fakeQueue();
    queue.addAfter('a', 100);
    expect(clock.pendingTimers).toBe(1);
    queue.shutDown();
    expect(clock.pendingTimers).toBe(0);
    queue.addAfter('b', 100);
    expect(clock.pendingTimers).toBe(0);
    clock.advance(1000);
    expect(queue.len()).toBe(0);
  });

  test('shutDownWithDrain resolves only when every in-flight item is done', async () => {
    const { queue } = fakeQueue();
    queue.add('a');
    queue.add('b');
    expect(await getItem(queue)).toBe('a');
    expect(await getItem(queue)).toBe('b');

    const drain = track(queue.shutDownWithDrain());
    expect(queue.shuttingDown()).toBe(true);
    await settle();
    expect(drain.settled()).toBe(false);
    queue.done('a');
    await settle();
    expect(drain.settled()).toBe(false);
    queue.done('b');
    await drain.value;
    expect(drain.settled()).toBe(true);
  });

  test('shutDownWithDrain resolves at once when nothing is in flight', async () => {
    const { queue } = fakeQueue();
    await queue.shutDownWithDrain();
    expect(await queue.get()).toEqual({ shutdown: true });
  });

  test('shutDown cuts a pending drain short', async () => {
    const { queue } = fakeQueue();
    queue.add('stuck');
    await getItem(queue);
    const drain = track(queue.shutDownWithDrain());
    await settle();
    expect(drain.settled()).toBe(false); // 'stuck' is still in flight
    queue.shutDown();
    await settle();
    // Resolved without 'stuck' ever being done.
    expect(drain.settled()).toBe(true);
  });
});
