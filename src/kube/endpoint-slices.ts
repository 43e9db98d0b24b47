import type { V1EndpointSlice } from '@kubernetes/client-node';
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
