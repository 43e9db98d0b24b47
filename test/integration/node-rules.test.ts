import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { CoreV1Event, V1Node, V1Taint } from '@kubernetes/client-node';
import { EVENTS, NODES, ResourceClient } from '../../src/kube/resources.ts';
import type { KubeTransport } from '../../src/kube/transport.ts';
import { replaceFile } from '../harness/files.ts';
import { CcmProcess, ccmBinaryCommand, tempDir } from '../harness/ccm-process.ts';
import { sharedControlPlane } from '../harness/control-plane.ts';
import { eventually } from '../harness/eventually.ts';
import { kubeletNode } from '../harness/nodes.ts';
import { transportFor } from '../harness/kubeconfig.ts';
import { runToEnd } from '../harness/run-to-end.ts';

/**
 * Node rules (docs/operations.md, "Node rules") with the compiled binary and the static provider
 * against the real control plane: a node gets node-role.kubernetes.io/worker and, on the GPU
 * machine, a taint at initialisation, in the same write that removes the uninitialized taint
 * (no version of the node without both); an edit of the rules and of a machine's labels reaches
 * the nodes without a restart, changing and removing only what the rules put there; and
 * `validate` refuses a reserved key with its path and line and warns of a rule no machine matches.
 */

const ID = `rules-${process.pid}`;
const UNINITIALIZED = 'node.cloudprovider.kubernetes.io/uninitialized';
const WORKER = 'node-role.kubernetes.io/worker';
const GPU_TAINT: V1Taint = { key: 'example.com/gpu', value: 'a100', effect: 'NoSchedule' };
const nodeName = (n: number) => `${ID}-n${n}`;

/** Two machines, m1 with a GPU label; `rules` is the nodeRules section. */
function config(rules: string, m2Labels = '{}'): string {
  return `inventory:
  defaults: { region: it-region }
  machines:
    - id: ${ID}-m1
      nodeName: ${nodeName(1)}
      labels: { example.com/gpu: a100 }
      addresses: [{ type: InternalIP, address: 10.78.0.11 }]
    - id: ${ID}-m2
      nodeName: ${nodeName(2)}
      labels: ${m2Labels}
      addresses: [{ type: InternalIP, address: 10.78.0.12 }]
${rules}`;
}

const FIRST_RULES = `nodeRules:
  - name: workers
    labels: { ${WORKER}: "" }
  - name: gpus
    nodeSelector: [{ matchLabels: { example.com/gpu: a100 } }]
    labels: { example.com/accelerator: a100 }
    annotations: { example.com/note: gpu machine }
    taints: [{ key: example.com/gpu, value: a100, effect: NoSchedule }]
`;

/** Workers gone; GPU machines get another label value and no taint; a storage rule on m2's new label. */
const SECOND_RULES = `nodeRules:
  - name: gpus
    nodeSelector: [{ matchLabels: { example.com/gpu: a100 } }]
    labels: { example.com/accelerator: a100-80g }
  - name: storage
    nodeSelector: [{ matchExpressions: [{ key: label:example.com/disks, operator: Exists }] }]
    labels: { node-role.kubernetes.io/storage: "" }
    taints: [{ key: example.com/storage, effect: PreferNoSchedule }]
  - name: nobody
    nodeSelector: [{ matchExpressions: [{ key: name, operator: Glob, values: ["db-*"] }] }]
    labels: { node-role.kubernetes.io/db: "" }
`;

let admin: KubeTransport;
let nodes: ResourceClient<V1Node>;
let ccm: CcmProcess | undefined;
const ccmLog = { explain: () => ccm?.logs().slice(-4000) ?? '' };
let dir: string;
let configPath: string;

beforeAll(async () => {
  const cp = await sharedControlPlane();
  admin = transportFor(cp.adminKubeconfig);
  nodes = new ResourceClient<V1Node>(admin, NODES);
  dir = tempDir('edge-ccm-node-rules-');
  configPath = join(dir, 'inventory.yaml');
  replaceFile(configPath, config(FIRST_RULES));
  ccm = CcmProcess.binary([
    '--cloud-provider=static', `--cloud-config=${configPath}`, `--kubeconfig=${cp.adminKubeconfig}`,
    '--secure-port=0', `--leader-elect-resource-name=${ID}`, '--controllers=cloud-node',
    '--leader-elect-lease-duration=3s', '--leader-elect-renew-deadline=2s', '--leader-elect-retry-period=500ms',
  ]);
  await ccm.waitForLog('successfully acquired lease', 60_000);
}, 120_000);

