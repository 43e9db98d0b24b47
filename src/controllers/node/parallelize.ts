/**
 * Runs `work` for every index in [0, pieces) with at most `workers` running at once, and stops
 * handing out new pieces once the signal is aborted (client-go's workqueue.ParallelizeUntil).
 */
export async function parallelizeUntil(
  signal: AbortSignal | undefined,
  workers: number,
  pieces: number,
  work: (piece: number) => Promise<void>,
): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < pieces && !signal?.aborted) await work(next++);
  };
  const count = Math.max(1, Math.min(workers, pieces));
  await Promise.all(Array.from({ length: count }, worker));
}
