import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { join } from 'node:path';
import type { V1Service } from '@kubernetes/client-node';
import { ResourceClient, SERVICES } from '../../src/kube/resources.ts';
import type { KubeTransport } from '../../src/kube/transport.ts';
import { LB_CLEANUP_FINALIZER } from '../../src/kube/service-helpers.ts';
import { ADDRESS_ASSIGNED_CONDITION, ASSIGNED_POOL_ANNOTATION } from '../../src/controllers/service/address-condition.ts';
import type { Compatibility } from '../../src/lb/compatibility.ts';
import { readAuditLog, type AuditEntry } from '../harness/audit.ts';
import { CcmProcess, tempDir } from '../harness/ccm-process.ts';
import { sharedControlPlane, type ControlPlane } from '../harness/control-plane.ts';
import { eventually } from '../harness/eventually.ts';
import { replaceFile } from '../harness/files.ts';
import { transportFor } from '../harness/kubeconfig.ts';
import { createNamespace, deleteNamespace } from '../harness/namespaces.ts';

/**
 * The cutover from MetalLB, kube-vip or Cilium, with the compiled binary against the real API
 * server: services addressed by a stand-in for each (status and annotations written as that
 * manager writes them: requested addresses, pools, sharing keys, older spellings, auto-assigned
 * ones), then edge-ccm started with `compatibility: [<source>]` and pools holding those
 * addresses. Every address stays as it was; the audit log shows that edge-ccm wrote nothing to
 * these services but its finalizer and its condition (with the pool annotation), never the
 * ingress; and the adopted addresses are held: a new service gets one nobody had.
 */

const RUN = `cutover-${process.pid}`;

interface StandIn {
  name: string;
  ip: string;
  annotations?: Record<string, string>;
  port?: number;
  loadBalancerIP?: string;
  /** Conditions the source writes on the service's status (Cilium does). */
  conditions?: NonNullable<V1Service['status']>['conditions'];
}

interface Source {
  name: Compatibility;
  /** The loadBalancer.pools entries holding the source's addresses (as `edge-ccm import` writes them). */
  pools: string;
  services: StandIn[];
  /** What a new service without annotations gets: the lowest address no adopted service holds. */
  nextFree: string;
}

const SOURCES: Source[] = [
  {
    name: 'metallb',
    pools: `
    - name: mlb-a
      addresses: [203.0.113.144-203.0.113.151]
    - name: mlb-b
      addresses: [203.0.113.152-203.0.113.159]
      autoAssign: false`,
    services: [
      // MetalLB records the pool it took an address from in an annotation of its own.
      { name: 'auto', ip: '203.0.113.144', annotations: { 'metallb.io/ip-allocated-from-pool': 'mlb-a' } },
      { name: 'requested', ip: '203.0.113.150', annotations: { 'metallb.io/loadBalancerIPs': '203.0.113.150' } },
      { name: 'old-spelling', ip: '203.0.113.147', annotations: { 'metallb.universe.tf/loadBalancerIPs': '203.0.113.147' } },
      { name: 'pool', ip: '203.0.113.152', annotations: { 'metallb.io/address-pool': 'mlb-b', 'metallb.io/ip-allocated-from-pool': 'mlb-b' } },
      { name: 'share-http', ip: '203.0.113.146', port: 80, annotations: { 'metallb.io/allow-shared-ip': 'web' } },
      { name: 'share-https', ip: '203.0.113.146', port: 443, annotations: { 'metallb.io/allow-shared-ip': 'web' } },
    ],
    nextFree: '203.0.113.145',
  },
  {
    name: 'kube-vip',
    pools: `
    - name: kv-global
      addresses: [203.0.113.160-203.0.113.175]`,
    services: [
      // kube-vip-cloud-provider writes the annotation (older releases spec.loadBalancerIP too);
      // kube-vip writes the status and the host it runs the address on.
      { name: 'a', ip: '203.0.113.160', annotations: { 'kube-vip.io/loadbalancerIPs': '203.0.113.160', 'kube-vip.io/vipHost': 'node-1' } },
      { name: 'b', ip: '203.0.113.162', loadBalancerIP: '203.0.113.162', annotations: { 'kube-vip.io/loadbalancerIPs': '203.0.113.162' } },
      { name: 'c', ip: '203.0.113.165', annotations: { 'kube-vip.io/loadbalancerIPs': '203.0.113.165', 'kube-vip.io/vipHost': 'node-2' } },
    ],
    nextFree: '203.0.113.161',
  },
  {
    name: 'cilium',
    pools: `
    - name: blue
      addresses: [203.0.113.176-203.0.113.191]`,
    services: [
      { name: 'auto', ip: '203.0.113.176', conditions: [ciliumSatisfied()] },
      { name: 'requested', ip: '203.0.113.180', annotations: { 'lbipam.cilium.io/ips': '203.0.113.180' }, conditions: [ciliumSatisfied()] },
      { name: 'old-spelling', ip: '203.0.113.182', annotations: { 'io.cilium/lb-ipam-ips': '203.0.113.182' }, conditions: [ciliumSatisfied()] },
      { name: 'share-a', ip: '203.0.113.181', port: 80, annotations: { 'lbipam.cilium.io/sharing-key': 'k' }, conditions: [ciliumSatisfied()] },
      { name: 'share-b', ip: '203.0.113.181', port: 8080, annotations: { 'lbipam.cilium.io/sharing-key': 'k' }, conditions: [ciliumSatisfied()] },
    ],
    nextFree: '203.0.113.177',
  },
];

