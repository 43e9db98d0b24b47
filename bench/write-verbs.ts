/**
 * What each write verb costs the API server: the node initialisation's write (uninitialized
 * taint removed, three labels, providerID) sent to fresh nodes as a JSON merge patch (with and
 * without the resourceVersion precondition), a strategic merge patch (with it), a server-side
 * apply, a JSON patch with a resourceVersion test, and a PUT of the whole node with its
 * resourceVersion. kube-apiserver and etcd CPU from /proc over each batch; the order of the
 * verbs alternates between rounds. Not part of scripts/bench.
 * Usage: bun bench/write-verbs.ts [--nodes=2000] [--rounds=2] [--concurrency=10]
 */
import type { V1Node } from '@kubernetes/client-node';
import { NODES, ResourceClient } from '../src/kube/resources.ts';
import { startControlPlane } from '../test/harness/control-plane.ts';
import { transportFor } from '../test/harness/kubeconfig.ts';
import { controlPlaneCpu, loadAverage } from './machine.ts';
import { createAll, uninitialisedNode } from './workloads.ts';
import { numberOption as opt } from './args.ts';

const perVerb = opt('nodes', 2000);
const rounds = opt('rounds', 2);
const concurrency = opt('concurrency', 10);

const LABELS = { 'node.kubernetes.io/instance-type': 'bench.small', 'topology.kubernetes.io/zone': 'zone-a', 'topology.kubernetes.io/region': 'region-a' };
const providerID = (name: string) => `fake://${name}`;

type Write = (nodes: ResourceClient<V1Node>, node: V1Node) => Promise<unknown>;
const VERBS: Record<string, Write> = {
  'merge patch + resourceVersion': (api, n) => api.patch(n.metadata!.name!, 'merge', {
    metadata: { resourceVersion: n.metadata!.resourceVersion, labels: LABELS }, spec: { providerID: providerID(n.metadata!.name!), taints: [] },
  }),
  'merge patch': (api, n) => api.patch(n.metadata!.name!, 'merge', { metadata: { labels: LABELS }, spec: { providerID: providerID(n.metadata!.name!), taints: [] } }),
  'strategic merge + resourceVersion': (api, n) => api.patch(n.metadata!.name!, 'strategic', {
    metadata: { resourceVersion: n.metadata!.resourceVersion, labels: LABELS },
    spec: { providerID: providerID(n.metadata!.name!), taints: [] }, // taints is not a merging list: replaced whole, as by the merge patch
  }),
  'json patch + resourceVersion test': (api, n) => api.patch(n.metadata!.name!, 'json', [
    { op: 'test', path: '/metadata/resourceVersion', value: n.metadata!.resourceVersion },
    { op: 'add', path: '/metadata/labels', value: LABELS },
    { op: 'add', path: '/spec/providerID', value: providerID(n.metadata!.name!) },
    { op: 'remove', path: '/spec/taints' },
  ]),
  'apply (server-side, force)': (api, n) => api.patch(n.metadata!.name!, 'apply', {
    apiVersion: 'v1', kind: 'Node', metadata: { name: n.metadata!.name, labels: LABELS }, spec: { providerID: providerID(n.metadata!.name!), taints: [] },
  }, { fieldManager: 'bench-apply' }),
  'PUT + resourceVersion': (api, n) => api.update({
    ...n, metadata: { ...n.metadata, labels: { ...n.metadata!.labels, ...LABELS } }, spec: { ...n.spec, providerID: providerID(n.metadata!.name!), taints: [] },
  }),
};

const cp = await startControlPlane();
try {
  const nodes = new ResourceClient<V1Node>(transportFor(cp.adminKubeconfig), NODES);
  const names = Object.keys(VERBS);
  console.log('| round | verb | writes | apiserver CPU ms/write | etcd CPU ms/write | wall s | load avg |');
  console.log('|---|---|---|---|---|---|---|');
  for (let round = 0; round < rounds; round++) {
    for (const verb of round % 2 === 0 ? names : [...names].reverse()) {
      const created: V1Node[] = [];
      await createAll(perVerb, async (i) => {
        created.push(await nodes.create(uninitialisedNode(`wv-${round}-${names.indexOf(verb)}-${String(i).padStart(5, '0')}`)));
      });
      await Bun.sleep(2000); // let the creations' watch fan-out settle
      const before = controlPlaneCpu(cp.dir);
      const load = loadAverage();
      const started = performance.now();
      let next = 0;
      await Promise.all(Array.from({ length: concurrency }, async () => {
        while (next < created.length) await VERBS[verb]!(nodes, created[next++]!);
      }));
      const wall = (performance.now() - started) / 1000;
      const after = controlPlaneCpu(cp.dir);
      const check = await nodes.get(created[0]!.metadata!.name!);
      if (check.spec?.taints?.length || check.spec?.providerID !== providerID(check.metadata!.name!)) throw new Error(`${verb}: the write did not do what it should: ${JSON.stringify(check.spec)}`);
      console.log(`| ${round + 1} | ${verb} | ${perVerb} | ${(((after.apiserver - before.apiserver) * 1000) / perVerb).toFixed(3)} | ${(((after.etcd - before.etcd) * 1000) / perVerb).toFixed(3)} | ${wall.toFixed(1)} | ${load.toFixed(1)} |`);
      await createAll(created.length, (i) => nodes.delete(created[i]!.metadata!.name!).then(() => undefined));
    }
  }
} finally {
  await cp.stop();
}
