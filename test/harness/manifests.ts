import { parseAllDocuments } from 'yaml';
import type { KubeTransport } from '../../src/kube/transport.ts';

/** Kinds the project's manifests use that are not namespaced. */
const CLUSTER_SCOPED = new Set(['Namespace', 'Node', 'ClusterRole', 'ClusterRoleBinding', 'PersistentVolume', 'ValidatingAdmissionPolicy', 'ValidatingAdmissionPolicyBinding', 'CustomResourceDefinition']);

export interface ManifestObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string };
  [k: string]: unknown;
}

export function parseManifests(text: string): ManifestObject[] {
  return parseAllDocuments(text)
    .map((d) => d.toJS() as ManifestObject | null)
    .filter((o): o is ManifestObject => !!o && typeof o === 'object' && !!o.kind);
}

export function objectPath(obj: ManifestObject): string {
  const base = obj.apiVersion.includes('/') ? `/apis/${obj.apiVersion}` : `/api/${obj.apiVersion}`;
  const kind = obj.kind.toLowerCase();
  const plural = kind.endsWith('s') ? `${kind}es` : /[^aeiou]y$/.test(kind) ? `${kind.slice(0, -1)}ies` : `${kind}s`;
  const ns = CLUSTER_SCOPED.has(obj.kind) ? '' : `/namespaces/${obj.metadata.namespace ?? 'default'}`;
  return `${base}${ns}/${plural}/${obj.metadata.name}`;
}

/** Server-side applies every object, as `kubectl apply --server-side` would. */
export async function applyManifests(transport: KubeTransport, text: string): Promise<ManifestObject[]> {
  const objects = parseManifests(text);
  for (const obj of objects) {
    await transport.request({
      method: 'PATCH',
      path: objectPath(obj),
      query: { fieldManager: 'edge-ccm-tests', force: true },
      body: obj,
      contentType: 'application/apply-patch+yaml',
    });
  }
  return objects;
}
