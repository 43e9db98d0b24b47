import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { join } from 'node:path';
import { readFileSync, writeFileSync } from 'node:fs';
import { parse } from 'yaml';
import type { KubeTransport } from '../../src/kube/transport.ts';
import { loadStaticConfig } from '../../providers/static/config-load.ts';
import { CcmProcess, tempDir } from '../harness/ccm-process.ts';
import { sharedControlPlane, type ControlPlane } from '../harness/control-plane.ts';
import { eventually } from '../harness/eventually.ts';
import { transportFor } from '../harness/kubeconfig.ts';
import { applyManifests } from '../harness/manifests.ts';

/**
 * `edge-ccm import` (the compiled binary) reading each source's objects from the real API
 * server: MetalLB's and Cilium's pool CRDs (their schemas reduced to what the import reads),
 * kube-vip's ConfigMap. The section it writes loads in the daemon, and every feature it did
 * not convert is on stderr and in the file. A cluster without the source's CRDs is "no pools".
 */

const ID = `import-${process.pid}`;
let cp: ControlPlane;
let admin: KubeTransport;
const crds: string[] = [];

function crd(group: string, version: string, kind: string, plural: string, scope: 'Namespaced' | 'Cluster'): string {
  crds.push(`${plural}.${group}`);
  return `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: { name: ${plural}.${group} }
spec:
  group: ${group}
  scope: ${scope}
  names: { kind: ${kind}, plural: ${plural}, singular: ${kind.toLowerCase()} }
  versions:
    - name: ${version}
      served: true
      storage: true
      schema:
        openAPIV3Schema: { type: object, x-kubernetes-preserve-unknown-fields: true }
---
`;
}

beforeAll(async () => {
  cp = await sharedControlPlane();
  admin = transportFor(cp.adminKubeconfig);
}, 240_000);

afterAll(async () => {
  for (const name of crds) await admin.request({ method: 'DELETE', path: `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${name}` }).catch(() => undefined);
  await admin.request({ method: 'DELETE', path: `/api/v1/namespaces/${ID}` }).catch(() => undefined);
});

/** Runs the binary's import; its exit code, stdout and stderr. */
async function runImport(args: string[]): Promise<{ code: number; out: string; err: string }> {
  const dir = tempDir('edge-ccm-import-');
  const outFile = join(dir, 'pools.yaml');
  const p = CcmProcess.binary(['import', ...args, `--kubeconfig=${cp.adminKubeconfig}`, '-o', outFile]);
  const code = await p.exited();
  let out = '';
  try {
    out = readFileSync(outFile, 'utf8');
  } catch {
    // no file written
  }
  return { code, out, err: p.logs() };
}

function loads(text: string) {
  const loaded = loadStaticConfig(text);
  if (!loaded.ok) throw new Error(`${JSON.stringify(loaded.errors)}\n${text}`);
  return loaded.config.loadBalancer;
}

