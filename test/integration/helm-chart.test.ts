import { afterAll, afterEach, beforeAll, describe, expect, test } from 'bun:test';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { V1ConfigMap, V1Container, V1DaemonSet, V1Deployment, V1Node, V1PodSpec, V1Secret, V1Service } from '@kubernetes/client-node';
import { parse as parseYaml } from 'yaml';
import { KUBE_VIP_ANNOTATION } from '../../src/controllers/service/index.ts';
import { isNotFound } from '../../src/kube/errors.ts';
import { NODES, ResourceClient, SERVICES } from '../../src/kube/resources.ts';
import type { BunKubeTransport } from '../../src/kube/transport.ts';
import { parseArgs } from '../../src/options/index.ts';
import { processSecrets } from '../../src/config-file/secrets.ts';
import { DEFAULT_LXD_SOCKET, loadLxdConfig } from '../../providers/lxd/index.ts';
import { MANIFESTS, MANIFESTS_DIR, renderManifest, rulesForChart } from '../../scripts/gen-manifests.ts';
import { readAuditLog } from '../harness/audit.ts';
import { CcmProcess, tempDir } from '../harness/ccm-process.ts';
import { kubeletArgs } from '../harness/container-args.ts';
import { startControlPlane, type ControlPlane } from '../harness/control-plane.ts';
import { eventually } from '../harness/eventually.ts';
import { CHART_DIR, helmTemplate, runHelm, valuesFile } from '../harness/helm.ts';
import { transportFor, writeKubeconfig } from '../harness/kubeconfig.ts';
import { applyManifests, objectPath, parseManifests, type ManifestObject } from '../harness/manifests.ts';
import { UNINITIALIZED } from '../harness/nodes.ts';
import { freeLoopbackPorts } from '../harness/ports.ts';

/**
 * The Helm chart deploy/helm/edge-ccm: `helm lint`; `helm template` for a matrix of values, each
 * output applied to a real kube-apiserver (server-side apply, the Prometheus Operator's kinds
 * under minimal CRDs) and every object read back; values that cannot work refused with a message
 * naming the value; deploy/kubernetes equal to a fresh render; and `helm install` / `helm
 * upgrade` / `helm uninstall` against the API server, with the compiled edge-ccm run as the
 * installed pod would (its args, its service account, its ConfigMap and Secret as read back):
 * a node initialised, a service given an address, the kube-vip annotation after the upgrade; the
 * compiled speaker run as its pod would, through its config load (announceFrom: nodes, a peer's
 * passwordFile from speaker.credentials). (rbac.test.ts runs its least-privilege scenario under
 * the chart's RBAC too.)
 */
const ROOT = resolve(import.meta.dir, '../..');
const RULES = parseYaml(readFileSync(join(ROOT, 'docs/observability/edge-ccm.rules.yaml'), 'utf8')) as { groups: { name: string }[] };
const INVENTORY = readFileSync(join(ROOT, 'examples/inventory.yaml'), 'utf8');
/**
 * A config whose nodes announce the load-balancer addresses themselves: every node's speaker then
 * reads the bgp section, its peer's TCP-MD5 passwordFile included.
 */
const NODES_BGP_CONFIG = [
  'loadBalancer:',
  '  pools:',
  '    - { name: routed, addresses: [203.0.113.80/29], announce: bgp }',
  'bgp:',
  '  localASN: 64512',
  '  routerID: 198.51.100.2',
  '  peers:',
  '    - { address: 198.51.100.1, asn: 65000, passwordFile: "${CREDENTIALS_DIRECTORY}/bgp-router-1" }',
  '  loadBalancers: { announceFrom: nodes }',
  '',
].join('\n');
/** The address the kubelet gives $(POD_IP) in these tests. */
const POD_IP = '198.51.100.7';

let cp: ControlPlane;
let admin: BunKubeTransport;

beforeAll(async () => {
  cp = await startControlPlane();
  admin = transportFor(cp.adminKubeconfig);
  await installMonitoringCrds();
}, 240_000);

afterEach(() => CcmProcess.stopAll());
afterAll(() => cp?.stop());

/**
 * The Prometheus Operator's three kinds the chart makes, as CRDs that accept any spec: the test
 * API server has no operator, and these let the chart's objects be applied and read back like
 * the rest (their fields are checked by the assertions below instead of the operator's schema).
 */
async function installMonitoringCrds(): Promise<void> {
  for (const kind of ['PodMonitor', 'ServiceMonitor', 'PrometheusRule']) {
    const plural = `${kind.toLowerCase()}s`;
    await applyManifests(admin, JSON.stringify({
      apiVersion: 'apiextensions.k8s.io/v1',
      kind: 'CustomResourceDefinition',
      metadata: { name: `${plural}.monitoring.coreos.com` },
      spec: {
        group: 'monitoring.coreos.com',
        scope: 'Namespaced',
        names: { kind, plural, singular: kind.toLowerCase(), listKind: `${kind}List` },
        versions: [{ name: 'v1', served: true, storage: true, schema: { openAPIV3Schema: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } } }],
      },
    }));
    await eventually(`CRD ${plural} established`, async () => {
      const crd = await admin.request<{ status?: { conditions?: { type: string; status: string }[] } }>({
        method: 'GET', path: `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${plural}.monitoring.coreos.com`,
      });
      return crd.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True');
    });
  }
}

type Obj = ManifestObject & Record<string, unknown>;

function find(objects: Obj[], kind: string, name?: string): Obj | undefined {
  return objects.find((o) => o.kind === kind && (name === undefined || o.metadata.name === name));
}

function must(objects: Obj[], kind: string, name?: string): Obj {
  const o = find(objects, kind, name);
  if (!o) throw new Error(`no ${kind}${name ? ` ${name}` : ''} among ${objects.map((x) => `${x.kind}/${x.metadata.name}`).join(', ')}`);
  return o;
}

