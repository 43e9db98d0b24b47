import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { join } from 'node:path';
import type { CoreV1Event, V1CertificateSigningRequest, V1Node } from '@kubernetes/client-node';
import { CERTIFICATE_SIGNING_REQUESTS, EVENTS, NODES, ResourceClient } from '../../src/kube/resources.ts';
import type { KubeTransport } from '../../src/kube/transport.ts';
import { CcmProcess, tempDir } from '../harness/ccm-process.ts';
import { createSigningRequest, type SigningRequest } from '../harness/certs.ts';
import { sharedControlPlane, type ControlPlane } from '../harness/control-plane.ts';
import { eventually } from '../harness/eventually.ts';
import { replaceFile } from '../harness/files.ts';
import { transportFor } from '../harness/kubeconfig.ts';

/**
 * node-csr-approval in the compiled binary (dist/edge-ccm) with the static provider against the
 * real control plane. Real PKCS#10 requests made with openssl as a kubelet makes them, created by
 * the node's own identity (a client certificate CN=system:node:NAME, O=system:nodes), so the API
 * server fills spec.username and spec.groups. Only this controller runs, and only for nodes
 * labelled for this file (others share the control plane).
 */

const ID = `csr-${process.pid}`;
const A = `${ID}-a`;
const B = `${ID}-b`;
/** A Node edge-ccm manages (labelled) whose machine the inventory does not list. */
const STRANGER = `${ID}-stranger`;
const IP_A = '198.51.100.41';
const IP_B = '198.51.100.42';

let cp: ControlPlane;
let admin: KubeTransport;
let nodes: ResourceClient<V1Node>;
let csrs: ResourceClient<V1CertificateSigningRequest>;
let dir: string;
let ccm: CcmProcess;
const created: string[] = [];

beforeAll(async () => {
  cp = await sharedControlPlane();
  admin = transportFor(cp.adminKubeconfig);
  nodes = new ResourceClient<V1Node>(admin, NODES);
  csrs = new ResourceClient<V1CertificateSigningRequest>(admin, CERTIFICATE_SIGNING_REQUESTS);
  dir = tempDir('edge-ccm-node-csr-');
  const inventory = join(dir, 'inventory.yaml');
  await replaceFile(inventory, [
    'inventory:',
    '  machines:',
    `    - id: ${A}`,
    `      addresses: [{ type: InternalIP, address: ${IP_A} }, { type: InternalDNS, address: ${A}.example.test }]`,
    `    - id: ${B}`,
    `      addresses: [{ type: InternalIP, address: ${IP_B} }]`,
    '',
  ].join('\n'));
  for (const name of [A, B, STRANGER]) {
    await nodes.create({ metadata: { name, labels: { 'edge-ccm-test': ID } }, status: { addresses: [{ type: 'Hostname', address: name }] } });
  }
  ccm = CcmProcess.binary([
    '--cloud-provider=static', `--cloud-config=${inventory}`, `--kubeconfig=${cp.adminKubeconfig}`,
    '--secure-port=0', `--leader-elect-resource-name=${ID}`,
    '--leader-elect-lease-duration=3s', '--leader-elect-renew-deadline=2s', '--leader-elect-retry-period=500ms',
    `--managed-node-selector=edge-ccm-test=${ID}`, '--controllers=node-csr-approval',
  ]);
}, 240_000);

afterAll(async () => {
  await CcmProcess.stopAll();
  if (!nodes) return;
  await Promise.allSettled([...[A, B, STRANGER].map((n) => nodes.delete(n)), ...created.map((c) => csrs.delete(c))]);
});

let counter = 0;