describe('from the cluster', () => {
  test('metallb: IPAddressPools and what is not converted; before its CRDs exist, no pools', async () => {
    const none = await runImport(['metallb']);
    expect(none.code).toBe(0);
    expect(none.err).toContain('warning: no metallb pools found');

    await applyManifests(admin, `apiVersion: v1\nkind: Namespace\nmetadata: { name: ${ID} }\n---\n` +
      crd('metallb.io', 'v1beta1', 'IPAddressPool', 'ipaddresspools', 'Namespaced') +
      crd('metallb.io', 'v1beta1', 'L2Advertisement', 'l2advertisements', 'Namespaced'));
    await eventually('the MetalLB CRDs served', () => admin.request({ method: 'GET', path: '/apis/metallb.io/v1beta1/ipaddresspools' }).then(() => true, () => undefined));
    await applyManifests(admin, `apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: { name: lan, namespace: ${ID} }
spec:
  addresses: [198.51.100.64/28]
  serviceAllocation: { namespaceSelectors: [{ matchLabels: { env: prod } }] }
---
apiVersion: metallb.io/v1beta1
kind: L2Advertisement
metadata: { name: lan, namespace: ${ID} }
spec: { ipAddressPools: [lan] }
`);
    const r = await runImport(['metallb']);
    expect(r.code).toBe(0);
    const lb = loads(r.out);
    expect(lb.compatibility).toEqual(['metallb']);
    expect(lb.pools.map((p) => p.name)).toEqual(['lan']);
    expect(r.err).toContain(`not converted: L2Advertisement ${ID}/lan: announce its pools with announce: l2`);
    expect(r.err).toContain(`not converted: IPAddressPool ${ID}/lan: spec.serviceAllocation.namespaceSelectors`);
    expect(r.out).toContain(`#   - L2Advertisement ${ID}/lan`);
    expect(r.out).toContain(`from the cluster at ${cp.server}`);
  }, 120_000);

  test('cilium: CiliumLoadBalancerIPPools (v2alpha1 when v2 is not served)', async () => {
    await applyManifests(admin, crd('cilium.io', 'v2alpha1', 'CiliumLoadBalancerIPPool', 'ciliumloadbalancerippools', 'Cluster'));
    await eventually('the Cilium CRD served', () => admin.request({ method: 'GET', path: '/apis/cilium.io/v2alpha1/ciliumloadbalancerippools' }).then(() => true, () => undefined));
    // Cluster-scoped, which applyManifests does not know this kind to be.
    await admin.request({ method: 'POST', path: '/apis/cilium.io/v2alpha1/ciliumloadbalancerippools', body: {
      apiVersion: 'cilium.io/v2alpha1', kind: 'CiliumLoadBalancerIPPool', metadata: { name: `${ID}-blue` },
      spec: { allowFirstLastIPs: 'No', blocks: [{ cidr: '203.0.113.96/28' }], serviceSelector: { matchLabels: { color: 'blue' } } },
    } });
    const r = await runImport(['cilium']);
    expect(r.code).toBe(0);
    const pools = loads(r.out).pools;
    expect(pools.map((p) => p.name)).toContain(`${ID}-blue`);
    expect(pools.find((p) => p.name === `${ID}-blue`)!.serviceSelector!({ color: 'blue' })).toBe(true);
  }, 120_000);

  test('kube-vip: the kubevip ConfigMap of the namespace given', async () => {
    await applyManifests(admin, `apiVersion: v1
kind: ConfigMap
metadata: { name: kubevip, namespace: ${ID} }
data:
  cidr-global: 198.51.100.128/29
  range-${ID}: 198.51.100.140-198.51.100.141
`);
    const r = await runImport(['kube-vip', '--namespace', ID]);
    expect(r.code).toBe(0);
    expect(loads(r.out).pools.map((p) => [p.name, p.namespaces])).toEqual([[`kube-vip-${ID}`, [ID]], ['kube-vip-global', undefined]]);
    expect(r.err).not.toContain('not converted');
  }, 120_000);
});

describe('from files and bad input', () => {
  test('-f reads manifests without a cluster; a section our validator refuses exits 2 but is written', async () => {
    const dir = tempDir('edge-ccm-import-files-');
    const file = join(dir, 'pools.yaml');
    writeFileSync(file, ['a', 'b'].map((n) => `apiVersion: cilium.io/v2alpha1\nkind: CiliumLoadBalancerIPPool\nmetadata: { name: ${n} }\nspec: { blocks: [{ cidr: 198.51.100.0/28 }], allowFirstLastIPs: "No" }\n`).join('---\n'));
    const out = join(dir, 'out.yaml');
    const p = CcmProcess.binary(['import', 'cilium', '-f', file, '-o', out]);
    expect(await p.exited()).toBe(2);
    expect(p.logs()).toContain('error: the converted pools would be refused: loadBalancer.pools[1].addresses: pool "b" overlaps pool "a" at 198.51.100.1');
    expect((parse(readFileSync(out, 'utf8')) as { loadBalancer: { pools: unknown[] } }).loadBalancer.pools).toHaveLength(2);
  });

  test('an unknown source, or none, exits 2 with the usage', async () => {
    for (const args of [['import'], ['import', 'calico']]) {
      const p = CcmProcess.binary(args);
      expect(await p.exited()).toBe(2);
      expect(p.logs()).toContain('error: import: name one source: metallb, kube-vip, cilium');
      expect(p.logs()).toContain('usage: edge-ccm import');
    }
  });
});
