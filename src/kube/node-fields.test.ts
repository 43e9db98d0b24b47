import { describe, expect, test } from 'bun:test';
import type { V1Node } from '@kubernetes/client-node';
import { Glob } from 'bun';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DROPPED_NODE_STATUS_FIELDS, stripUnreadNodeFields } from './node-fields.ts';

const ROOT = join(import.meta.dir, '../..');

/** A node as a kubelet reports it, every status field filled. */
function kubeletNode(): V1Node {
  return {
    apiVersion: 'v1', kind: 'Node',
    metadata: { name: 'n1', uid: 'u1', resourceVersion: '9', labels: { a: 'b' }, annotations: { c: 'd' }, managedFields: [{ manager: 'kubelet', operation: 'Update' }] },
    spec: { providerID: 'fake://n1', podCIDR: '10.0.0.0/24', podCIDRs: ['10.0.0.0/24'], taints: [{ key: 'k', effect: 'NoSchedule' }], unschedulable: true },
    status: {
      addresses: [{ type: 'InternalIP', address: '198.51.100.1' }],
      conditions: [{ type: 'Ready', status: 'True' }],
      nodeInfo: { systemUUID: 'abc', architecture: 'arm64', bootID: '', containerRuntimeVersion: '', kernelVersion: '', kubeProxyVersion: '', kubeletVersion: '', machineID: '', operatingSystem: 'linux', osImage: '' },
      images: [{ names: ['registry.example/app:1'], sizeBytes: 1 }],
      volumesAttached: [{ name: 'v', devicePath: '/dev/x' }], volumesInUse: ['v'],
      daemonEndpoints: { kubeletEndpoint: { Port: 10250 } },
      config: {}, capacity: { cpu: '2' }, allocatable: { cpu: '2' }, runtimeHandlers: [], features: {},
    },
  };
}

describe('the node informer keeps what is read', () => {
  test('the dropped fields go; names, labels, annotations, spec, addresses, conditions and nodeInfo stay', () => {
    const node = stripUnreadNodeFields(kubeletNode());
    expect(node.metadata).toEqual({ name: 'n1', uid: 'u1', resourceVersion: '9', labels: { a: 'b' }, annotations: { c: 'd' } });
    expect(node.spec).toEqual(kubeletNode().spec!);
    expect(Object.keys(node.status!).sort()).toEqual(['addresses', 'conditions', 'nodeInfo']);
    expect(node.status!.nodeInfo!.systemUUID).toBe('abc');
  });

  // Static: every source file a controller or provider is made of, searched for a read of a
  // dropped field (`.status.images`, `status?.capacity`, `['volumesInUse']`, a destructured
  // `{ images }` of a status). Reads through a computed name would escape it; there are none.
  test('no controller or provider source reads a dropped node field', () => {
    const names = DROPPED_NODE_STATUS_FIELDS.join('|');
    const reads = [
      new RegExp(`status\\??\\.(${names})\\b`),
      new RegExp(`\\[['"\`](${names})['"\`]\\]`),
      new RegExp(`\\{[^}]*\\b(${names})\\b[^}]*\\}\\s*=\\s*[\\w.?]*status\\b`),
      /\bmanagedFields\b/,
    ];
    const offenders: string[] = [];
    for (const dir of ['src', 'providers']) {
      for (const file of new Glob('**/*.ts').scanSync(join(ROOT, dir))) {
        if (file.endsWith('.test.ts')) continue; // tests build nodes with every field
        const path = `${dir}/${file}`;
        if (path === 'src/kube/node-fields.ts' || path === 'src/kube/informer/informer.ts') continue; // where they are dropped
        if (path.endsWith('.test.ts')) continue; // tests build whole kubelet nodes; only what runs matters
        const lines = readFileSync(join(ROOT, path), 'utf8').split('\n');
        lines.forEach((line, i) => {
          if (/^\s*(\/\*|\*|\/\/)/.test(line)) return; // comments
          if (reads.some((r) => r.test(line))) offenders.push(`${path}:${i + 1}: ${line.trim()}`);
        });
      }
    }
    expect(offenders).toEqual([]);
  });

  test('the scan finds a read of a dropped field', () => {
    const names = DROPPED_NODE_STATUS_FIELDS.join('|');
    const r = new RegExp(`status\\??\\.(${names})\\b`);
    expect(r.test('const n = node.status?.images?.length;')).toBe(true);
    expect(r.test('const n = node.status?.addresses?.length;')).toBe(false);
  });
});