function ciliumSatisfied() {
  return { type: 'io.cilium/lb-ipam-request-satisfied', status: 'True', reason: 'satisfied', message: '', lastTransitionTime: '2025-01-01T00:00:00Z' as unknown as Date };
}

let cp: ControlPlane;
let admin: KubeTransport;
let services: ResourceClient<V1Service>;
const namespaces: string[] = [];

beforeAll(async () => {
  cp = await sharedControlPlane();
  admin = transportFor(cp.adminKubeconfig);
  services = new ResourceClient<V1Service>(admin, SERVICES);
}, 240_000);

afterAll(async () => {
  await CcmProcess.stopAll('SIGTERM');
  for (const name of namespaces) await deleteNamespace(admin, name);
}, 120_000);

/** A service as the source left it: created, then its status (and annotations) written. */
async function standIn(namespace: string, s: StandIn): Promise<void> {
  await services.create({
    metadata: { name: s.name, namespace, annotations: s.annotations },
    spec: { type: 'LoadBalancer', ports: [{ port: s.port ?? 80, protocol: 'TCP' }], loadBalancerIP: s.loadBalancerIP, selector: { app: s.name } },
  });
  await services.patch(s.name, 'merge', { status: { loadBalancer: { ingress: [{ ip: s.ip, ipMode: 'VIP' }] }, conditions: s.conditions } }, { namespace, subresource: 'status' });
}

const ingressIPs = (s: V1Service) => (s.status?.loadBalancer?.ingress ?? []).map((i) => i.ip);
const isEdgeCcm = (e: AuditEntry) => e.userAgent?.startsWith('edge-ccm/') ?? false;

