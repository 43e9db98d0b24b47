// prom-client's default process metrics, one module each (prom-client 15.1.3, lib/metrics/): each
// registers its metrics on a registry. Imported one by one to leave out the event-loop histogram
// (src/app/metrics.ts); prom-client's index.d.ts does not declare them.
declare module 'prom-client/lib/metrics/*.js' {
  import type { Registry } from 'prom-client';
  const register: (registry: Registry, config: { prefix?: string; labels?: Record<string, string> }) => void;
  export default register;
}