afterAll(async () => {
  const code = await ccm?.stop();
  if (code !== undefined && code !== 0) console.error(`edge-ccm exited ${code}:\n${ccm?.logs().slice(-4000)}`);
  if (nodes) {
    const ours = (await nodes.list()).items.filter((n) => n.metadata?.name?.startsWith(`${ID}-`));
    await Promise.allSettled(ours.map((n) => nodes.delete(n.metadata!.name!)));
  }
}, 60_000);

const hasTaint = (n: V1Node, key: string) => (n.spec?.taints ?? []).some((t) => t.key === key);
/** The taints outside Kubernetes' namespaces (the API server's TaintNodesByCondition adds node.kubernetes.io/not-ready to a new node). */
const ownTaints = (n: V1Node) => (n.spec?.taints ?? []).filter((t) => !t.key.includes('kubernetes.io/'));
const NOT_READY = 'node.kubernetes.io/not-ready';

async function initialised(name: string): Promise<V1Node> {
  return eventually(`node ${name} initialised`, async () => {
    const n = await nodes.get(name);
    return n.spec?.providerID && !hasTaint(n, UNINITIALIZED) ? n : undefined;
  }, { timeoutMs: 30_000, ...ccmLog });
}

/** Every version of node `name` the API server reports from now on, until `signal` aborts. */
function recordVersions(name: string, signal: AbortSignal): V1Node[] {
  const versions: V1Node[] = [];
  void (async () => {
    for await (const event of admin.watch<V1Node>('/api/v1/nodes', { fieldSelector: `metadata.name=${name}` }, signal)) {
      if (event.type === 'ADDED' || event.type === 'MODIFIED') versions.push(event.object);
    }
  })().catch(() => undefined);
  return versions;
}