for (const source of SOURCES) describe(`cutover from ${source.name}`, () => {
  const namespace = `${RUN}-${source.name}`;
  let ccm: CcmProcess;

  test('every address unchanged; edge-ccm writes only its finalizer and condition; the adopted addresses are held', async () => {
    await createNamespace(admin, namespace);
    namespaces.push(namespace);
    for (const s of source.services) await standIn(namespace, s);
    const before = new Map((await services.list({ namespace })).items.map((s) => [s.metadata!.name!, s]));
    for (const s of source.services) expect(ingressIPs(before.get(s.name)!)).toEqual([s.ip]);

    const config = join(tempDir(`edge-ccm-cutover-${source.name}-`), 'static.yaml');
    replaceFile(config, `loadBalancer:
  compatibility: [${source.name}]
  pools:${source.pools.replaceAll('\n    - name:', `\n    - namespaces: [${namespace}]\n      name:`)}
`);
    ccm = CcmProcess.binary([
      '--cloud-provider=static', `--cloud-config=${config}`, `--kubeconfig=${cp.adminKubeconfig}`,
      '--secure-port=0', '--controllers=service', `--leader-elect-resource-name=${namespace}`,
      '--leader-elect-lease-duration=3s', '--leader-elect-renew-deadline=2s', '--leader-elect-retry-period=500ms',
    ]);
    const adopted = await eventually(`every ${source.name} service adopted (finalizer and AddressAssigned True)`, async () => {
      const items = (await services.list({ namespace })).items;
      const done = items.filter((s) => s.metadata?.finalizers?.includes(LB_CLEANUP_FINALIZER) &&
        s.status?.conditions?.some((c) => c.type === ADDRESS_ASSIGNED_CONDITION && c.status === 'True'));
      return done.length === source.services.length ? items : undefined;
    }, { timeoutMs: 90_000, explain: () => ccm.logs().slice(-4000) });

    for (const s of adopted) {
      const was = before.get(s.metadata!.name!)!;
      // Every address exactly as the source left it, ipMode included.
      expect(s.status!.loadBalancer).toEqual(was.status!.loadBalancer!);
      // The source's own annotations and conditions are untouched.
      for (const [k, v] of Object.entries(was.metadata?.annotations ?? {})) expect(s.metadata!.annotations![k]).toBe(v);
      for (const c of was.status?.conditions ?? []) expect(s.status!.conditions).toContainEqual(c);
      expect(s.metadata!.annotations![ASSIGNED_POOL_ANNOTATION]).toBeTruthy();
    }

    // A new service: the lowest address none of the adopted services holds.
    await services.create({ metadata: { name: 'new', namespace }, spec: { type: 'LoadBalancer', ports: [{ port: 80, protocol: 'TCP' }] } });
    const fresh = await eventually('the new service addressed', async () => {
      const s = await services.get('new', { namespace });
      return s.status?.loadBalancer?.ingress?.length ? s : undefined;
    }, 60_000);
    expect(ingressIPs(fresh)).toEqual([source.nextFree]);

    // The audit log: every request edge-ccm made about the adopted services. The API server
    // writes it after answering, so wait until the last adoption write is in.
    const names = new Set(source.services.map((s) => s.name));
    const ours = await eventually('the adoption writes in the audit log', async () => {
      const entries = readAuditLog(cp.auditLogPath).filter((e) => isEdgeCcm(e) && e.objectRef?.namespace === namespace && names.has(e.objectRef?.name ?? ''));
      const statusWrites = entries.filter((e) => e.verb === 'patch');
      return statusWrites.length >= 2 * source.services.length ? entries : undefined;
    }, 30_000);
    expect(ours.every((e) => e.verb === 'patch' && e.objectRef?.resource === 'services' && e.objectRef.subresource === 'status')).toBe(true);
    for (const e of ours) {
      const body = e.requestObject as { metadata?: Record<string, unknown>; status?: Record<string, unknown> };
      expect(Object.keys(body).filter((k) => k !== 'metadata' && k !== 'status')).toEqual([]);
      // The finalizer, or the condition (with the pool annotation): never the ingress.
      expect(body.status?.loadBalancer).toBeUndefined();
      for (const k of Object.keys(body.metadata ?? {})) expect(['finalizers', 'annotations']).toContain(k);
      for (const k of Object.keys((body.metadata?.annotations as object | undefined) ?? {})) expect(k).toBe(ASSIGNED_POOL_ANNOTATION);
      for (const k of Object.keys(body.status ?? {})) expect(k).toBe('conditions');
      for (const c of (body.status?.conditions as { type: string }[] | undefined) ?? []) expect(c.type).toBe(ADDRESS_ASSIGNED_CONDITION);
    }
    // One finalizer write and one condition write per service, no more.
    expect(ours).toHaveLength(2 * source.services.length);

    expect(await ccm.stop('SIGTERM')).toBe(0);
  }, 240_000);
});
