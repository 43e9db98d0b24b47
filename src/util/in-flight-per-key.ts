/**
 * Counts what is in flight per key and refuses a key that already has `max` in flight, so that
 * no single key can take the whole of a shared budget.
 */
export class InFlightPerKey {
  private readonly counts = new Map<string, number>();

  constructor(readonly max: number) {
    if (!(max >= 1)) throw new RangeError(`the limit per key must be at least 1, got ${max}`);
  }

  /** Counts one more for `key`; false (nothing counted) when it already has `max`. */
  tryAcquire(key: string): boolean {
    const n = this.counts.get(key) ?? 0;
    if (n >= this.max) return false;
    this.counts.set(key, n + 1);
    return true;
  }

  release(key: string): void {
    const n = this.counts.get(key) ?? 0;
    // Keys at zero are dropped: the map holds only keys with something in flight.
    if (n <= 1) this.counts.delete(key);
    else this.counts.set(key, n - 1);
  }
}
