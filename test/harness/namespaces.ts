import type { V1Namespace, V1Service } from '@kubernetes/client-node';
import { ResourceClient, SERVICES, type ResourceType } from '../../src/kube/resources.ts';
import type { KubeTransport } from '../../src/kube/transport.ts';

/** Namespaces: edge-ccm itself never reads them, the tests make one each to keep their services apart. */
export const NAMESPACES: ResourceType = { apiPath: '/api/v1', plural: 'namespaces', namespaced: false };

export async function createNamespace(api: KubeTransport, name: string): Promise<void> {
  await new ResourceClient<V1Namespace>(api, NAMESPACES).create({ metadata: { name } });
}

/**
 * Deletes a test's namespace, best effort, and its services first: each without the clean-up
 * finalizer, which no controller is left to remove once the test's edge-ccm has stopped. The
 * harness runs no namespace controller, so a deleted namespace stays Terminating with whatever
 * it holds; services left there would be synced (and fail, their events refused) by the edge-ccm
 * of every later test on the shared control plane.
 */
export async function deleteNamespace(api: KubeTransport, name: string): Promise<void> {
  const services = new ResourceClient<V1Service>(api, SERVICES);
  for (const s of (await services.list({ namespace: name }).catch(() => ({ items: [] as V1Service[] }))).items) {
    await services.patch(s.metadata!.name!, 'merge', { metadata: { finalizers: null } }, { namespace: name }).catch(() => undefined);
    await services.delete(s.metadata!.name!, { namespace: name }).catch(() => undefined);
  }
  await new ResourceClient<V1Namespace>(api, NAMESPACES).delete(name).catch(() => undefined);
}