function podSpec(workload: Obj): V1PodSpec {
  const spec = (workload as unknown as V1Deployment | V1DaemonSet).spec?.template.spec;
  if (!spec) throw new Error(`${workload.kind} has no pod template`);
  return spec;
}

function container(workload: Obj, name: string): V1Container {
  const c = podSpec(workload).containers.find((x) => x.name === name);
  if (!c) throw new Error(`no ${name} container in ${workload.kind} ${workload.metadata.name}`);
  return c;
}

function edgeCcm(workload: Obj): V1Container {
  return container(workload, 'edge-ccm');
}

/** edge-ccm's options as the container would start: $(POD_IP) expanded as the kubelet does. */
function containerOptions(workload: Obj) {
  return parseArgs(kubeletArgs(edgeCcm(workload), { 'status.podIP': POD_IP })).options;
}

/**
 * A container of a pod the API server stores, as a local process runs it: its args as the kubelet
 * expands them (`fields` gives the downward-API values), its volumes laid out under a temp dir
 * from the stored ConfigMaps and Secrets as the kubelet would (a Secret volume's `items` only
 * when it lists them, a listed key missing refused unless the volume is optional, files in the
 * volume's mode), and the mount paths in its args and env values moved into that dir.
 */
async function asLocalProcess(pod: V1PodSpec, container: V1Container, namespace: string, fields: Record<string, string>): Promise<{ dir: string; args: string[]; env: Record<string, string> }> {
  const dir = tempDir('edge-ccm-helm-pod-');
  const get = <T>(kind: string, name: string) => admin.request<T>({ method: 'GET', path: objectPath({ apiVersion: 'v1', kind, metadata: { name, namespace } }) });
  const args = kubeletArgs(container, fields).map((arg) => {
    // Every path of the mount: --cloud-config=static=/etc/edge-ccm/...,proxmox=/etc/edge-ccm/... names two.
    for (const m of container.volumeMounts ?? []) arg = arg.replaceAll(`=${m.mountPath}/`, `=${dir}${m.mountPath}/`);
    return arg;
  });
  const env: Record<string, string> = {};
  for (const e of container.env ?? []) {
    const value = e.value ?? fields[e.valueFrom?.fieldRef?.fieldPath ?? ''];
    if (value !== undefined) env[e.name] = value;
  }
  for (const m of container.volumeMounts ?? []) {
    const volume = pod.volumes?.find((v) => v.name === m.name);
    const at = join(dir, m.mountPath);
    mkdirSync(at, { recursive: true });
    if (volume?.configMap) {
      const cm = await get<V1ConfigMap>('ConfigMap', volume.configMap.name as string);
      for (const [k, v] of Object.entries(cm.data ?? {})) writeFileSync(join(at, k), v);
    }
    if (volume?.secret) {
      const { secretName, items, defaultMode, optional } = volume.secret;
      // An optional volume's Secret may not exist: the kubelet starts the pod without it.
      const data = (await get<V1Secret>('Secret', secretName as string).catch((e) => (optional && isNotFound(e) ? {} as V1Secret : Promise.reject(e)))).data ?? {};
      for (const item of items ?? Object.keys(data).map((key) => ({ key, path: key, mode: undefined }))) {
        const content = data[item.key];
        if (content === undefined && !optional) throw new Error(`volume ${m.name}: Secret ${secretName} has no key ${item.key} (the kubelet would not start the pod)`);
        if (content !== undefined) writeFileSync(join(at, item.path), Buffer.from(content, 'base64'), { mode: item.mode ?? defaultMode });
      }
    }
    for (const [name, value] of Object.entries(env)) if (value === m.mountPath) env[name] = at;
  }
  return { dir, args, env };
}

/** `verb resource` for every rule of a ClusterRole. */
function grants(role: Obj): string[] {
  return (role.rules as { resources?: string[]; nonResourceURLs?: string[]; verbs: string[] }[])
    .flatMap((r) => [...(r.resources ?? []), ...(r.nonResourceURLs ?? [])].flatMap((res) => r.verbs.map((v) => `${v} ${res}`))).sort();
}

const DEFAULT_RBAC = parseManifests(readFileSync(join(MANIFESTS_DIR, 'rbac.yaml'), 'utf8')) as Obj[];

interface Case {
  label: string;
  release: string;
  namespace: string;
  values: Record<string, unknown>;
  /** Objects the case needs that the chart does not make (an existing Secret, ConfigMap, account). */
  prerequisites?: object[];
  /** Checks on the objects as read back from the API server. */
  check(stored: Obj[]): void | Promise<void>;
}

