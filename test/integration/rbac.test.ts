import { afterAll, afterEach, beforeAll, describe, expect, test } from 'bun:test';
import { readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { V1CertificateSigningRequest, V1Node, V1Service } from '@kubernetes/client-node';
import { startControlPlane, type ControlPlane } from '../harness/control-plane.ts';
import { readAuditLog, type AuditEntry } from '../harness/audit.ts';
import { replaceFile } from '../harness/files.ts';
import { CcmProcess, tempDir } from '../harness/ccm-process.ts';
import { applyManifests, parseManifests } from '../harness/manifests.ts';
import { transportFor, writeKubeconfig } from '../harness/kubeconfig.ts';
import { freeLoopbackPorts } from '../harness/ports.ts';
import { CERTIFICATE_SIGNING_REQUESTS, NODES, ResourceClient, SERVICES } from '../../src/kube/resources.ts';
import type { BunKubeTransport } from '../../src/kube/transport.ts';
import { eventually } from '../harness/eventually.ts';
import { UNINITIALIZED } from '../harness/nodes.ts';
import { helmTemplate } from '../harness/helm.ts';
import { createSigningRequest } from '../harness/certs.ts';
import { KubeApiError } from '../../src/kube/errors.ts';

/**
 * Least privilege, proven: edge-ccm runs every controller, leader election, events and
 * delegated auth under exactly the manifests in deploy/kubernetes, and the API server's audit
 * log shows that each identity made every kind of request it needs and got no 403. The same
 * scenario runs under the Helm chart's RBAC rendered for another release, namespace and service
 * account (deploy/kubernetes is the chart rendered with its defaults).
 */
const SA = (name: string, namespace = 'kube-system') => `system:serviceaccount:${namespace}:${name}`;
const DEPLOY = resolve(import.meta.dir, '../../deploy/kubernetes');

/** Where the RBAC under test comes from, and the identity it is bound to. */
interface RbacSource {
  label: string;
  namespace: string;
  serviceAccount: string;
  /** The ClusterRole whose every grant the scenario must use. */
  clusterRole: string;
  /** The Lease in kube-system the Role lets it take (a new one per source: its create is checked). */
  leaseName: string;
  /** The service account, its roles and bindings. */
  rbac(): string;
  /** The opt-in objects for --use-service-account-credentials. */
  serviceAccountCredentials(): string;
  /** The opt-in objects for node IPAM's CloudAllocator (its ConfigMap beside the Lease). */
  nodeIPAM(): string;
  /** The opt-in ClusterRole of node-csr-approval. */
  csrApproval(): string;
}

const CHART = { release: 'rbac-chart', namespace: 'edge-ccm-rbac', serviceAccount: 'edge-ccm-chart', leaseName: 'edge-ccm-rbac-chart' };
const CHART_VALUES = { serviceAccount: { name: CHART.serviceAccount }, leaderElection: { leaseName: CHART.leaseName } };
const SOURCES: RbacSource[] = [
  {
    label: 'deploy/kubernetes',
    namespace: 'kube-system',
    serviceAccount: 'cloud-controller-manager',
    clusterRole: 'system:edge-ccm',
    leaseName: 'cloud-controller-manager',
    rbac: () => readFileSync(join(DEPLOY, 'rbac.yaml'), 'utf8'),
    serviceAccountCredentials: () => readFileSync(join(DEPLOY, 'rbac-service-account-credentials.yaml'), 'utf8'),
    nodeIPAM: () => readFileSync(join(DEPLOY, 'rbac-node-ipam.yaml'), 'utf8'),
    csrApproval: () => readFileSync(join(DEPLOY, 'rbac-node-csr-approval.yaml'), 'utf8'),
  },
  {
    label: `the Helm chart (release ${CHART.release} in ${CHART.namespace}, service account ${CHART.serviceAccount})`,
    namespace: CHART.namespace,
    serviceAccount: CHART.serviceAccount,
    clusterRole: `system:${CHART.release}-edge-ccm`,
    leaseName: CHART.leaseName,
    rbac: () => [
      `apiVersion: v1\nkind: Namespace\nmetadata:\n  name: ${CHART.namespace}\n---\n`,
      helmTemplate({ ...CHART, values: CHART_VALUES, showOnly: ['rbac.yaml'] }),
    ].join(''),
    serviceAccountCredentials: () =>
      helmTemplate({ ...CHART, values: { ...CHART_VALUES, useServiceAccountCredentials: true }, showOnly: ['rbac-service-account-credentials.yaml'] }),
    nodeIPAM: () =>
      helmTemplate({ ...CHART, values: { ...CHART_VALUES, nodeIPAM: { enabled: true, cidrAllocatorType: 'CloudAllocator' } }, showOnly: ['rbac-node-ipam.yaml'] }),
    csrApproval: () => helmTemplate({ ...CHART, values: { ...CHART_VALUES, csrApproval: { enabled: true } }, showOnly: ['rbac-node-csr-approval.yaml'] }),
  },
];


let cp: ControlPlane;
let admin: BunKubeTransport;
let ccm: CcmProcess | undefined;

/** eventually()'s failure shows edge-ccm's recent output. */
const withCcmLog = { explain: () => ccm?.logs().slice(-3000) ?? '' };

beforeAll(async () => {
  cp = await startControlPlane();
  admin = transportFor(cp.adminKubeconfig);
  // The AddressPool and EdgeCCMStatus kinds, as the chart installs them (deploy/kubernetes is the chart rendered).
  await applyManifests(admin, readFileSync(join(DEPLOY, 'crds.yaml'), 'utf8'));
  await eventually('the edge-ccm.io CRDs served', () => admin.request({ method: 'GET', path: '/apis/edge-ccm.io/v1alpha1/addresspools' }).then(() => true, () => undefined));
}, 240_000);

afterEach(() => CcmProcess.stopAll());
afterAll(() => cp?.stop());

/**
 * Runs edge-ccm as the source's service account through node initialisation, routes, a load
 * balancer's life, a node deletion and a protected /metrics request; returns the audit log's
 * entries since the scenario started (so a later source's run proves something of its own).
 */
async function runScenario(source: RbacSource, prefix: string, extraFlags: string[]): Promise<AuditEntry[]> {
  const ccmUser = SA(source.serviceAccount, source.namespace);
  const isLeaseUpdate = (e: AuditEntry) => e.user?.username === ccmUser && e.verb === 'update' && e.objectRef?.resource === 'leases';
  const earlier = (await readAudit()).length;
  const dir = tempDir('edge-ccm-rbac-');
  const token = await cp.serviceAccountToken(source.namespace, source.serviceAccount);
  const kubeconfig = await writeKubeconfig(join(dir, 'ccm.yaml'), cp.server, cp.caPem, 'ccm', { token });
  const fakeConfig = join(dir, 'fake.json');
  const auto = { instanceType: 'fake.small', zone: 'z1', region: 'r1', externalIP: '203.0.113.7' };
  const [port, closedPort] = await freeLoopbackPorts(2);
  // A BGP speaker (its peer never answers): the leader watches EndpointSlices for it.
  const bgp = { localAsn: 64512, routerId: '198.51.100.2', listen: false, peers: [{ address: '127.0.0.1', port: closedPort, asn: 65000 }] };
  const [a, b, svc] = [`${prefix}-a`, `${prefix}-b`, `${prefix}-lb`];
  // Two pools: AddressPool objects created, their status written, one deleted when its pool goes.
  // Written by edge-ccm's own account whatever the flags (no controller's), so not named with the prefix.
  const [poolA, poolB] = [`pool-a-${prefix}`, `pool-b-${prefix}`];
  writeFileSync(fakeConfig, JSON.stringify({ autoMetadata: auto, bgp, pools: [poolA, poolB] }));

  ccm = CcmProcess.fake([
    '--cloud-provider=fake', `--cloud-config=${fakeConfig}`, `--kubeconfig=${kubeconfig}`,
    '--cluster-cidr=10.244.0.0/16', '--bind-address=127.0.0.1', `--secure-port=${port}`,
    `--leader-elect-resource-name=${source.leaseName}`, '--leader-elect-lease-duration=3s', '--leader-elect-renew-deadline=2s', '--leader-elect-retry-period=500ms',
    '--node-monitor-period=300ms', '--route-reconciliation-period=1s',
    '--node-deletion-grace-period=0s', '--node-deletion-not-found-threshold=1', '--node-deletion-breaker-max-share=1',
    // Node IPAM's CloudAllocator: node b registers without pod CIDRs and gets them, recorded in the ConfigMap.
    '--controllers=*,nodeipam', '--allocate-node-cidrs', '--cidr-allocator-type=CloudAllocator',
    ...extraFlags,
  ]);
  await ccm.waitForLog('successfully acquired lease');
  const addressPool = (name: string) => admin.request<{ status?: { conditions?: unknown[] } }>({ method: 'GET', path: `/apis/edge-ccm.io/v1alpha1/addresspools/${name}` });
  await eventually('AddressPool objects published', async () => ((await addressPool(poolB).catch(() => undefined))?.status?.conditions?.length ? true : undefined), withCcmLog);

  const nodes = new ResourceClient<V1Node>(admin, NODES);
  const services = new ResourceClient<V1Service>(admin, SERVICES);
  // A kubelet with --cloud-provider=external registers with the uninitialized taint, and its
  // addresses in the same create (nodes keep status on create): a status patch after it raced
  // the controller, whose ExternalIP it could replace away (CI at 7c595cc).
  for (const [i, name] of [a, b].entries()) {
    const podCIDRs = name === a ? [`10.244.${i + 1}.0/24`] : undefined;
    await nodes.create({ metadata: { name }, spec: { podCIDRs, taints: [UNINITIALIZED] }, status: { addresses: [{ type: 'InternalIP', address: `10.1.0.${i + 1}` }] } });
  }
  await eventually(`node ${b} given pod CIDRs by node IPAM`, async () => ((await nodes.get(b)).spec?.podCIDRs?.length ? true : undefined), withCcmLog);
  await eventually('node initialised', async () => {
    const n = await nodes.get(a);
    return n.spec?.providerID && !n.spec.taints?.some((t) => t.key === UNINITIALIZED.key) && n.status?.addresses?.some((x) => x.type === 'ExternalIP') ? n : undefined;
  }, withCcmLog);
  await eventually('route condition', async () => {
    const n = await nodes.get(a);
    return n.status?.conditions?.some((c) => c.type === 'NetworkUnavailable' && c.reason === 'RouteCreated') ? n : undefined;
  }, withCcmLog);

  await services.create({ metadata: { name: svc, namespace: 'default' }, spec: { type: 'LoadBalancer', ports: [{ port: 80, protocol: 'TCP' }] } });
  await eventually('ingress', async () => {
    const s = await services.get(svc, { namespace: 'default' });
    return s.status?.loadBalancer?.ingress?.length ? s : undefined;
  }, withCcmLog);
  await services.delete(svc, { namespace: 'default' });
  await eventually('service gone (finalizer removed)', async () => services.get(svc, { namespace: 'default' }).then(() => undefined, () => true), withCcmLog);

  // The machine behind node b disappears and its node goes NotReady: the lifecycle controller deletes it.
  replaceFile(fakeConfig, JSON.stringify({ autoMetadata: auto, bgp, pools: [poolA], existence: { [b]: 'not-found' } }));
  await nodes.patch(b, 'strategic', { status: { conditions: [{ type: 'Ready', status: 'False', reason: 'KubeletDown', lastHeartbeatTime: new Date(), lastTransitionTime: new Date() }] } }, { subresource: 'status' });
  await eventually(`node ${b} deleted`, async () => nodes.get(b).then(() => undefined, () => true), withCcmLog);
  await eventually(`AddressPool ${poolB} deleted with its pool`, async () => addressPool(poolB).then(() => undefined, () => true), withCcmLog);

  // Delegated auth: a token that is not system:masters goes through TokenReview and SubjectAccessReview.
  const viewer = readFileSync(cp.tokenKubeconfig('viewer'), 'utf8').match(/token: (\S+)/)?.[1];
  const res = await fetch(`https://127.0.0.1:${port}/metrics`, { headers: { authorization: `Bearer ${viewer}` }, tls: { rejectUnauthorized: false } });
  expect(res.status).toBe(403);

  // Renewals are lease updates too: count them now, then the release on SIGTERM adds one.
  const updatesBefore = (await readAudit()).filter(isLeaseUpdate).length;
  expect(await ccm.stop('SIGTERM')).toBe(0);
  ccm = undefined;
  await nodes.delete(a);

  // The audit log is written asynchronously: wait for the release to appear in it.
  return eventually('audit entries', async () => {
    const entries = await readAudit();
    return entries.filter(isLeaseUpdate).length > updatesBefore ? entries.slice(earlier) : undefined;
  }, withCcmLog);
}

async function readAudit(): Promise<AuditEntry[]> {
  return readAuditLog(cp.auditLogPath);
}

function requestKinds(entries: AuditEntry[], user: string): Set<string> {
  return new Set(entries.filter((e) => e.user?.username === user)
    .map((e) => `${e.verb} ${e.objectRef?.resource}${e.objectRef?.subresource ? '/' + e.objectRef.subresource : ''}`));
}

function forbidden(entries: AuditEntry[], users: string[]): string[] {
  return entries.filter((e) => users.includes(e.user?.username ?? '') && e.responseStatus?.code === 403).map((e) => `${e.user?.username} ${e.verb} ${e.requestURI}`);
}

for (const [index, source] of SOURCES.entries()) describe(source.label, () => {
  const ccmUser = SA(source.serviceAccount, source.namespace);
  const prefix = index === 0 ? '' : 'chart-';

  test('every controller works under the shipped ClusterRole with no 403', async () => {
    const rbac = source.rbac();
    await applyManifests(admin, rbac);
    await applyManifests(admin, source.nodeIPAM());
    const entries = await runScenario(source, `${prefix}rbac`, []);
    expect(forbidden(entries, [ccmUser])).toEqual([]);
    // The test proves something only if every kind of request really happened.
    const seen = requestKinds(entries, ccmUser);
    for (const want of [
      'list nodes', 'watch nodes', 'patch nodes', 'patch nodes/status', 'delete nodes',
      'list services', 'watch services', 'patch services/status', 'list endpointslices', 'watch endpointslices',
      'create events', 'create leases', 'update leases', 'get leases',
      'create tokenreviews', 'create subjectaccessreviews',
      'list addresspools', 'create addresspools', 'delete addresspools', 'patch addresspools/status',
      'get edgeccmstatuses', 'create edgeccmstatuses', 'patch edgeccmstatuses/status',
      'get configmaps', 'create configmaps',
    ]) expect(seen).toContain(want);
    // And the other way round: the ClusterRole grants nothing edge-ccm does not use. A grant the
    // scenario cannot reach on its own stays only with the reason it is needed.
    const usedOnlyOnRarePaths: Record<string, string> = {
      'get nodes': 'the node controller re-reads a node after a conflicting write',
      'patch events': 'the event recorder counts a repeated event',
      'patch edgeccmstatuses': 'the status publisher removes a node deletion acknowledgment once used (test/integration/cluster-status.test.ts)',
    };
    const unused = [...grantedByClusterRole(rbac, source.clusterRole)].filter((g) => !seen.has(g) && !(g in usedOnlyOnRarePaths));
    expect(unused).toEqual([]);
  }, 180_000);

  test('with --use-service-account-credentials each controller acts as its own service account, with no 403', async () => {
    await applyManifests(admin, source.serviceAccountCredentials());
    const entries = await runScenario(source, `${prefix}sacred`, ['--use-service-account-credentials']);
    const users = [ccmUser, SA('node-controller'), SA('service-controller'), SA('route-controller')];
    expect(forbidden(entries, users)).toEqual([]);
    const ccmSeen = requestKinds(entries, ccmUser);
    for (const want of ['create serviceaccounts/token', 'get serviceaccounts']) expect(ccmSeen).toContain(want);
    // The node IPAM record (created in the first test) is patched by edge-ccm's own account.
    expect(ccmSeen).toContain('patch configmaps');
    expect(requestKinds(entries, SA('node-controller'))).toContain('patch nodes');
    expect(requestKinds(entries, SA('node-controller'))).toContain('delete nodes');
    expect(requestKinds(entries, SA('service-controller'))).toContain('patch services/status');
    expect(requestKinds(entries, SA('route-controller'))).toContain('patch nodes/status');
    // The controllers' writes no longer come from edge-ccm's own account.
    const sacredWrites = entries.filter((e) => e.user?.username === ccmUser && e.verb === 'patch' && e.objectRef?.name?.startsWith(`${prefix}sacred`));
    expect(sacredWrites.map((e) => e.requestURI)).toEqual([]);
  }, 180_000);

  test('node-csr-approval\'s opt-in ClusterRole: reads CSRs, decides kubelet-serving ones only, nothing more', async () => {
    const csrApproval = source.csrApproval();
    await applyManifests(admin, source.rbac()); // its service account (this test may run alone)
    await applyManifests(admin, csrApproval);
    const dir = tempDir('edge-ccm-rbac-csr-');
    const token = await cp.serviceAccountToken(source.namespace, source.serviceAccount);
    const asCcm = transportFor(await writeKubeconfig(join(dir, 'ccm.yaml'), cp.server, cp.caPem, 'ccm', { token }));
    const { csrPem } = await createSigningRequest(dir, 'node', { commonName: 'system:node:n', organizations: ['system:nodes'], dnsNames: ['n'] });
    const file = (name: string, signerName: string, usages: string[]) => new ResourceClient<V1CertificateSigningRequest>(admin, CERTIFICATE_SIGNING_REQUESTS).create({
      apiVersion: 'certificates.k8s.io/v1', kind: 'CertificateSigningRequest', metadata: { name },
      spec: { request: Buffer.from(csrPem).toString('base64'), signerName, usages },
    });
    const [serving, client] = [`${prefix}csr-serving`, `${prefix}csr-client`];
    await file(serving, 'kubernetes.io/kubelet-serving', ['digital signature', 'server auth']);
    await file(client, 'kubernetes.io/kube-apiserver-client-kubelet', ['digital signature', 'client auth']);
    const csrs = new ResourceClient<V1CertificateSigningRequest>(asCcm, CERTIFICATE_SIGNING_REQUESTS);
    const decide = async (name: string, type: 'Approved' | 'Denied', subresource = 'approval') => {
      const csr = await csrs.get(name);
      const conditions = [{ type, status: 'True', reason: 'RBACTest', message: 'rbac test' }];
      return asCcm.request({ method: 'PUT', path: csrs.objectPath(name, undefined, subresource), body: { ...csr, status: { conditions } } });
    };
    const status = (p: Promise<unknown>) => p.then(() => 200, (e) => (e instanceof KubeApiError ? e.status : Promise.reject(e)));

    // What the controller does: list, watch, get, and approve or deny for the kubelet-serving signer.
    await csrs.list();
    // A watch is a stream, not one answer: asked of the API server's authorizer instead.
    const review = await asCcm.request<{ status?: { allowed?: boolean } }>({
      method: 'POST', path: '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews',
      body: { apiVersion: 'authorization.k8s.io/v1', kind: 'SelfSubjectAccessReview', spec: { resourceAttributes: { group: 'certificates.k8s.io', resource: 'certificatesigningrequests', verb: 'watch' } } },
    });
    expect(review.status?.allowed).toBe(true);
    expect(await status(decide(serving, 'Denied'))).toBe(200);
    // Not for another signer (the API server checks `approve` on signers/<signerName>), and no other write.
    expect(await status(decide(client, 'Approved'))).toBe(403);
    expect(await status(decide(client, 'Denied'))).toBe(403);
    expect(await status(decide(serving, 'Approved', 'status'))).toBe(403);
    expect(await status(csrs.delete(client))).toBe(403);
    expect(await status(csrs.create({ metadata: { name: `${prefix}csr-own` }, spec: { request: Buffer.from(csrPem).toString('base64'), signerName: 'kubernetes.io/kubelet-serving', usages: ['server auth'] } }))).toBe(403);
    // Every rule of the ClusterRole is one of the requests above.
    expect([...grantedByClusterRole(csrApproval, `${CHART_PREFIX(index)}edge-ccm:node-csr-approval`)].sort()).toEqual([
      'approve signers', 'get certificatesigningrequests', 'list certificatesigningrequests', 'update certificatesigningrequests/approval', 'watch certificatesigningrequests',
    ]);
  }, 60_000);
});

/** The opt-in ClusterRoles are named after the chart's fullname: "edge-ccm" in deploy/kubernetes, "<release>-edge-ccm" for the chart. */
const CHART_PREFIX = (index: number) => (index === 0 ? '' : `${CHART.release}-`);

/** `verb resource[/subresource]` for every rule of a ClusterRole in the manifests. */
function grantedByClusterRole(manifests: string, name: string): Set<string> {
  const role = parseManifests(manifests).find((o) => o.kind === 'ClusterRole' && o.metadata.name === name) as unknown as
    | { rules: { resources: string[]; verbs: string[] }[] }
    | undefined;
  if (!role) throw new Error(`no ClusterRole ${name} in the RBAC under test`);
  return new Set(role.rules.flatMap((r) => r.resources.flatMap((res) => r.verbs.map((verb) => `${verb} ${res}`))));
}