describe('node rules with the compiled binary', () => {
  test('at initialisation: the role label on every node, the GPU taint with the uninitialized taint\'s removal, a user\'s label untouched', async () => {
    const watching = new AbortController();
    const versions = recordVersions(nodeName(1), watching.signal);
    await Bun.sleep(200); // the watch is open before the node exists
    await nodes.create(kubeletNode(nodeName(1), { labels: { 'example.com/owner': 'ops', 'example.com/accelerator': 'mine' } }));
    await nodes.create(kubeletNode(nodeName(2)));
    const [n1, n2] = await Promise.all([initialised(nodeName(1)), initialised(nodeName(2))]);
    watching.abort();
    // No moment when pods could schedule on the GPU machine without its taint.
    const untaintedVersions = versions.filter((v) => !hasTaint(v, UNINITIALIZED));
    expect(untaintedVersions.length).toBeGreaterThan(0);
    for (const v of untaintedVersions) expect(v.spec?.taints).toContainEqual(GPU_TAINT);

    expect(n1.metadata?.labels).toMatchObject({ [WORKER]: '', 'example.com/owner': 'ops', 'example.com/accelerator': 'mine', 'topology.kubernetes.io/region': 'it-region' });
    expect(n1.metadata?.annotations).toMatchObject({
      'example.com/note': 'gpu machine',
      // What the rules set, and only that: the label the user set at registration is not listed.
      'node.edge-ccm.io/rule-labels': WORKER,
      'node.edge-ccm.io/rule-annotations': 'example.com/note',
      'node.edge-ccm.io/rule-taints': 'example.com/gpu:NoSchedule',
    });
    expect(ownTaints(n1)).toEqual([GPU_TAINT]);
    expect(n2.metadata?.labels?.[WORKER]).toBe('');
    expect(n2.metadata?.labels?.['example.com/accelerator']).toBeUndefined();
    expect(ownTaints(n2)).toEqual([]);
    // The API server's own taint is left where it is.
    expect(hasTaint(n1, NOT_READY) && hasTaint(n2, NOT_READY)).toBe(true);
    expect(ccm!.logs()).toContain('not applying node rule');
  }, 60_000);

  test('an edit of the rules and of a machine\'s labels: only what the rules put there changes; the user\'s labels and taints stay', async () => {
    // The user labels and taints n1 by hand meanwhile (kubectl label/taint).
    const n1 = await nodes.get(nodeName(1));
    await nodes.patch(nodeName(1), 'merge', {
      metadata: { resourceVersion: n1.metadata?.resourceVersion, labels: { 'node-role.kubernetes.io/infra': '' } },
      spec: { taints: [...(n1.spec?.taints ?? []), { key: 'example.com/maintenance', effect: 'NoSchedule' }] },
    });
    const pid = ccm!.pid;
    replaceFile(configPath, config(SECOND_RULES, '{ example.com/disks: "4" }'));

    const after1 = await eventually('n1 follows the new rules', async () => {
      const n = await nodes.get(nodeName(1));
      return n.metadata?.labels?.[WORKER] === undefined && !hasTaint(n, 'example.com/gpu') ? n : undefined;
    }, { timeoutMs: 30_000, ...ccmLog });
    // The user's label still wins over the rule's value; the user's own role label and taint stay.
    expect(after1.metadata?.labels).toMatchObject({ 'example.com/owner': 'ops', 'example.com/accelerator': 'mine', 'node-role.kubernetes.io/infra': '' });
    expect(ownTaints(after1)).toEqual([{ key: 'example.com/maintenance', effect: 'NoSchedule' }]);
    expect(hasTaint(after1, NOT_READY)).toBe(true);
    expect(after1.metadata?.annotations?.['example.com/note']).toBeUndefined();
    for (const kind of ['labels', 'annotations', 'taints']) expect(after1.metadata?.annotations?.[`node.edge-ccm.io/rule-${kind}`]).toBeUndefined();

    // m2's new inventory label (a fact) brings it under the storage rule.
    const after2 = await eventually('n2 follows its new fact', async () => {
      const n = await nodes.get(nodeName(2));
      return n.metadata?.labels?.['node-role.kubernetes.io/storage'] === '' && n.metadata?.labels?.[WORKER] === undefined ? n : undefined;
    }, { timeoutMs: 30_000, ...ccmLog });
    expect(ownTaints(after2)).toEqual([{ key: 'example.com/storage', effect: 'PreferNoSchedule' }]);
    expect(after2.metadata?.annotations).toMatchObject({ 'node.edge-ccm.io/rule-labels': 'node-role.kubernetes.io/storage', 'node.edge-ccm.io/rule-taints': 'example.com/storage:PreferNoSchedule' });
    expect(ccm!.pid).toBe(pid);
    expect(ccm!.logs()).not.toContain('error re-syncing node rules');
    // The rule no machine matches: a Warning event on edge-ccm's Lease, as validate would say.
    const events = new ResourceClient<CoreV1Event>(admin, EVENTS);
    const warning = await eventually('NodeRuleMatchesNoMachine event', async () => {
      const list = await events.list({ namespace: 'kube-system', query: { fieldSelector: `involvedObject.kind=Lease,involvedObject.name=${ID},reason=NodeRuleMatchesNoMachine` } });
      return list.items[0];
    }, { timeoutMs: 10_000, ...ccmLog });
    expect(warning.message).toContain('nodeRules[2].name: node rule "nobody" matches no machine in service of the inventory');
  }, 60_000);

  test('validate: a reserved key refused with its path and line; a rule that matches no machine is a warning', async () => {
    const validate = (path: string) => runToEnd(ccmBinaryCommand(['validate', '--cloud-provider=static', `--cloud-config=${path}`]), { timeoutMs: 30_000 });
    const bad = join(dir, 'bad.yaml');
    writeFileSync(bad, config(`nodeRules:
  - name: zones
    labels: { topology.kubernetes.io/zone: z1, ${WORKER}: "" }
`));
    const refused = await validate(bad);
    expect({ exitCode: refused.exitCode, output: refused.output.trim().split('\n') }).toEqual({
      exitCode: 2,
      output: [
        `${bad}:14: nodeRules[0].labels["topology.kubernetes.io/zone"]: label key "topology.kubernetes.io/zone" is in a namespace Kubernetes reserves (kubernetes.io, k8s.io and their subdomains); of those, rules may set only node-role.kubernetes.io/*`,
        '1 problem found',
      ],
    });

    const unmatched = join(dir, 'unmatched.yaml');
    writeFileSync(unmatched, config(`${FIRST_RULES}  - name: nobody
    nodeSelector: [{ matchExpressions: [{ key: name, operator: Glob, values: ["db-*"] }] }]
    labels: { node-role.kubernetes.io/db: "" }
`));
    const warned = await validate(unmatched);
    expect({ exitCode: warned.exitCode, output: warned.output.trim().split('\n') }).toEqual({
      exitCode: 0,
      output: [`${unmatched}:20: nodeRules[2].name: warning: node rule "nobody" matches no machine in service of the inventory`, `${unmatched}: valid static configuration`],
    });
  }, 60_000);
});
