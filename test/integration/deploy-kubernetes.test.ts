import { beforeAll, expect, test } from 'bun:test';
import { readFileSync, readdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { V1ConfigMap, V1Container, V1DaemonSet, V1Deployment, V1Pod, V1Secret } from '@kubernetes/client-node';
import { parse as parseYaml } from 'yaml';
import type { BunKubeTransport } from '../../src/kube/transport.ts';
import { parseArgs } from '../../src/options/index.ts';
import { loadProxmoxConfig } from '../../providers/proxmox/index.ts';
import { loadStaticConfig } from '../../providers/static/index.ts';
import type { SecretSource } from '../../src/config-file/secrets.ts';
import { sharedControlPlane } from '../harness/control-plane.ts';
import { transportFor } from '../harness/kubeconfig.ts';
import { kubeletArgs } from '../harness/container-args.ts';
import { applyManifests, objectPath, type ManifestObject } from '../harness/manifests.ts';

/**
 * Every manifest in deploy/kubernetes applied for real (server-side apply) to a real API server,
 * so none can rot, and the Deployment read back and held to what docs/install.md promises.
 * (deploy-scratch-image.test.ts runs the Deployment's container in-cluster style.)
 */
const DIR = resolve(import.meta.dir, '../../deploy/kubernetes');
const ROOT = resolve(import.meta.dir, '../..');
const manifestFiles = readdirSync(DIR).filter((f) => f.endsWith('.yaml') && f !== 'kustomization.yaml').sort();

let admin: BunKubeTransport;
let applied: ManifestObject[];
let deployment: V1Deployment;

beforeAll(async () => {
  const cp = await sharedControlPlane();
  admin = transportFor(cp.adminKubeconfig);
  // The cloud config ConfigMap the Deployment mounts, created as docs/install.md says.
  const configMap: V1ConfigMap = {
    apiVersion: 'v1', kind: 'ConfigMap',
    metadata: { name: 'edge-ccm-cloud-config', namespace: 'kube-system' },
    data: { 'cloud-config.yaml': readFileSync(join(ROOT, 'examples/inventory.yaml'), 'utf8') },
  };
  await applyManifests(admin, JSON.stringify(configMap));
  applied = [];
  for (const file of manifestFiles) applied.push(...(await applyManifests(admin, readFileSync(join(DIR, file), 'utf8'))));
  const stored = applied.find((o) => o.kind === 'Deployment');
  if (!stored) throw new Error('no Deployment in deploy/kubernetes');
  deployment = await admin.request<V1Deployment>({ method: 'GET', path: objectPath(stored) });
}, 240_000);

function container(): V1Container {
  const c = deployment.spec?.template.spec?.containers.find((x) => x.name === 'edge-ccm');
  if (!c) throw new Error('no edge-ccm container');
  return c;
}

test('kustomization.yaml covers every manifest, and all of them are accepted by the API server', async () => {
  const text = readFileSync(join(DIR, 'kustomization.yaml'), 'utf8');
  const kustomization = parseYaml(text) as { resources?: string[] };
  expect(kustomization.resources).toEqual(expect.arrayContaining(['crds.yaml', 'rbac.yaml', 'deployment.yaml']));
  // The rest are opt-in and named in its comments, so a new manifest cannot be forgotten there.
  for (const file of manifestFiles) expect(text).toContain(file);
  const kinds = applied.map((o) => `${o.kind}/${o.metadata.name}`);
  for (const want of [
    'ServiceAccount/cloud-controller-manager', 'ClusterRole/system:edge-ccm', 'ClusterRoleBinding/system:edge-ccm',
    'Role/edge-ccm:leader-election', 'RoleBinding/edge-ccm:leader-election', 'Deployment/edge-ccm',
  ]) expect(kinds).toContain(want);
  // Each object is really stored (not only accepted).
  for (const obj of applied) {
    const got = await admin.request<{ metadata: { name: string; namespace?: string } }>({ method: 'GET', path: objectPath(obj) });
    expect(got.metadata.name).toBe(obj.metadata.name);
  }
});

test('the Deployment: two replicas in kube-system on control-plane nodes, under the shipped service account', () => {
  const pod = deployment.spec?.template.spec;
  expect(deployment.metadata?.namespace).toBe('kube-system');
  expect(deployment.spec?.replicas).toBe(2);
  expect(pod?.serviceAccountName).toBe(applied.find((o) => o.kind === 'ServiceAccount')?.metadata.name);
  expect(pod?.hostNetwork).toBe(true);
  const required = pod?.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms ?? [];
  expect(required.flatMap((t) => t.matchExpressions ?? [])).toContainEqual({ key: 'node-role.kubernetes.io/control-plane', operator: 'Exists' });
  const tolerated = (pod?.tolerations ?? []).map((t) => `${t.key}:${t.effect ?? ''}`);
  for (const taint of ['node.cloudprovider.kubernetes.io/uninitialized:NoSchedule', 'node-role.kubernetes.io/control-plane:NoSchedule', 'node.kubernetes.io/not-ready:NoSchedule']) {
    expect(tolerated).toContain(taint);
  }
});

test('the container: leader election, valid flags, cloud config from the ConfigMap, probes, requests, no privileges', () => {
  const c = container();
  // As the kubelet starts it on a node whose address (the host-network pod's IP) is POD_IP.
  const POD_IP = '198.51.100.7';
  const { options } = parseArgs(kubeletArgs(c, { 'status.podIP': POD_IP })); // throws on any unknown or invalid flag
  // Served on the pod's IP, where Prometheus can scrape it (not loopback, not every interface).
  expect(options.bindAddress).toBe(POD_IP);
  expect(options.leaderElect).toBe(true);
  expect(options.cloudProvider).toBe('static');
  expect(options.securePort).toBe(10258);
  const mount = c.volumeMounts?.find((m) => options.cloudConfig.startsWith(`${m.mountPath}/`));
  expect(mount?.readOnly).toBe(true);
  const volume = deployment.spec?.template.spec?.volumes?.find((v) => v.name === mount?.name);
  expect(volume?.configMap?.name).toBe('edge-ccm-cloud-config');
  expect(volume?.configMap?.items).toBeUndefined(); // the whole map: the file name is the key

  for (const [probe, path] of [[c.livenessProbe, '/livez'], [c.readinessProbe, '/readyz']] as const) {
    expect(probe?.httpGet).toMatchObject({ path, port: 10258, scheme: 'HTTPS' });
    // A host-network pod bound to one address must be probed there: no host is the pod's IP.
    expect(probe?.httpGet?.host).toBeUndefined();
  }
  expect(c.ports?.[0]?.containerPort).toBe(10258);
  // (Plain checks: toMatchObject with expect.any() would overwrite the values it matched.)
  expect([typeof c.resources?.requests?.cpu, typeof c.resources?.requests?.memory]).toEqual(['string', 'string']);

  const pod = deployment.spec?.template.spec?.securityContext;
  expect(pod).toMatchObject({ runAsNonRoot: true, runAsUser: 65532, runAsGroup: 65532 });
  expect(c.securityContext).toMatchObject({
    runAsNonRoot: true,
    runAsUser: 65532,
    allowPrivilegeEscalation: false,
    readOnlyRootFilesystem: true,
    capabilities: { drop: ['ALL'] },
  });
});

test("a pod from the template passes the API server's admission (service account, priority class)", async () => {
  // dryRun: admission and validation run, nothing is stored. The ServiceAccount and Priority
  // plugins check that the account (from rbac.yaml) and the priority class exist.
  const template = deployment.spec?.template;
  const pod: V1Pod = { apiVersion: 'v1', kind: 'Pod', metadata: { ...template?.metadata, name: 'edge-ccm-dry-run', namespace: 'kube-system' }, spec: template?.spec };
  const created = await admin.request<V1Pod>({ method: 'POST', path: '/api/v1/namespaces/kube-system/pods', query: { dryRun: 'All' }, body: pod });
  expect(created.spec?.serviceAccountName).toBe('cloud-controller-manager');
  expect(created.spec?.priority).toBeGreaterThan(1_000_000_000); // system-cluster-critical
  // A wrong account name is refused, so the check above means something.
  const wrong = { ...pod, spec: { ...pod.spec, serviceAccountName: 'no-such-account' } } as V1Pod;
  const refused = await admin.request({ method: 'POST', path: '/api/v1/namespaces/kube-system/pods', query: { dryRun: 'All' }, body: wrong }).then(() => undefined, (e: unknown) => e);
  expect(String(refused)).toContain('no-such-account');
});

/** Keys of the providers' configs whose value is a file edge-ccm reads. */
const FILE_KEYS = /^(passwordFile|tokenSecretFile|caFile)$/;
const CREDENTIAL_FILE = /^\$\{CREDENTIALS_DIRECTORY\}\/([\w.-]+)$/;

/** Every `key: value` of a YAML text whose key matches, commented-out lines included (they are examples too). */
function yamlValues(text: string, key: RegExp): { key: string; value: string }[] {
  return [...text.matchAll(/^\s*#?\s*(?:- )?(\w+):\s*(\S+)/gm)].filter((m) => key.test(m[1] as string)).map((m) => ({ key: m[1] as string, value: m[2] as string }));
}

test("credentials: a Secret volume of their own, named to edge-ccm by CREDENTIALS_DIRECTORY, readable through the pod's group", () => {
  const c = container();
  const pod = deployment.spec?.template.spec;
  const { options } = parseArgs(kubeletArgs(c, { 'status.podIP': '198.51.100.7' }));
  const credentialsDirectory = c.env?.find((e) => e.name === 'CREDENTIALS_DIRECTORY')?.value;
  expect(credentialsDirectory).toMatch(/^\//);
  const secretMount = c.volumeMounts?.find((m) => m.mountPath === credentialsDirectory);
  expect(secretMount?.readOnly).toBe(true);
  const secretVolume = pod?.volumes?.find((v) => v.name === secretMount?.name);
  expect(secretVolume?.secret?.secretName).toBe('edge-ccm-secrets');
  expect(secretVolume?.secret?.items).toBeUndefined(); // every key is a file
  // The kubelet gives the files to the pod's fsGroup with at least 0440: the group is the pod's own.
  expect(secretVolume?.secret?.defaultMode).toBe(0o440);
  expect(pod?.securityContext?.fsGroup).toBe(pod?.securityContext?.runAsGroup);
  // The cloud config stays in the ConfigMap, another volume; no mount lies inside another (the
  // mount point would have to be made in a read-only volume).
  const configMount = c.volumeMounts?.find((m) => options.cloudConfig.startsWith(`${m.mountPath}/`));
  expect(pod?.volumes?.find((v) => v.name === configMount?.name)?.configMap?.name).toBe('edge-ccm-cloud-config');
  const paths = (c.volumeMounts ?? []).map((m) => m.mountPath);
  for (const a of paths) for (const b of paths) expect({ a, b, nested: a !== b && b.startsWith(`${a}/`) }).toEqual({ a, b, nested: false });
});

test('each example loads as the pod sees it: its files from the Secret, created as docs/install.md says and read back from the API server', async () => {
  const c = container();
  const pod = deployment.spec?.template.spec;
  const env = new Map((c.env ?? []).map((e) => [e.name, e.value ?? '']));
  for (const [example, load] of [['inventory.yaml', loadStaticConfig], ['proxmox.yaml', loadProxmoxConfig]] as const) {
    const text = readFileSync(join(ROOT, 'examples', example), 'utf8');
    // Every file an example names is a key of the Secret (kubectl create secret generic --from-file=KEY=FILE).
    const files = yamlValues(text, FILE_KEYS).map((f) => ({ ...f, key: CREDENTIAL_FILE.exec(f.value)?.[1] }));
    expect(files.length).toBeGreaterThan(0);
    expect(files.filter((f) => !f.key)).toEqual([]);
    const namespace = `example-${example.replace('.yaml', '')}`;
    const secret: V1Secret = {
      apiVersion: 'v1', kind: 'Secret', type: 'Opaque', metadata: { name: 'edge-ccm-secrets', namespace },
      data: Object.fromEntries(files.map((f) => [f.key, Buffer.from(`secret of ${f.key}\n`).toString('base64')])),
    };
    const configMap: V1ConfigMap = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'edge-ccm-cloud-config', namespace }, data: { 'cloud-config.yaml': text } };
    await applyManifests(admin, JSON.stringify({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: namespace } }));
    const [storedSecret, storedConfigMap] = await Promise.all([secret, configMap].map(async (o) => {
      await applyManifests(admin, JSON.stringify(o));
      return admin.request<V1Secret & V1ConfigMap>({ method: 'GET', path: objectPath(o as ManifestObject) });
    }));
    // The pod's file system: each mount shows its volume's keys as files.
    const readFile = (path: string): string => {
      const mount = c.volumeMounts?.find((m) => path.startsWith(`${m.mountPath}/`));
      const volume = pod?.volumes?.find((v) => v.name === mount?.name);
      const key = path.slice((mount?.mountPath.length ?? 0) + 1);
      const data = volume?.secret ? storedSecret?.data?.[key] : volume?.configMap ? storedConfigMap?.data?.[key] : undefined;
      if (!mount || data === undefined) throw new Error(`ENOENT: ${path} is not in the pod`);
      return volume?.secret ? Buffer.from(data, 'base64').toString('utf8') : data;
    };
    expect(readFile(options().cloudConfig)).toBe(text);
    const source: SecretSource = { readFile, env: (name) => env.get(name) };
    const loaded = load(text, source);
    expect({ example, errors: loaded.ok ? [] : loaded.errors }).toEqual({ example, errors: [] });
  }
});

function options() {
  return parseArgs(kubeletArgs(container(), { 'status.podIP': '198.51.100.7' })).options;
}

test("speaker.yaml's patch for announceFrom: nodes gives the speaker only the named key of edge-ccm-secrets, where the Deployment has it", async () => {
  // The command its header shows, run as kubectl would (a strategic merge patch).
  const header = readFileSync(join(DIR, 'speaker.yaml'), 'utf8');
  const patch = /^#\s+kubectl -n kube-system patch daemonset edge-ccm-speaker -p '(.+)'$/m.exec(header)?.[1];
  if (!patch) throw new Error('speaker.yaml shows no patch for the speaker credentials');
  const ds = applied.find((o) => o.kind === 'DaemonSet' && o.metadata.name === 'edge-ccm-speaker');
  if (!ds) throw new Error('no DaemonSet edge-ccm-speaker in speaker.yaml');
  const patched = await admin.request<V1DaemonSet>({ method: 'PATCH', path: objectPath(ds), rawBody: patch, contentType: 'application/strategic-merge-patch+json' });
  const pod = patched.spec?.template.spec;
  const speaker = pod?.containers.find((c) => c.name === 'speaker');
  const directory = container().env?.find((e) => e.name === 'CREDENTIALS_DIRECTORY')?.value;
  const controllerMount = container().volumeMounts?.find((m) => m.mountPath === directory);
  expect(speaker?.env?.find((e) => e.name === 'CREDENTIALS_DIRECTORY')?.value).toBe(directory as string);
  const mount = speaker?.volumeMounts?.find((m) => m.mountPath === directory);
  expect(mount?.readOnly).toBe(true);
  expect(pod?.volumes?.find((v) => v.name === mount?.name)?.secret).toEqual({
    secretName: deployment.spec?.template.spec?.volumes?.find((v) => v.name === controllerMount?.name)?.secret?.secretName as string,
    items: [{ key: 'bgp-router-1', path: 'bgp-router-1' }],
    defaultMode: 0o400,
  });
  // Merged into the manifest's, nothing of it replaced.
  expect(pod?.volumes?.map((v) => v.name).sort()).toEqual(['cloud-config', 'credentials', 'key']);
  expect(speaker?.volumeMounts?.map((m) => m.name).sort()).toEqual(['cloud-config', 'credentials', 'key']);
  expect(speaker?.env?.map((e) => e.name).sort()).toEqual(['BUN_JSC_useDFGJIT', 'CREDENTIALS_DIRECTORY', 'MIMALLOC_PURGE_HOLES_MIN_INTERVAL', 'NODE_NAME']);
});
