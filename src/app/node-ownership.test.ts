import { describe, expect, test } from 'bun:test';
import type { V1Node } from '@kubernetes/client-node';
import { nodeOwnershipPredicate } from './node-ownership.ts';
import { parseLabelSelector } from '../kube/label-selector.ts';

const UNINITIALIZED = { key: 'node.cloudprovider.kubernetes.io/uninitialized', value: 'true', effect: 'NoSchedule' };
/** Without a providerID a node is a kubelet waiting for us (tainted), unless `joinedElsewhere`. */
const node = (providerID?: string, labels?: Record<string, string>, joinedElsewhere = false): V1Node => ({
  metadata: { name: 'n', labels },
  spec: { providerID, taints: providerID || joinedElsewhere ? [] : [UNINITIALIZED] },
});

describe('label selectors', () => {
  const cases: [string, Record<string, string> | undefined, boolean][] = [
    ['', undefined, true],
    ['a=b', { a: 'b' }, true],
    ['a==b', { a: 'c' }, false],
    ['a!=b', {}, true],
    ['a!=b', { a: 'b' }, false],
    ['a in (x, y)', { a: 'y' }, true],
    ['a notin (x,y)', { a: 'x' }, false],
    ['a', { a: '' }, true],
    ['!a', { a: '' }, false],
    ['edge-ccm.io/managed=true,tier in (edge)', { 'edge-ccm.io/managed': 'true', tier: 'edge' }, true],
    ['edge-ccm.io/managed=true,tier in (edge)', { 'edge-ccm.io/managed': 'true', tier: 'core' }, false],
  ];
  for (const [selector, labels, want] of cases) {
    test(`${JSON.stringify(selector)} on ${JSON.stringify(labels)}: ${want}`, () => expect(parseLabelSelector(selector)(labels)).toBe(want));
  }
  test('a bad key or value is refused, naming it', () => {
    expect(() => parseLabelSelector('a=b c')).toThrow('invalid label value "b c"');
    expect(() => parseLabelSelector('-a=b')).toThrow('invalid label key "-a"');
  });
});

describe('node ownership', () => {
  test('no prefixes and no selector: every node is managed (upstream)', () => {
    const owns = nodeOwnershipPredicate({ providerIDPrefixes: [] });
    expect([owns(node()), owns(node('aws:///x')), owns(node('static://a'))]).toEqual([true, true, true]);
  });
  test('prefixes: a set providerID must match one; a node not yet initialised is ours to try', () => {
    const owns = nodeOwnershipPredicate({ providerIDPrefixes: ['static://', 'metal://'] });
    expect([owns(node('static://a')), owns(node('metal://b')), owns(node('hcloud://1')), owns(node())]).toEqual([true, true, false, true]);
  });
  test('prefixes: a node with no providerID and no uninitialized taint was joined by someone else: not ours', () => {
    // e.g. bare-metal nodes joined without --cloud-provider=external: never judged, never deleted.
    const owns = nodeOwnershipPredicate({ providerIDPrefixes: ['proxmox://'] });
    expect(owns(node(undefined, {}, true))).toBe(false);
    expect(owns(node(undefined, {}))).toBe(true);
    // Without prefixes, upstream: every node.
    expect(nodeOwnershipPredicate({ providerIDPrefixes: [] })(node(undefined, {}, true))).toBe(true);
  });
  test('selector: required before and after initialisation, together with the prefixes', () => {
    const owns = nodeOwnershipPredicate({ providerIDPrefixes: ['static://'], labelSelector: 'edge-ccm.io/managed=true' });
    expect(owns(node(undefined, { 'edge-ccm.io/managed': 'true' }))).toBe(true);
    expect(owns(node(undefined, {}))).toBe(false);
    expect(owns(node('static://a', { 'edge-ccm.io/managed': 'true' }))).toBe(true);
    expect(owns(node('other://a', { 'edge-ccm.io/managed': 'true' }))).toBe(false);
  });
});
