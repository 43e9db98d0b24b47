import type { V1EndpointSlice } from '@kubernetes/client-node';
import { Informer, stripManagedFields, type InformerOptions } from './informer/index.ts';
import type { ResourceType } from './resources.ts';

/** EndpointSlices (discovery.k8s.io/v1): which nodes run a ready endpoint of a service. */

export const ENDPOINT_SLICES: ResourceType = { apiPath: '/apis/discovery.k8s.io/v1', plural: 'endpointslices', namespaced: true };

/** The label an EndpointSlice carries naming its service. */
export const SERVICE_NAME_LABEL = 'kubernetes.io/service-name';

/** namespace/name of a service -> the nodes with a ready endpoint of it. */
export function readyEndpointNodes(slices: readonly V1EndpointSlice[]): Map<string, Set<string>> {
  const out = new Map<string, Set<string>>();
  for (const slice of slices) {
    const service = slice.metadata?.labels?.[SERVICE_NAME_LABEL];
    if (!service) continue;
    const key = `${slice.metadata?.namespace ?? ''}/${service}`;
    const nodes = out.get(key) ?? new Set<string>();
    // EndpointSlice semantics: an unset ready condition means ready.
    for (const endpoint of slice.endpoints ?? []) if (endpoint.nodeName && endpoint.conditions?.ready !== false) nodes.add(endpoint.nodeName);
    out.set(key, nodes);
  }
  return out;
}

/**
 * The one EndpointSlice informer of a leadership term, shared by everyone who needs the nodes
 * with a ready endpoint of a service (the BGP announcer, the service controller for node-address
 * pools with externalTrafficPolicy: Local). Nothing is watched until someone asks (want()):
 * a cluster that needs neither never lists its EndpointSlices.
 */
export class EndpointNodes {
  readonly informer: Informer<V1EndpointSlice>;
  private wanted = false;
  private wake?: () => void;
  /** The ready nodes last told per service, so a listener hears only of changed sets. */
  private readonly told = new Map<string, string>();
  private readonly listeners = new Set<(service: string) => void>();

  constructor(opts: Pick<InformerOptions<V1EndpointSlice>, 'transport' | 'logger' | 'retryWait'>) {
    this.informer = new Informer<V1EndpointSlice>({ ...opts, type: ENDPOINT_SLICES, transform: stripManagedFields });
    this.informer.store.addIndexer(BY_SERVICE, (slice) => {
      const service = slice.metadata?.labels?.[SERVICE_NAME_LABEL];
      return service ? [`${slice.metadata?.namespace ?? ''}/${service}`] : [];
    });
    const changed = (slice: V1EndpointSlice) => this.changed(slice);
    this.informer.addHandlers({ onAdd: changed, onUpdate: (_old, slice) => changed(slice), onDelete: changed });
  }

  /** Starts the watch, if it is not running yet. */
  want(): void {
    this.wanted = true;
    this.wake?.();
  }

  /** Runs the informer for the term once someone wants it; resolves when the signal aborts. */
  async run(signal: AbortSignal): Promise<void> {
    if (!this.wanted) {
      await new Promise<void>((resolve) => {
        this.wake = resolve;
        signal.addEventListener('abort', () => resolve(), { once: true });
      });
      this.wake = undefined;
    }
    if (!signal.aborted) await this.informer.run(signal);
  }

  hasSynced(): boolean {
    return this.informer.hasSynced();
  }

  /** The nodes with a ready endpoint of the service (namespace/name). */
  nodesOf(service: string): Set<string> {
    return readyEndpointNodes(this.informer.store.byIndex(BY_SERVICE, service)).get(service) ?? new Set();
  }

  /** Every service's nodes with a ready endpoint. */
  all(): Map<string, Set<string>> {
    return readyEndpointNodes(this.informer.store.list());
  }

  /** `listener` hears the namespace/name of each service whose set of ready endpoint nodes changed. Returns the unsubscribe function. */
  onServiceChange(listener: (service: string) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private changed(slice: V1EndpointSlice): void {
    const name = slice.metadata?.labels?.[SERVICE_NAME_LABEL];
    if (!name) return;
    const service = `${slice.metadata?.namespace ?? ''}/${name}`;
    const nodes = [...this.nodesOf(service)].sort().join(',');
    if (this.told.get(service) === nodes) return;
    if (nodes) this.told.set(service, nodes);
    else this.told.delete(service);
    for (const listener of this.listeners) listener(service);
  }
}

const BY_SERVICE = 'service';