const CASES: Case[] = [
  {
    label: 'defaults',
    release: 'edge-ccm-defaults',
    namespace: 'helm-defaults',
    values: {},
    check(stored) {
      const d = must(stored, 'Deployment') as unknown as V1Deployment;
      expect(d.spec?.replicas).toBe(2);
      const options = containerOptions(d as unknown as Obj);
      expect({ provider: options.cloudProvider, leaderElect: options.leaderElect, bind: options.bindAddress }).toEqual({ provider: 'static', leaderElect: true, bind: POD_IP });
      expect(podSpec(d as unknown as Obj).hostNetwork).toBe(true);
      // No config in the values: the pods mount the ConfigMap the operator creates, as the raw manifests do.
      expect(find(stored, 'ConfigMap')).toBeUndefined();
      expect(podSpec(d as unknown as Obj).volumes?.find((v) => v.name === 'cloud-config')?.configMap?.name).toBe('edge-ccm-defaults-cloud-config');
      expect(must(stored, 'PodDisruptionBudget').spec).toMatchObject({ maxUnavailable: 1 });
      for (const kind of ['PodMonitor', 'ServiceMonitor', 'PrometheusRule', 'ValidatingAdmissionPolicy']) expect(find(stored, kind)).toBeUndefined();
    },
  },
  {
    label: 'DaemonSet, config and secrets in the values, kube-vip, service-account credentials, own lease, every monitor, node IPAM, CSR approval',
    release: 'edge-ccm-full',
    namespace: 'helm-full',
    values: {
      kind: 'DaemonSet',
      cloudConfig: { content: INVENTORY },
      secrets: { files: { 'bmc-password': 'hunter2\n', 'bmc-ca.pem': 'not a real CA\n' } },
      kubeVip: { enabled: true },
      nodeIPAM: { enabled: true, cidrAllocatorType: 'CloudAllocator' },
      csrApproval: { enabled: true },
      useServiceAccountCredentials: true,
      leaderElection: { leaseName: 'edge-ccm-full', leaseNamespace: 'helm-full', leaseDuration: '20s', renewDeadline: '15s', retryPeriod: '3s' },
      image: { repository: 'registry.example/edge-ccm', digest: `sha256:${'a'.repeat(64)}` },
      extraArgs: ['--cluster-cidr=10.244.0.0/16', '--configure-cloud-routes=false'],
      nodeSelector: { 'kubernetes.io/os': 'linux' },
      metrics: { tokenSecret: { create: true }, podMonitor: { enabled: true, labels: { release: 'kps' } }, serviceMonitor: { enabled: true }, prometheusRule: { enabled: true } },
    },
    check(stored) {
      const ds = must(stored, 'DaemonSet');
      expect(find(stored, 'Deployment')).toBeUndefined();
      expect(find(stored, 'PodDisruptionBudget')).toBeUndefined(); // a drain leaves DaemonSet pods alone
      const options = containerOptions(ds);
      expect(options).toMatchObject({
        leaderElect: true, leaderElectResourceName: 'edge-ccm-full', leaderElectResourceNamespace: 'helm-full',
        leaderElectLeaseDurationMs: 20_000, leaderElectRenewDeadlineMs: 15_000, leaderElectRetryPeriodMs: 3_000,
        kubeVipAnnotation: true, useServiceAccountCredentials: true, clusterCIDR: '10.244.0.0/16', configureCloudRoutes: false,
        bindAddress: POD_IP, allocateNodeCIDRs: true, cidrAllocatorType: 'CloudAllocator',
      });
      expect([...options.enabledControllers]).toContain('node-ipam-controller');
      expect([...options.enabledControllers]).toContain('node-csr-approval');
      // node-csr-approval's ClusterRole: approve for the kubelet-serving signer only.
      const csrRole = must(stored, 'ClusterRole', 'edge-ccm-full:node-csr-approval');
      expect((csrRole.rules as { resources: string[]; resourceNames?: string[] }[]).find((r) => r.resources.includes('signers'))?.resourceNames).toEqual(['kubernetes.io/kubelet-serving']);
      // The CloudAllocator's Role: its one ConfigMap, beside the chosen lease.
      const ipamRole = must(stored, 'Role', 'edge-ccm-full:node-ipam');
      expect(ipamRole.metadata.namespace).toBe('helm-full');
      expect((ipamRole.rules as { resourceNames?: string[] }[]).flatMap((r) => r.resourceNames ?? [])).toEqual(['edge-ccm-full-node-ipam']);
      expect(edgeCcm(ds).image).toBe(`registry.example/edge-ccm@sha256:${'a'.repeat(64)}`);
      // Probed where it listens: the pod's IP, the kubelet's default.
      expect([edgeCcm(ds).livenessProbe?.httpGet?.host, edgeCcm(ds).readinessProbe?.httpGet?.host]).toEqual([undefined, undefined]);
      expect(podSpec(ds).nodeSelector).toEqual({ 'kubernetes.io/os': 'linux' });
      expect(podSpec(ds).affinity?.podAntiAffinity).toBeUndefined(); // one per node already
      // The config and the secrets exactly as given.
      expect((must(stored, 'ConfigMap', 'edge-ccm-full-cloud-config') as unknown as V1ConfigMap).data).toEqual({ 'cloud-config.yaml': INVENTORY });
      const secret = must(stored, 'Secret', 'edge-ccm-full-secrets') as unknown as V1Secret;
      expect(Object.fromEntries(Object.entries(secret.data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString()])))
        .toEqual({ 'bmc-password': 'hunter2\n', 'bmc-ca.pem': 'not a real CA\n' });
      // The lease Role names the chosen lease, in its namespace.
      const leaseRole = must(stored, 'Role', 'edge-ccm-full:leader-election');
      expect(leaseRole.metadata.namespace).toBe('helm-full');
      expect((leaseRole.rules as { resourceNames?: string[] }[]).flatMap((r) => r.resourceNames ?? [])).toEqual(['edge-ccm-full']);
      expect(must(stored, 'Role', 'edge-ccm-full:controller-credentials').metadata.namespace).toBe('kube-system');
      // The admission policy matches this release's account, not the default one.
      const policy = JSON.stringify(must(stored, 'ValidatingAdmissionPolicy', 'edge-ccm-full-kube-vip-annotation-only'));
      expect(policy).toContain('system:serviceaccount:helm-full:cloud-controller-manager');
      expect(policy).not.toContain('system:serviceaccount:kube-system:cloud-controller-manager');
      expect(must(stored, 'ValidatingAdmissionPolicyBinding').spec).toMatchObject({ policyName: 'edge-ccm-full-kube-vip-annotation-only', validationActions: ['Deny'] });
      // Scraping: the token Secret of a reader account allowed GET /metrics and nothing else.
      expect(grants(must(stored, 'ClusterRole', 'edge-ccm-full:metrics-reader'))).toEqual(['get /metrics']);
      const tokenSecret = must(stored, 'Secret', 'edge-ccm-full-metrics-token');
      expect([tokenSecret.type, (tokenSecret.metadata as { annotations?: Record<string, string> }).annotations?.['kubernetes.io/service-account.name']])
        .toEqual(['kubernetes.io/service-account-token', 'edge-ccm-full-metrics-reader']);
      const credentials = { type: 'Bearer', credentials: { name: 'edge-ccm-full-metrics-token', key: 'token' } };
      const podMonitor = must(stored, 'PodMonitor');
      expect(podMonitor.metadata).toMatchObject({ labels: { release: 'kps' } });
      expect(podMonitor.spec).toMatchObject({ podMetricsEndpoints: [{ port: 'https', scheme: 'https', path: '/metrics', authorization: credentials, relabelings: [{ targetLabel: 'job', replacement: 'edge-ccm' }] }] });
      expect(must(stored, 'ServiceMonitor').spec).toMatchObject({ endpoints: [{ port: 'https', authorization: credentials }] });
      expect(must(stored, 'Service').spec).toMatchObject({ clusterIP: 'None', ports: [{ name: 'https', port: 10258 }] });
      // The alerts of docs/observability, every group.
      const groups = (must(stored, 'PrometheusRule').spec as { groups: { name: string; rules: unknown[] }[] }).groups;
      expect(groups.map((g) => g.name)).toEqual(RULES.groups.map((g) => g.name));
      expect(groups.every((g) => g.rules.length > 0)).toBe(true);
    },
  },
  {
    label: 'one replica without leader election, pod network, existing ConfigMap, Secret, account and scrape token',
    release: 'solo',
    namespace: 'helm-solo',
    values: {
      replicas: 1,
      leaderElection: { enabled: false },
      hostNetwork: false,
      server: { bindAddress: '0.0.0.0', securePort: 10300 },
      podAntiAffinity: 'none',
      podDisruptionBudget: { enabled: false },
      cloudConfig: { existingConfigMap: 'my-config', key: 'inventory.yaml' },
      secrets: { existingSecret: 'my-secrets' },
      serviceAccount: { create: false, name: 'existing-ccm' },
      provider: 'proxmox',
      metrics: {
        tokenSecret: { existingSecret: 'scrape-token' },
        serviceMonitor: { enabled: true },
        prometheusRule: { enabled: true, additionalGroups: [{ name: 'site.extra', rules: [{ alert: 'SiteExtra', expr: 'vector(1)' }] }] },
      },
    },
    prerequisites: [{ apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'existing-ccm', namespace: 'helm-solo' } }],
    check(stored) {
      const d = must(stored, 'Deployment');
      const pod = podSpec(d);
      expect((d as unknown as V1Deployment).spec?.replicas).toBe(1);
      const options = containerOptions(d);
      expect({ leaderElect: options.leaderElect, bind: options.bindAddress, port: options.securePort, provider: options.cloudProvider, config: options.cloudConfig })
        .toEqual({ leaderElect: false, bind: '0.0.0.0', port: 10300, provider: 'proxmox', config: '/etc/edge-ccm/inventory.yaml' });
      expect([pod.hostNetwork, pod.dnsPolicy]).toEqual([undefined, 'ClusterFirst']);
      expect(pod.affinity?.podAntiAffinity).toBeUndefined();
      expect(edgeCcm(d).livenessProbe?.httpGet).toMatchObject({ port: 10300, path: '/livez' });
      expect(edgeCcm(d).livenessProbe?.httpGet?.host).toBeUndefined();
      expect(pod.serviceAccountName).toBe('existing-ccm');
      expect(pod.volumes?.map((v) => v.configMap?.name ?? v.secret?.secretName)).toEqual(['my-config', 'my-secrets']);
      for (const kind of ['ServiceAccount', 'ConfigMap', 'PodDisruptionBudget', 'PodMonitor']) expect(find(stored, kind)).toBeUndefined();
      expect(find(stored, 'Secret')).toBeUndefined(); // neither the files nor a token Secret: both are the operator's
      expect(find(stored, 'Role')).toBeUndefined(); // no lease to take
      // The bindings name the existing account.
      expect(must(stored, 'ClusterRoleBinding', 'system:solo-edge-ccm').subjects).toEqual([{ kind: 'ServiceAccount', name: 'existing-ccm', namespace: 'helm-solo' }]);
      const endpoint = (must(stored, 'ServiceMonitor').spec as { endpoints: Record<string, unknown>[] }).endpoints[0];
      expect(endpoint?.authorization).toEqual({ type: 'Bearer', credentials: { name: 'scrape-token', key: 'token' } });
      expect(endpoint?.bearerTokenFile).toBeUndefined();
      const groups = (must(stored, 'PrometheusRule').spec as { groups: { name: string }[] }).groups.map((g) => g.name);
      expect(groups).toEqual([...RULES.groups.map((g) => g.name), 'site.extra']);
    },
  },
  {
    label: 'speaker with announceFrom: nodes: only the listed keys of the Secret, where the controller has them, and its config loads',
    release: 'bgp-nodes',
    namespace: 'helm-speaker',
    values: {
      cloudConfig: { content: NODES_BGP_CONFIG },
      secrets: { files: { 'bgp-router-1': 'md5-key\n', 'pve-token': 'provider secret\n' } },
      speaker: { enabled: true, credentials: ['bgp-router-1'] },
    },
    async check(stored) {
      const ds = must(stored, 'DaemonSet', 'bgp-nodes-edge-ccm-speaker');
      const speaker = container(ds, 'speaker');
      const controller = edgeCcm(must(stored, 'Deployment'));
      const controllerMount = controller.volumeMounts?.find((m) => m.name === 'secrets');
      expect(controllerMount?.mountPath).toBe('/run/secrets/edge-ccm');
      // The one key listed, nothing else of the Secret (pve-token stays off the nodes), owner-read only.
      expect(podSpec(ds).volumes?.find((v) => v.name === 'credentials')).toEqual({
        name: 'credentials',
        secret: { secretName: 'bgp-nodes-edge-ccm-secrets', defaultMode: 0o400, items: [{ key: 'bgp-router-1', path: 'bgp-router-1' }] },
      });
      // Read-only, at the controller's path, CREDENTIALS_DIRECTORY alike: one config names one file in both.
      expect(speaker.volumeMounts?.find((m) => m.name === 'credentials')).toEqual({ name: 'credentials', mountPath: controllerMount?.mountPath as string, readOnly: true });
      expect(speaker.env?.find((e) => e.name === 'CREDENTIALS_DIRECTORY')).toEqual(controller.env?.find((e) => e.name === 'CREDENTIALS_DIRECTORY'));

      // The compiled speaker as the pod runs it (no router: its config load, the bgp section with
      // the peer's passwordFile included, is what failed without the mount). Its own liveness
      // port and no metrics listener, so nothing it opens meets another test's.
      const pod = podSpec(ds);
      const { dir, args, env } = await asLocalProcess(pod, speaker, 'helm-speaker', { 'spec.nodeName': 'helm-speaker-node' });
      const token = await cp.serviceAccountToken('helm-speaker', pod.serviceAccountName as string);
      const kubeconfig = await writeKubeconfig(join(dir, 'kubeconfig'), cp.server, cp.caPem, 'speaker', { token });
      const [port] = await freeLoopbackPorts(1);
      const proc = CcmProcess.binary([...args, `--kubeconfig=${kubeconfig}`, `--liveness-port=${port}`, '--metrics-bind-address=0'], env);
      await proc.waitForLog('speaker starting', 30_000);
      expect(await proc.stop('SIGTERM')).toBe(0);
    },
  },
  {
    label: 'lxd over the host\'s unix socket: the socket mounted (hostPath, type Socket) where the config names it, with the socket\'s group',
    release: 'lxd-socket',
    namespace: 'helm-lxd',
    values: {
      provider: 'lxd',
      cloudConfig: { content: 'region: edge-1\n' },
      lxd: { socket: { hostPath: DEFAULT_LXD_SOCKET } },
      podSecurityContext: { supplementalGroups: [997] },
    },
    check(stored) {
      const d = must(stored, 'Deployment');
      expect(containerOptions(d).cloudProvider).toBe('lxd');
      expect(podSpec(d).volumes?.find((v) => v.name === 'lxd-socket')).toEqual({ name: 'lxd-socket', hostPath: { path: DEFAULT_LXD_SOCKET, type: 'Socket' } });
      // Mounted where the config (as the chart ships it) makes the provider connect.
      const loaded = loadLxdConfig((must(stored, 'ConfigMap', 'lxd-socket-edge-ccm-cloud-config') as unknown as V1ConfigMap).data!['cloud-config.yaml']!, processSecrets);
      if (!loaded.ok) throw new Error(JSON.stringify(loaded.errors));
      expect(edgeCcm(d).volumeMounts?.find((m) => m.name === 'lxd-socket')).toEqual({ name: 'lxd-socket', mountPath: (loaded.config.endpoint as { socket: string }).socket, readOnly: true });
      // The group is added to the defaults (still non-root, fsGroup for the Secret).
      expect(podSpec(d).securityContext).toMatchObject({ runAsNonRoot: true, fsGroup: 65532, supplementalGroups: [997] });
    },
  },
  {
    label: 'two providers in one process (static,lxd): a config file each in the one ConfigMap, both given to --cloud-config, both valid to the compiled validate',
    release: 'hybrid',
    namespace: 'helm-hybrid',
    values: { provider: 'static,lxd', cloudConfig: { content: INVENTORY, others: { lxd: 'region: edge-1\n' } } },
    async check(stored) {
      const d = must(stored, 'Deployment');
      expect(containerOptions(d).cloudProvider).toBe('static,lxd');
      const cm = must(stored, 'ConfigMap', 'hybrid-edge-ccm-cloud-config') as unknown as V1ConfigMap;
      expect(cm.data).toEqual({ 'cloud-config.yaml': INVENTORY, 'lxd.yaml': 'region: edge-1\n' });
      // The flags as the pod starts, its ConfigMap laid out as the kubelet would: what edge-ccm
      // validate (the start's own file checks, by each provider's validator) says of them.
      const { args } = await asLocalProcess(podSpec(d), edgeCcm(d), 'helm-hybrid', { 'status.podIP': POD_IP });
      const flags = args.filter((a) => a.startsWith('--cloud-provider=') || a.startsWith('--cloud-config='));
      expect(flags).toHaveLength(2);
      expect(flags[1]).toMatch(/^--cloud-config=static=\/.*\/etc\/edge-ccm\/cloud-config\.yaml,lxd=\/.*\/etc\/edge-ccm\/lxd\.yaml$/);
      const run = Bun.spawnSync([join(ROOT, 'dist/edge-ccm'), 'validate', ...flags], { stdout: 'pipe', stderr: 'pipe' });
      expect({ code: run.exitCode, out: run.stdout.toString() + run.stderr.toString() }).toMatchObject({ code: 0, out: expect.stringMatching(/valid static configuration[\s\S]*valid lxd configuration/) });
    },
  },
];

