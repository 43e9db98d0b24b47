import type { Registry } from 'prom-client';

/**
 * The one way a module's metrics are made: once per registry, on first use, then shared (a
 * registry refuses a name registered twice, and a second controller or elector on the same
 * registry reports into the same series). `build` registers them on the registry it is given.
 */
export function perRegistry<T>(build: (registry: Registry) => T): (registry: Registry) => T {
  const made = new WeakMap<Registry, T>();
  return (registry) => {
    let metrics = made.get(registry);
    if (metrics === undefined) made.set(registry, (metrics = build(registry)));
    return metrics;
  };
}
