import type { V1Deployment, V1Pod, V1Service } from '@kubernetes/client-node';
import type { KubeTransport } from '../../src/kube/transport.ts';
import { ADDRESS_POOL_ANNOTATION } from '../../src/lb/requests.ts';
import { eventually } from './eventually.ts';
import { HTTP_ECHO_IMAGE } from './real-cluster.ts';

/**
 * The real cluster's workload: a Deployment of http-echo (test/images/http-echo, answering
 * "<pod name> <client address>") behind a LoadBalancer Service, made through the API as a user
 * would with kubectl apply.
 */

export const ECHO_PORT = 8080;
export const SERVICE_PORT = 80;

const path = (ns: string, kind: 'deployments' | 'services' | 'pods', name = '') =>
  `${kind === 'deployments' ? '/apis/apps/v1' : '/api/v1'}/namespaces/${ns}/${kind}${name ? `/${name}` : ''}`;

export async function createNamespace(api: KubeTransport, ns: string): Promise<void> {
  await api.request({ method: 'POST', path: '/api/v1/namespaces', body: { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } } });
}

/** `onePerNode`: no two of its pods on one node (a required anti-affinity), so each node serves the Deployment. */
export async function deployEcho(api: KubeTransport, ns: string, name: string, replicas: number, opts: { onePerNode?: boolean } = {}): Promise<void> {
  const labels = { app: name };
  const deployment: V1Deployment = {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name, namespace: ns },
    spec: {
      replicas,
      selector: { matchLabels: labels },
      template: {
        metadata: { labels },
        spec: {
          terminationGracePeriodSeconds: 2,
          ...(opts.onePerNode ? { affinity: { podAntiAffinity: { requiredDuringSchedulingIgnoredDuringExecution: [{ labelSelector: { matchLabels: labels }, topologyKey: 'kubernetes.io/hostname' }] } } } : {}),
          containers: [{
            name: 'echo',
            image: HTTP_ECHO_IMAGE,
            // No registry is reachable: the image was imported on every node.
            imagePullPolicy: 'Never',
            env: [{ name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } }],
            ports: [{ containerPort: ECHO_PORT }],
            readinessProbe: { httpGet: { path: '/', port: ECHO_PORT }, periodSeconds: 1 },
          }],
        },
      },
    },
  };
  await api.request({ method: 'POST', path: path(ns, 'deployments'), body: deployment });
}

export async function scaleEcho(api: KubeTransport, ns: string, name: string, replicas: number): Promise<void> {
  await api.request({ method: 'PATCH', path: path(ns, 'deployments', name), body: { spec: { replicas } }, contentType: 'application/merge-patch+json' });
}

/** `app` names the pods it selects (default: the service's own name); `pool` the address pool to take from. */
export async function createLoadBalancer(api: KubeTransport, ns: string, name: string, opts: { local?: boolean; pool?: string; app?: string } = {}): Promise<void> {
  const service: V1Service = {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name, namespace: ns, ...(opts.pool ? { annotations: { [ADDRESS_POOL_ANNOTATION]: opts.pool } } : {}) },
    spec: {
      type: 'LoadBalancer',
      selector: { app: opts.app ?? name },
      ports: [{ port: SERVICE_PORT, targetPort: ECHO_PORT, protocol: 'TCP' }],
      ...(opts.local ? { externalTrafficPolicy: 'Local' } : {}),
    },
  };
  await api.request({ method: 'POST', path: path(ns, 'services'), body: service });
}

/** The Service's load-balancer address, once edge-ccm has set one. */
export function loadBalancerAddress(api: KubeTransport, ns: string, name: string, explain: () => string): Promise<string> {
  return eventually(`service ${ns}/${name} given a load-balancer address`, async () => {
    const s = await api.request<V1Service>({ method: 'GET', path: path(ns, 'services', name) });
    return s.status?.loadBalancer?.ingress?.[0]?.ip;
  }, { timeoutMs: 60_000, explain });
}

/** The Deployment's pods that are Ready, by name -> node. */
export async function readyPods(api: KubeTransport, ns: string, name: string): Promise<Map<string, string>> {
  const list = await api.request<{ items: V1Pod[] }>({ method: 'GET', path: path(ns, 'pods'), query: { labelSelector: `app=${name}` } });
  const ready = list.items.filter((p) => !p.metadata?.deletionTimestamp && p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'));
  return new Map(ready.map((p) => [p.metadata!.name!, p.spec!.nodeName!]));
}

/** Waits until exactly `replicas` pods are Ready; returns them (name -> node). */
export function podsReady(api: KubeTransport, ns: string, name: string, replicas: number, explain: () => string): Promise<Map<string, string>> {
  return eventually(`${replicas} pods of ${ns}/${name} Ready`, async () => {
    const pods = await readyPods(api, ns, name);
    return pods.size === replicas ? pods : undefined;
  }, { timeoutMs: 120_000, intervalMs: 250, explain });
}
