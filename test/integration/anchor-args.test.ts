import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { join } from 'node:path';
import { sharedControlPlane, type ControlPlane } from '../harness/control-plane.ts';
import { CcmProcess } from '../harness/ccm-process.ts';
import { freeLoopbackPorts } from '../harness/ports.ts';

/**
 * The command lines the anchors' own Helm charts and manifests pass to their cloud-controller-
 * managers, rendered with the charts' default values (read from each project's repository, paths
 * below), given to edge-ccm with our provider name: it must start, serve and lead. What the test
 * changes, and only that: --cloud-provider and --cloud-config (ours), a --kubeconfig (a pod
 * would be in-cluster), --secure-port/--bind-address (a free loopback port: tests share the
 * machine), and the chart's $(ENV) references expanded as the kubelet would.
 */
const ROOT = join(import.meta.dir, '../..');
const INVENTORY = join(ROOT, 'examples/inventory.yaml');

interface Anchor {
  name: string;
  /** Where the arguments come from. */
  source: string;
  args: string[];
}

const ANCHORS: Anchor[] = [
  {
    name: 'hcloud',
    source: 'hetznercloud/hcloud-cloud-controller-manager chart/.snapshots/full.yaml (the chart rendered by its own snapshot test)',
    args: ['--allow-untagged-cloud', '--cloud-provider=hcloud', '--route-reconciliation-period=30s', '--webhook-secure-port=0', '--leader-elect=false'],
  },
  {
    name: 'Proxmox (sergelogvinov)',
    source: 'sergelogvinov/proxmox-cloud-controller-manager charts/proxmox-cloud-controller-manager/templates/deployment.yaml, values.yaml defaults',
    args: [
      '--v=2', '--cloud-provider=proxmox', '--cloud-config=/etc/proxmox/config.yaml', '--controllers=cloud-node,cloud-node-lifecycle',
      '--leader-elect-resource-name=cloud-controller-manager-proxmox', '--use-service-account-credentials', '--secure-port=10258',
    ],
  },
  {
    name: 'Talos',
    source: 'siderolabs/talos-cloud-controller-manager charts/talos-cloud-controller-manager/templates/deployment.yaml, values.yaml defaults',
    args: [
      '--v=2', '--cloud-provider=talos', '--cloud-config=/etc/talos/ccm-config.yaml', '--controllers=cloud-node',
      '--leader-elect-resource-name=cloud-controller-manager-talos', '--use-service-account-credentials', '--secure-port=50258',
      '--authorization-always-allow-paths=/healthz,/livez,/readyz,/metrics',
    ],
  },
  {
    name: 'OpenStack',
    source: 'kubernetes/cloud-provider-openstack charts/openstack-cloud-controller-manager/templates/daemonset.yaml, values.yaml defaults',
    args: [
      '--v=2', '--cloud-config=/etc/config/cloud.conf', '--cluster-name=kubernetes', '--cloud-provider=openstack',
      '--use-service-account-credentials=false', '--controllers=cloud-node,cloud-node-lifecycle,route,service', '--bind-address=127.0.0.1',
    ],
  },
  {
    name: 'vSphere',
    source: 'kubernetes/cloud-provider-vsphere charts/vsphere-cpi/templates/daemonset.yaml, values.yaml defaults',
    args: ['--cloud-provider=vsphere', '--v=2', '--cloud-config=/etc/cloud/vsphere.conf'],
  },
  {
    name: 'CIS-hardened (the flags of issue 13 that used to exit 2)',
    source: 'a kube-bench-style hardening of the upstream flags (this repository\'s issue 13)',
    args: [
      '--cloud-provider=anything', '--profiling=false', '--tls-min-version=VersionTLS12',
      '--tls-cipher-suites=TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384',
      '--feature-gates=CloudControllerManagerWatchBasedRoutesReconciliation=true', '--webhook-secure-port=0', '--vmodule=server=2',
      '--enable-leader-migration', '--allow-untagged-cloud', '--concurrent-node-status-updates=4', '--leader-elect-resource-name=cis-hardened',
    ],
  },
];

/** The anchor's args with ours in place of what cannot be theirs here (see the file comment). */
function asOurs(args: string[], port: number, kubeconfig: string): string[] {
  const replaced = args.filter((a) => !/^--(cloud-provider|cloud-config|secure-port|bind-address)=/.test(a));
  return [
    ...replaced, '--cloud-provider=static', `--cloud-config=${INVENTORY}`, `--kubeconfig=${kubeconfig}`,
    `--secure-port=${port}`, '--bind-address=127.0.0.1',
  ];
}

let cp: ControlPlane;
const started: CcmProcess[] = [];

beforeAll(async () => {
  cp = await sharedControlPlane();
}, 240_000);

afterAll(async () => {
  await Promise.all(started.map((p) => p.stop()));
});

describe('the anchors\' chart arguments start edge-ccm', () => {
  test.each(ANCHORS.map((a) => [a.name, a] as const))('%s', async (_name, anchor) => {
    const [port] = await freeLoopbackPorts(1);
    const ccm = CcmProcess.binary(asOurs(anchor.args, port!, cp.adminKubeconfig));
    started.push(ccm);
    await ccm.waitForLog('serving securely', 60_000);
    const leads = !anchor.args.includes('--leader-elect=false');
    if (leads) await ccm.waitForLog('successfully acquired lease', 60_000);
    else await ccm.waitForLog('started controller', 60_000);
    const healthz = await fetch(`https://127.0.0.1:${port}/healthz`, { tls: { rejectUnauthorized: false } });
    expect(healthz.status).toBe(200);
    expect(ccm.logs()).not.toMatch(/^error: /m);
    const code = await ccm.stop();
    expect({ anchor: anchor.name, code }).toEqual({ anchor: anchor.name, code: 0 });
  }, 120_000);

  test('flags without meaning here are named in one warning line, with why', async () => {
    const [port] = await freeLoopbackPorts(1);
    const ccm = CcmProcess.binary(asOurs(ANCHORS[0]!.args, port!, cp.adminKubeconfig));
    started.push(ccm);
    await ccm.waitForLog('serving securely', 60_000);
    const warnings = ccm.logs().split('\n').filter((l) => l.includes('flags accepted for compatibility that have no effect'));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain('--allow-untagged-cloud (');
    expect(warnings[0]).toContain('--webhook-secure-port (edge-ccm serves no admission webhooks');
    await ccm.stop();
  }, 120_000);
});
