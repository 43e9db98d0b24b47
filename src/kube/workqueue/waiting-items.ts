interface Waiting<K> {
  item: K;
  readyAt: number;
  seq: number;
}

/**
 * Items waiting for their time to be added to the queue, kept sorted by ready time (then by
 * arrival). An item waits at most once: adding it again keeps whichever time is earlier.
 */
export class WaitingItems<K> {
  private sorted: Waiting<K>[] = [];
  private readonly known = new Map<K, Waiting<K>>();
  private seq = 0;

  get size(): number {
    return this.sorted.length;
  }

  add(item: K, readyAt: number): void {
    const existing = this.known.get(item);
    if (existing) {
      if (readyAt >= existing.readyAt) return;
      this.sorted.splice(this.sorted.indexOf(existing), 1);
    }
    const entry: Waiting<K> = { item, readyAt, seq: this.seq++ };
    this.known.set(item, entry);
    this.sorted.splice(this.insertionIndex(entry), 0, entry);
  }

  /** The earliest ready time, if anything is waiting. */
  nextReadyAt(): number | undefined {
    return this.sorted[0]?.readyAt;
  }

  /** Removes and returns the items whose time has come, earliest first. */
  takeReady(now: number): K[] {
    let count = 0;
    while (count < this.sorted.length && this.sorted[count]!.readyAt <= now) count++;
    const ready = this.sorted.splice(0, count);
    for (const entry of ready) this.known.delete(entry.item);
    return ready.map((entry) => entry.item);
  }

  clear(): void {
    this.sorted = [];
    this.known.clear();
  }

  private insertionIndex(entry: Waiting<K>): number {
    let lo = 0;
    let hi = this.sorted.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      const other = this.sorted[mid]!;
      if (other.readyAt < entry.readyAt || (other.readyAt === entry.readyAt && other.seq < entry.seq)) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }
}