test('helm lint --strict passes with the default values and with every case of the matrix', () => {
  for (const values of [{}, ...CASES.map((c) => c.values)]) {
    const r = runHelm(['lint', '--strict', CHART_DIR, '--namespace', 'kube-system', '--values', valuesFile(values)]);
    expect({ values, exitCode: r.exitCode, output: r.exitCode === 0 ? '' : r.stdout + r.stderr }).toEqual({ values, exitCode: 0, output: '' });
    expect(r.stdout).toContain('1 chart(s) linted, 0 chart(s) failed');
  }
});

describe('helm template, applied to the API server and read back', () => {
  for (const c of CASES) {
    test(c.label, async () => {
      const rendered = parseManifests(helmTemplate({ release: c.release, namespace: c.namespace, values: c.values })) as Obj[];
      expect(rendered.length).toBeGreaterThan(3);
      // Every namespaced object lands in the release's namespace, except the two Roles that must
      // sit where the lease and the controllers' accounts are.
      for (const o of rendered.filter((x) => x.metadata.namespace && x.metadata.namespace !== c.namespace)) {
        expect(`${o.kind}/${o.metadata.name} in ${o.metadata.namespace}`).toMatch(/^Role(Binding)?\/.*:(leader-election|controller-credentials) in (kube-system|helm-\w+)$/);
      }
      await applyManifests(admin, JSON.stringify({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: c.namespace } }));
      for (const p of c.prerequisites ?? []) await applyManifests(admin, JSON.stringify(p));
      await applyManifests(admin, rendered.map((o) => JSON.stringify(o)).join('\n---\n'));
      const stored: Obj[] = [];
      for (const o of rendered) {
        const got = await admin.request<Obj>({ method: 'GET', path: objectPath(o) });
        // The API server kept every field the chart wrote (nothing dropped or rewritten).
        expect(got).toMatchObject(o);
        stored.push(got);
      }
      // Whatever the values, edge-ccm's ClusterRole is the least-privilege one rbac.test.ts proves.
      const role = must(stored, 'ClusterRole', `system:${c.release.includes('edge-ccm') ? c.release : `${c.release}-edge-ccm`}`);
      expect(grants(role)).toEqual(grants(must(DEFAULT_RBAC, 'ClusterRole', 'system:edge-ccm')));
      await c.check(stored);
    }, 60_000);
  }
});