/** Creates the CSR as node `node` (its own client certificate) and returns its name. */
async function fileCsr(node: string, req: Partial<SigningRequest>, spec: { signerName?: string; usages?: string[] } = {}): Promise<string> {
  const name = `${ID}-${counter++}`;
  const { csrPem } = await createSigningRequest(dir, name, { commonName: `system:node:${node}`, organizations: ['system:nodes'], ...req });
  const asNode = transportFor(await cp.clientCertKubeconfig(`system:node:${node}`, ['system:nodes']));
  await new ResourceClient<V1CertificateSigningRequest>(asNode, CERTIFICATE_SIGNING_REQUESTS).create({
    apiVersion: 'certificates.k8s.io/v1',
    kind: 'CertificateSigningRequest',
    metadata: { name },
    spec: {
      request: Buffer.from(csrPem).toString('base64'),
      signerName: spec.signerName ?? 'kubernetes.io/kubelet-serving',
      usages: spec.usages ?? ['digital signature', 'server auth'],
    },
  });
  created.push(name);
  return name;
}

/** The decision's condition (type and reason) once there is one. */
async function decided(name: string): Promise<{ type: string; reason?: string; message?: string }> {
  return eventually(`CSR ${name} approved or denied`, async () => {
    const condition = (await csrs.get(name)).status?.conditions?.find((c) => c.type === 'Approved' || c.type === 'Denied');
    return condition ? { type: condition.type, reason: condition.reason, message: condition.message } : undefined;
  }, { timeoutMs: 20_000, explain: () => ccm.logs().slice(-3000) });
}

/** Events on a cluster-scoped object land in "default"; they are written after the decision. */
async function eventRecorded(csr: string, type: string, reason: string): Promise<void> {
  await eventually(`${type} event ${reason} on CSR ${csr}`, async () => {
    const events = await new ResourceClient<CoreV1Event>(admin, EVENTS).list({ namespace: 'default', query: { fieldSelector: `involvedObject.name=${csr}` } });
    return events.items.some((e) => e.type === type && e.reason === reason) || undefined;
  });
}

describe('node-csr-approval (dist/edge-ccm, static provider)', () => {
  test('approves a kubelet serving CSR for the node\'s own hostname, inventory DNS name and address', async () => {
    const name = await fileCsr(A, { dnsNames: [A, `${A}.example.test`], ipAddresses: [IP_A] });
    expect(await decided(name)).toMatchObject({ type: 'Approved' });
    await eventRecorded(name, 'Normal', 'CSRApproved');
  });

  test('denies a node naming another node\'s IP, with the rule and a Warning event', async () => {
    const name = await fileCsr(A, { dnsNames: [A], ipAddresses: [IP_A, IP_B] });
    const condition = await decided(name);
    expect(condition).toMatchObject({ type: 'Denied', reason: 'IPNotOfNode' });
    expect(condition.message).toContain(IP_B);
    await eventRecorded(name, 'Warning', 'CSRDeniedIPNotOfNode');
  });

  test('denies an extra SAN, a weak key, and a node whose machine the inventory does not list', async () => {
    const extra = await fileCsr(B, { dnsNames: [B, 'kubernetes.default.svc'], ipAddresses: [IP_B] });
    const weak = await fileCsr(B, { dnsNames: [B], ipAddresses: [IP_B], key: 'rsa-1024' }, { usages: ['digital signature', 'key encipherment', 'server auth'] });
    const stranger = await fileCsr(STRANGER, { dnsNames: [STRANGER] });
    expect(await decided(extra)).toMatchObject({ type: 'Denied', reason: 'DNSNotOfNode' });
    expect(await decided(weak)).toMatchObject({ type: 'Denied', reason: 'WeakKey' });
    expect(await decided(stranger)).toMatchObject({ type: 'Denied', reason: 'UnmanagedNode' });
  });

  test('leaves a kubelet client CSR alone', async () => {
    const client = await fileCsr(A, {}, { signerName: 'kubernetes.io/kube-apiserver-client-kubelet', usages: ['digital signature', 'client auth'] });
    // A serving CSR filed after it and decided shows the controller has been through its queue.
    const after = await fileCsr(A, { dnsNames: [A], ipAddresses: [IP_A] });
    expect(await decided(after)).toMatchObject({ type: 'Approved' });
    expect((await csrs.get(client)).status?.conditions ?? []).toEqual([]);
  });
});
