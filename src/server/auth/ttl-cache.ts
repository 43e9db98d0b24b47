/**
 * A bounded map whose entries expire, for the authentication and authorization caches. When
 * full, the entry written longest ago goes first: a Map keeps insertion order, so that is its
 * first key.
 */
export class TtlCache<V> {
  private readonly entries = new Map<string, { value: V; expiresAt: number }>();

  constructor(
    private readonly maxEntries: number,
    private readonly now: () => number = () => performance.now(),
  ) {
    if (maxEntries < 1) throw new Error(`cache size must be at least 1, got ${maxEntries}`);
  }

  get(key: string): V | undefined {
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    if (this.now() >= entry.expiresAt) {
      this.entries.delete(key);
      return undefined;
    }
    return entry.value;
  }

  set(key: string, value: V, ttlMs: number): void {
    if (ttlMs <= 0) return; // a TTL of 0 turns caching off, as upstream's
    this.entries.delete(key);
    while (this.entries.size >= this.maxEntries) {
      const oldest = this.entries.keys().next();
      if (oldest.done) break;
      this.entries.delete(oldest.value);
    }
    this.entries.set(key, { value, expiresAt: this.now() + ttlMs });
  }

  get size(): number {
    return this.entries.size;
  }
}

export interface CachedLookupOptions<V> {
  maxEntries: number;
  /** How long an answer is kept, chosen per answer (upstream keeps allows and denies for different times). */
  ttlMs: (value: V) => number;
  /**
   * Answers of different kinds are kept in caches of their own, maxEntries each: a flood of one
   * kind (rejected random tokens) cannot push out the other (the scraper's accepted token).
   */
  kindOf?: (value: V) => string;
  now?: () => number;
}

/**
 * Answers from a TtlCache, loading a missing key once however many callers ask for it at the
 * same time (a burst of scrapes with one token makes one TokenReview). Failed loads are not
 * cached, so an API server hiccup is retried by the next request, as upstream does.
 */
export class CachedLookup<V> {
  private readonly caches = new Map<string, TtlCache<V>>();
  private readonly inFlight = new Map<string, Promise<V>>();

  constructor(private readonly options: CachedLookupOptions<V>) {}

  get(key: string, load: () => Promise<V>): Promise<V> {
    for (const cache of this.caches.values()) {
      const cached = cache.get(key);
      if (cached !== undefined) return Promise.resolve(cached);
    }
    let pending = this.inFlight.get(key);
    if (!pending) {
      pending = load()
        .then((value) => {
          this.cacheFor(value).set(key, value, this.options.ttlMs(value));
          return value;
        })
        .finally(() => this.inFlight.delete(key));
      this.inFlight.set(key, pending);
    }
    return pending;
  }

  get size(): number {
    let n = 0;
    for (const cache of this.caches.values()) n += cache.size;
    return n;
  }

  private cacheFor(value: V): TtlCache<V> {
    const kind = this.options.kindOf?.(value) ?? '';
    let cache = this.caches.get(kind);
    if (!cache) this.caches.set(kind, (cache = new TtlCache(this.options.maxEntries, this.options.now)));
    return cache;
  }
}

export interface YesNoCacheOptions {
  /** Entries kept at most (per kind, when the kinds are kept apart); 4096 by default. */
  maxEntries?: number;
  now?: () => number;
}

/**
 * A CachedLookup for yes/no answers, as upstream's webhook caches keep them: a yes for `yesMs`,
 * a no for `noMs` (10 s each unless given). `apart`: yes and no answers in caches of their own.
 */
export function yesNoLookup<V>(isYes: (value: V) => boolean, ttl: { yesMs?: number; noMs?: number }, options: YesNoCacheOptions & { apart?: boolean }): CachedLookup<V> {
  const yesMs = ttl.yesMs ?? 10_000;
  const noMs = ttl.noMs ?? 10_000;
  return new CachedLookup<V>({
    maxEntries: options.maxEntries ?? 4096,
    ttlMs: (value) => (isYes(value) ? yesMs : noMs),
    ...(options.apart ? { kindOf: (value: V) => (isYes(value) ? 'yes' : 'no') } : {}),
    now: options.now,
  });
}