describe('values that cannot work are refused, naming the value', () => {
  const refusals: [string, Record<string, unknown>, RegExp][] = [
    ['two replicas without leader election', { leaderElection: { enabled: false } }, /leaderElection\.enabled=false with replicas: 2/],
    ['a DaemonSet without leader election', { kind: 'DaemonSet', leaderElection: { enabled: false } }, /leaderElection\.enabled=false with kind: DaemonSet/],
    ['loopback without the host network', { hostNetwork: false, server: { bindAddress: '127.0.0.1', securePort: 10258 } }, /server\.bindAddress=127\.0\.0\.1 with hostNetwork=false/],
    ['a monitor scraping loopback', { server: { bindAddress: '127.0.0.1', securePort: 10258 }, metrics: { serviceMonitor: { enabled: true } } }, /Prometheus cannot scrape a loopback address/],
    ['a PodMonitor without a token', { metrics: { podMonitor: { enabled: true } } }, /metrics\.podMonitor\.enabled needs metrics\.tokenSecret/],
    ['the config given twice', { cloudConfig: { content: 'x: 1', existingConfigMap: 'other' } }, /cloudConfig\.content and cloudConfig\.existingConfigMap/],
    ['the secrets given twice', { secrets: { files: { a: 'b' }, existingSecret: 'other' } }, /secrets\.files and secrets\.existingSecret/],
    ['a speaker credential that is not in secrets.files', { secrets: { files: { 'bgp-router-1': 'k' } }, speaker: { enabled: true, credentials: ['bgp-router-1', 'bgp-router-2'] } },
      /speaker\.credentials: "bgp-router-2" is not a key of secrets\.files \(bgp-router-1\)/],
    ['a peer passwordFile of announceFrom: nodes the speaker is not given', { cloudConfig: { content: NODES_BGP_CONFIG }, secrets: { files: { 'bgp-router-1': 'k' } }, speaker: { enabled: true } },
      /speaker\.credentials lacks "bgp-router-1": cloudConfig\.content's bgp\.peers\[0\]\.passwordFile names it/],
    ['a bgp section without announceFrom while the speaker runs (no silent leader default)', { cloudConfig: { content: NODES_BGP_CONFIG.replace('  loadBalancers: { announceFrom: nodes }\n', '') }, secrets: { files: { 'bgp-router-1': 'k' } }, speaker: { enabled: true, credentials: ['bgp-router-1'] } },
      /cloudConfig\.content has a bgp section and speaker\.enabled is true: set bgp\.loadBalancers\.announceFrom: nodes/],
    ['a speaker credential that is no file name', { speaker: { enabled: true, credentials: ['../token'] } }, /at '\/speaker\/credentials\/0': '\.\.\/token' does not match/],
    ['an unknown kind', { kind: 'StatefulSet' }, /at '\/kind': value must be one of 'Deployment', 'DaemonSet'/],
    ['an unknown key', { replica: 3 }, /additional properties 'replica' not allowed/],
    ['no replica', { replicas: 0 }, /at '\/replicas': minimum/],
    ['an unknown provider', { provider: 'aws' }, /at '\/provider': 'aws' does not match pattern/],
    ['an unknown provider among several', { provider: 'static,aws' }, /at '\/provider': 'static,aws' does not match pattern/],
    ['a provider named twice', { provider: 'static,static' }, /provider=static,static names a provider twice/],
    ['a second provider without its config', { provider: 'static,proxmox', cloudConfig: { content: 'a: 1\n' } }, /provider=static,proxmox: cloudConfig\.others\.proxmox is missing/],
    ['a config for a provider not run', { cloudConfig: { content: 'a: 1\n', others: { proxmox: 'b: 2\n' } } }, /cloudConfig\.others\.proxmox: proxmox is not a provider after the first in provider=static/],
    ["the others' configs without the first's", { provider: 'static,proxmox', cloudConfig: { others: { proxmox: 'b: 2\n' } } }, /cloudConfig\.others without cloudConfig\.content/],
    ['a key given twice', { provider: 'static,proxmox', cloudConfig: { content: 'a: 1\n', key: 'proxmox.yaml', others: { proxmox: 'b: 2\n' } } }, /cloudConfig\.key=proxmox\.yaml is also the key of cloudConfig\.others\.proxmox/],
    ['an LXD socket that is no absolute path', { lxd: { socket: { hostPath: 'var/lib/lxd/unix.socket' } } }, /at '\/lxd\/socket\/hostPath': 'var\/lib\/lxd\/unix.socket' does not match/],
    ['a bind address that is no address', { server: { bindAddress: 'localhost', securePort: 10258 } }, /'localhost' is not valid ipv4/],
    ['a digest that is no digest', { image: { repository: 'edge-ccm', digest: 'latest' } }, /at '\/image\/digest': 'latest' does not match/],
    ['a flag that is no flag', { extraArgs: ['v=4'] }, /at '\/extraArgs\/0': 'v=4' does not match/],
    ['a lease duration that is no duration', { leaderElection: { leaseDuration: '15 seconds' } }, /at '\/leaderElection\/leaseDuration': '15 seconds' does not match/],
  ];
  for (const [what, values, message] of refusals) {
    test(what, () => {
      const r = runHelm(['template', 'edge-ccm', CHART_DIR, '--namespace', 'kube-system', '--values', valuesFile(values)]);
      expect(r.exitCode).not.toBe(0);
      expect(r.stderr).toMatch(message);
    });
  }
});

test('deploy/kubernetes is the chart rendered by scripts/gen-manifests, and the chart holds the alert rules of docs/observability', () => {
  for (const m of MANIFESTS) {
    const committed = readFileSync(join(MANIFESTS_DIR, m.file), 'utf8');
    // A hand edit, or a chart change without `scripts/gen-manifests`, fails here.
    expect({ file: m.file, text: committed }).toEqual({ file: m.file, text: renderManifest(m) });
  }
  expect(readFileSync(join(CHART_DIR, 'files/edge-ccm.rules.yaml'), 'utf8')).toBe(rulesForChart() as string);
});

test('without speaker.credentials the speaker gets no Secret of the controller (deploy/kubernetes/speaker.yaml: the chart with speaker.enabled)', () => {
  const ds = must(parseManifests(readFileSync(join(MANIFESTS_DIR, 'speaker.yaml'), 'utf8')) as Obj[], 'DaemonSet');
  const speaker = container(ds, 'speaker');
  expect(podSpec(ds).volumes?.map((v) => v.secret?.secretName ?? v.configMap?.name)).toEqual(['edge-ccm-cloud-config', 'edge-ccm-speaker-key']);
  expect(speaker.volumeMounts?.map((m) => m.mountPath)).toEqual(['/etc/edge-ccm', '/run/secrets/edge-ccm-speaker']);
  expect(speaker.env?.map((e) => e.name)).toEqual(['NODE_NAME', 'BUN_JSC_useDFGJIT', 'MIMALLOC_PURGE_HOLES_MIN_INTERVAL']);
});

// Both run without JSC's optimizing tiers (BENCHMARKS.md, "Footprint on every node"); the VIP's unit too.
test('the controller and the speaker run with BUN_JSC_useDFGJIT=0 (deploy/kubernetes: the chart rendered), as edge-ccm.service and edge-ccm-vip.service do', () => {
  const controller = container(must(parseManifests(readFileSync(join(MANIFESTS_DIR, 'deployment.yaml'), 'utf8')) as Obj[], 'Deployment'), 'edge-ccm');
  const speaker = container(must(parseManifests(readFileSync(join(MANIFESTS_DIR, 'speaker.yaml'), 'utf8')) as Obj[], 'DaemonSet'), 'speaker');
  for (const c of [controller, speaker]) expect(c.env?.find((e) => e.name === 'BUN_JSC_useDFGJIT')?.value).toBe('0');
  for (const unit of ['edge-ccm.service', 'edge-ccm-vip.service']) {
    expect(readFileSync(join(import.meta.dir, '../../deploy/systemd', unit), 'utf8')).toMatch(/^Environment=BUN_JSC_useDFGJIT=0$/m);
  }
});

test('Chart.yaml appVersion is the version of edge-ccm (package.json), the default image tag', () => {
  const chart = parseYaml(readFileSync(join(CHART_DIR, 'Chart.yaml'), 'utf8')) as { appVersion: string };
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
  expect(chart.appVersion).toBe(pkg.version);
  const deployment = must(parseManifests(readFileSync(join(MANIFESTS_DIR, 'deployment.yaml'), 'utf8')) as Obj[], 'Deployment');
  expect(edgeCcm(deployment).image).toBe(`edge-ccm:${pkg.version}`);
});

describe('helm install, upgrade and uninstall against the API server', () => {
  const RELEASE = 'edge-ccm';
  const NS = 'edge-ccm-system';
  const SA_USER = `system:serviceaccount:${NS}:cloud-controller-manager`;
  const inventory = [
    'inventory:',
    '  defaults: { region: helm-region, instanceType: helm-metal }',
    '  machines:',
    '    - { id: helm-a, addresses: [{ type: InternalIP, address: 10.9.2.1 }] }',
    'loadBalancer:',
    '  pools:',
    '    - name: helm-pool',
    '      addresses: [203.0.113.64/29]',
    '',
  ].join('\n');
  const values = { replicas: 1, cloudConfig: { content: inventory }, secrets: { files: { 'bmc-password': 'not used here\n' } } };
  const kubeconfigEnv = () => ({ KUBECONFIG: cp.adminKubeconfig });

  function helmOk(args: string[]): string {
    const r = runHelm(args, kubeconfigEnv());
    if (r.exitCode !== 0) throw new Error(`helm ${args.join(' ')} exited ${r.exitCode}:\n${r.stderr}${r.stdout}`);
    return r.stdout;
  }

  function release(): { version: number; info: { status: string } } {
    return JSON.parse(helmOk(['status', RELEASE, '--namespace', NS, '--output', 'json'])) as { version: number; info: { status: string } };
  }

  async function installed<T>(kind: string, name: string, namespace?: string): Promise<T> {
    const apiVersion = kind === 'Deployment' ? 'apps/v1' : kind === 'ValidatingAdmissionPolicy' ? 'admissionregistration.k8s.io/v1' : kind.startsWith('Cluster') ? 'rbac.authorization.k8s.io/v1' : 'v1';
    return admin.request<T>({ method: 'GET', path: objectPath({ apiVersion, kind, metadata: { name, namespace } }) });
  }

  /**
   * The compiled edge-ccm as the installed pod would run: the Deployment's container as
   * runAsLocalProcess lays it out, its service account's token. Only the port is free-picked, and
   * a kubeconfig given for the in-cluster config.
   */
  async function runAsInstalledPod(): Promise<CcmProcess> {
    const deployment = await installed<V1Deployment>('Deployment', RELEASE, NS);
    const pod = deployment.spec?.template.spec as V1PodSpec;
    const { dir, args, env } = await asLocalProcess(pod, edgeCcm(deployment as unknown as Obj), NS, { 'status.podIP': '127.0.0.1' });
    const token = await cp.serviceAccountToken(NS, pod.serviceAccountName as string);
    const kubeconfig = await writeKubeconfig(join(dir, 'kubeconfig'), cp.server, cp.caPem, 'edge-ccm', { token });
    const [port] = await freeLoopbackPorts(1);
    const ccm = CcmProcess.binary([...args, `--kubeconfig=${kubeconfig}`, `--secure-port=${port}`], env);
    await ccm.waitForLog('successfully acquired lease', 60_000);
    return ccm;
  }

  test('install: the release deployed, and its pod, run as installed, initialises a node and gives a service an address', async () => {
    helmOk(['install', RELEASE, CHART_DIR, '--namespace', NS, '--create-namespace', '--values', valuesFile(values)]);
    expect(release()).toMatchObject({ version: 1, info: { status: 'deployed' } });
    const cm = await installed<V1ConfigMap>('ConfigMap', 'edge-ccm-cloud-config', NS);
    expect(cm.data?.['cloud-config.yaml']).toBe(inventory);

    const ccm = await runAsInstalledPod();
    const nodes = new ResourceClient<V1Node>(admin, NODES);
    const services = new ResourceClient<V1Service>(admin, SERVICES);
    await nodes.create({ metadata: { name: 'helm-a' }, spec: { taints: [UNINITIALIZED] } });
    const node = await eventually('node helm-a initialised', async () => {
      const n = await nodes.get('helm-a');
      return n.spec?.providerID && !n.spec.taints?.some((t) => t.key === UNINITIALIZED.key) ? n : undefined;
    }, 60_000);
    expect(node.spec?.providerID).toBe('static://helm-a');
    expect(node.metadata?.labels?.['node.kubernetes.io/instance-type']).toBe('helm-metal');
    await services.create({ metadata: { name: 'helm-lb', namespace: 'default' }, spec: { type: 'LoadBalancer', ports: [{ port: 80, protocol: 'TCP' }] } });
    const svc = await eventually('service helm-lb given an address', async () => {
      const s = await services.get('helm-lb', { namespace: 'default' });
      return s.status?.loadBalancer?.ingress?.length ? s : undefined;
    }, 60_000);
    expect(svc.status?.loadBalancer?.ingress?.[0]?.ip).toMatch(/^203\.0\.113\.(6[5-9]|70)$/);
    expect(svc.metadata?.annotations?.[KUBE_VIP_ANNOTATION]).toBeUndefined();
    expect(await ccm.stop('SIGTERM')).toBe(0);
    // Under the release's RBAC, nothing edge-ccm asked for was refused.
    expect(readAuditLog(cp.auditLogPath).filter((e) => e.user?.username === SA_USER && e.responseStatus?.code === 403).map((e) => `${e.verb} ${e.requestURI}`)).toEqual([]);
  }, 180_000);

  test('upgrade: new values reach the API server (kube-vip on: its flag, role and policy), and the pod then writes the annotation', async () => {
    helmOk(['upgrade', RELEASE, CHART_DIR, '--namespace', NS, '--values', valuesFile({ ...values, replicas: 2, kubeVip: { enabled: true } })]);
    expect(release()).toMatchObject({ version: 2, info: { status: 'deployed' } });
    const deployment = await installed<V1Deployment>('Deployment', RELEASE, NS);
    expect(deployment.spec?.replicas).toBe(2);
    expect(containerOptions(deployment as unknown as Obj).kubeVipAnnotation).toBe(true);
    const policy = await installed<object>('ValidatingAdmissionPolicy', 'edge-ccm-kube-vip-annotation-only');
    expect(JSON.stringify(policy)).toContain(SA_USER);
    await installed<object>('ClusterRole', 'system:edge-ccm:kube-vip');

    // The policy is enforced once the API server has loaded it; the write then goes through it.
    const ccm = await runAsInstalledPod();
    const services = new ResourceClient<V1Service>(admin, SERVICES);
    const svc = await eventually('kube-vip annotation on helm-lb', async () => {
      const s = await services.get('helm-lb', { namespace: 'default' });
      return s.metadata?.annotations?.[KUBE_VIP_ANNOTATION] ? s : undefined;
    }, 60_000);
    expect(svc.metadata?.annotations?.[KUBE_VIP_ANNOTATION]).toBe(svc.status?.loadBalancer?.ingress?.[0]?.ip);
    expect(await ccm.stop('SIGTERM')).toBe(0);
  }, 180_000);

  test('uninstall removes what the release made, cluster-scoped objects included', async () => {
    helmOk(['uninstall', RELEASE, '--namespace', NS]);
    for (const [kind, name, namespace] of [
      ['Deployment', RELEASE, NS], ['ConfigMap', 'edge-ccm-cloud-config', NS], ['ClusterRole', 'system:edge-ccm', undefined],
      ['ClusterRole', 'system:edge-ccm:kube-vip', undefined], ['ValidatingAdmissionPolicy', 'edge-ccm-kube-vip-annotation-only', undefined],
    ] as const) {
      await eventually(`${kind} ${name} gone`, () => installed(kind, name, namespace).then(() => false, (e: unknown) => {
        if (isNotFound(e)) return true;
        throw e;
      }));
    }
  }, 120_000);
});
