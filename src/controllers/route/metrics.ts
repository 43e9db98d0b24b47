import { Counter } from '../../util/prom.ts';
import { perRegistry } from '../../util/per-registry.ts';

/** The route controller's metric, with upstream's name: one count per reconciliation round. */
export const routeSyncTotal = perRegistry((registry) => new Counter({
  name: 'route_controller_route_sync_total',
  help: 'A metric counting the amount of times routes have been synced with the cloud provider.',
  registers: [registry],
}));
