import { describe, expect, test } from 'bun:test';
import {
  MissingProviderIDError,
  ProvidedNodeIPError,
  decideNodeAddresses,
  fetchInstanceMetadata,
  isKubernetesNamespacedLabel,
  labelsToReconcile,
  nodeAddressesChangeDetected,
  parseProvidedNodeIP,
  planInitialization,
} from './index.ts';
import type { InstanceMetadata } from '../../cloud/types.ts';
import { FakeCloud, fakeMetadata } from '../../../test/fakes/fake-cloud.ts';
import { EXTERNAL, HOSTNAME, INTERNAL, OTHER_TAINT, UNINITIALIZED, makeNode, untainted } from '../../../test/fakes/node-fixtures.ts';

// Ported from upstream controllers/node/node_controller_test.go (Test_syncNode and friends): each
// case checks the one node write of initialisation and the address write that follows it.

const CLOUD_ADDRESSES = [HOSTNAME('node0.cloud.internal'), INTERNAL('10.0.0.1'), EXTERNAL('132.143.154.163')];

function meta(overrides: Partial<InstanceMetadata> = {}): InstanceMetadata {
  return fakeMetadata('node0', { providerID: 'fake://12345', instanceType: 't1.micro', nodeAddresses: CLOUD_ADDRESSES, ...overrides });
}

describe('initialisation plan', () => {
  test('node initialized with hostname: providerID, instance type labels, taint removed, provider addresses', () => {
    const node = makeNode({ addresses: [HOSTNAME('nodeoverriden')] });
    const { patch } = planInitialization(node, meta());
    expect(patch).toEqual({
      metadata: {
        resourceVersion: '1',
        labels: { 'node.kubernetes.io/instance-type': 't1.micro', 'beta.kubernetes.io/instance-type': 't1.micro' },
      },
      spec: { providerID: 'fake://12345', taints: [] },
    });
    expect(decideNodeAddresses(untainted(node), CLOUD_ADDRESSES)).toEqual({ action: 'write', addresses: CLOUD_ADDRESSES });
  });

  test('cloud provider missing hostname: the node keeps its own Hostname address, last', () => {
    const node = makeNode({ addresses: [HOSTNAME('nodeoverriden')] });
    const cloud = [INTERNAL('10.0.0.1'), EXTERNAL('132.143.154.163')];
    expect(decideNodeAddresses(untainted(node), cloud)).toEqual({
      action: 'write',
      addresses: [INTERNAL('10.0.0.1'), EXTERNAL('132.143.154.163'), HOSTNAME('nodeoverriden')],
    });
  });

  test('only the uninitialized taint goes, every one of them, other taints stay', () => {
    const node = makeNode({ taints: [OTHER_TAINT, UNINITIALIZED, { ...UNINITIALIZED, effect: 'NoExecute' }] });
    expect(planInitialization(node, meta()).patch.spec.taints).toEqual([OTHER_TAINT]);
  });

  test('provider ID already set: kept, not in the patch', () => {
    const node = makeNode({ providerID: 'test-provider-id', taints: [OTHER_TAINT, UNINITIALIZED] });
    const { patch } = planInitialization(node, meta());
    expect(patch.spec).toEqual({ taints: [OTHER_TAINT] });
  });

  test('zone/region topology labels added, GA and beta', () => {
    const { patch } = planInitialization(makeNode(), meta({ instanceType: '', zone: 'us-west-1a', region: 'us-west' }));
    expect(patch.metadata.labels).toEqual({
      'failure-domain.beta.kubernetes.io/region': 'us-west',
      'failure-domain.beta.kubernetes.io/zone': 'us-west-1a',
      'topology.kubernetes.io/region': 'us-west',
      'topology.kubernetes.io/zone': 'us-west-1a',
    });
  });

  test('no labels at all when the provider gives no type, zone, region or extra labels', () => {
    expect(planInitialization(makeNode(), meta({ instanceType: '' })).patch.metadata).toEqual({ resourceVersion: '1' });
  });

  test('provided additional labels are added', () => {
    const { patch } = planInitialization(
      makeNode({ providedNodeIP: '10.0.0.1' }),
      meta({ instanceType: '', zone: 'us-west-1a', region: 'us-west', additionalLabels: { 'topology.k8s.cp/zone-id': 'az1', 'my.custom.label/foo': 'bar' } }),
    );
    expect(patch.metadata.labels).toEqual({
      'failure-domain.beta.kubernetes.io/region': 'us-west',
      'failure-domain.beta.kubernetes.io/zone': 'us-west-1a',
      'topology.kubernetes.io/region': 'us-west',
      'topology.kubernetes.io/zone': 'us-west-1a',
      'topology.k8s.cp/zone-id': 'az1',
      'my.custom.label/foo': 'bar',
    });
  });

  test('additional labels in kubernetes namespaces and already present keys are discarded', () => {
    const node = makeNode({ labels: { 'my.custom.label/foo': 'fizz', 'my.custom.label/bar': 'foo' } });
    const { patch, discardedLabels } = planInitialization(
      node,
      meta({
        instanceType: '',
        additionalLabels: {
          'topology.kubernetes.io/region': 'us-other-west',
          'topology.k8s.io/region': 'us-other-west',
          'kubernetes.io/region': 'us-other-west',
          'k8s.io/region': 'us-other-west',
          'my.custom.label/foo': 'bar',
          'my.custom.label/bar': 'foo',
          'app.k8snio/bar': 'foo',
          'k8snio/bar': 'foo',
        },
      }),
    );
    expect(patch.metadata.labels).toEqual({ 'app.k8snio/bar': 'foo', 'k8snio/bar': 'foo' });
    // The same value already present is not worth a warning (upstream logs only differing values).
    expect(discardedLabels.map((d) => `${d.key}:${d.reason}`).sort()).toEqual([
      'k8s.io/region:kubernetes-namespace',
      'kubernetes.io/region:kubernetes-namespace',
      'my.custom.label/foo:already-present',
      'topology.k8s.io/region:kubernetes-namespace',
      'topology.kubernetes.io/region:kubernetes-namespace',
    ]);
  });

  test('kubernetes namespace matching covers subdomains only', () => {
    expect(isKubernetesNamespacedLabel('node.kubernetes.io/x')).toBe(true);
    expect(isKubernetesNamespacedLabel('a.b.k8s.io/x')).toBe(true);
    expect(isKubernetesNamespacedLabel('notkubernetes.io/x')).toBe(false);
    expect(isKubernetesNamespacedLabel('example.com/kubernetes.io')).toBe(false);
  });

  test('provided node IP: the matching address goes first, the node Hostname is kept', () => {
    const node = makeNode({ providedNodeIP: '10.0.0.1', providerID: 'node0.aws.12345', taints: [OTHER_TAINT, UNINITIALIZED], addresses: [HOSTNAME('node0.cloud.internal')] });
    const cloud = [INTERNAL('10.0.0.1'), EXTERNAL('132.143.154.163')];
    expect(planInitialization(node, meta({ nodeAddresses: cloud })).patch.spec.taints).toEqual([OTHER_TAINT]);
    expect(decideNodeAddresses(untainted(node), cloud)).toEqual({
      action: 'write',
      addresses: [INTERNAL('10.0.0.1'), EXTERNAL('132.143.154.163'), HOSTNAME('node0.cloud.internal')],
    });
  });

  test('provided node IP not valid: no plan, the node stays tainted', () => {
    const node = makeNode({ providedNodeIP: 'invalid-ip' });
    expect(() => planInitialization(node, meta({ nodeAddresses: [INTERNAL('10.0.0.1')] }))).toThrow(ProvidedNodeIPError);
  });

  test('provided node IP not among the provider addresses: no plan', () => {
    const node = makeNode({ providedNodeIP: '10.0.0.2' });
    expect(() => planInitialization(node, meta({ nodeAddresses: [INTERNAL('10.0.0.1'), EXTERNAL('132.143.154.163')] }))).toThrow(
      'failed to get node address from cloud provider that matches ip: 10.0.0.2',
    );
  });

  test('provided node IP absent: provider addresses as given', () => {
    expect(decideNodeAddresses(makeNode({ tainted: false }), [EXTERNAL('1.2.3.4'), INTERNAL('10.0.0.1')])).toEqual({
      action: 'write',
      addresses: [EXTERNAL('1.2.3.4'), INTERNAL('10.0.0.1')],
    });
  });
});

describe('provided node IP', () => {
  test('a matching IP keeps only itself among addresses of its type', () => {
    const node = makeNode({ tainted: false, providedNodeIP: '10.0.0.2' });
    const cloud = [INTERNAL('10.0.0.1'), EXTERNAL('1.2.3.4'), INTERNAL('10.0.0.2'), HOSTNAME('h')];
    expect(decideNodeAddresses(node, cloud)).toEqual({ action: 'write', addresses: [INTERNAL('10.0.0.2'), EXTERNAL('1.2.3.4'), HOSTNAME('h')] });
  });

  test('dual-stack pair: both matches first, in annotation order', () => {
    const node = makeNode({ tainted: false, providedNodeIP: 'fd00::5,10.0.0.2' });
    const cloud = [INTERNAL('10.0.0.1'), INTERNAL('10.0.0.2'), INTERNAL('fd00::1'), INTERNAL('fd00:0::5'), EXTERNAL('1.2.3.4')];
    expect(decideNodeAddresses(node, cloud)).toEqual({
      action: 'write',
      addresses: [INTERNAL('fd00:0::5'), INTERNAL('10.0.0.2'), EXTERNAL('1.2.3.4')],
    });
  });

  test('an IPv4-mapped IPv6 address equals its IPv4 address (as Go compares them)', () => {
    const node = makeNode({ tainted: false, providedNodeIP: '10.0.0.1' });
    expect(decideNodeAddresses(node, [INTERNAL('::ffff:10.0.0.1')])).toEqual({ action: 'write', addresses: [INTERNAL('::ffff:10.0.0.1')] });
  });

  test('annotation forms upstream refuses', () => {
    for (const bad of ['', 'invalid-ip', '10.0.0.1,10.0.0.2', 'fd00::1,fd00::2', '10.0.0.1,fd00::1,10.0.0.2', '0.0.0.0,fd00::1', '10.0.0.1,::', ' 10.0.0.1']) {
      expect(() => parseProvidedNodeIP(bad), bad).toThrow(ProvidedNodeIPError);
    }
    expect(parseProvidedNodeIP('10.0.0.1,fd00::1').map((p) => p.text)).toEqual(['10.0.0.1', 'fd00::1']);
    // A single unspecified address is allowed by the parser (it then matches no provider address).
    expect(parseProvidedNodeIP('0.0.0.0')).toHaveLength(1);
  });

  test('an invalid annotation on an initialised node skips the address write with the reason', () => {
    const decision = decideNodeAddresses(makeNode({ tainted: false, providedNodeIP: '10.9.9.9' }), [INTERNAL('10.0.0.1')]);
    expect(decision.action).toBe('invalid-node-ip');
  });
});

describe('address write decision', () => {
  test('no address write while tainted', () => {
    expect(decideNodeAddresses(makeNode(), CLOUD_ADDRESSES)).toEqual({ action: 'skip', reason: 'node is still tainted' });
  });

  test('no address write when the provider gives none', () => {
    expect(decideNodeAddresses(makeNode({ tainted: false, addresses: [HOSTNAME('h')] }), []).action).toBe('skip');
  });

  test('no address write when nothing changed', () => {
    expect(decideNodeAddresses(makeNode({ tainted: false, addresses: CLOUD_ADDRESSES }), CLOUD_ADDRESSES)).toEqual({
      action: 'skip',
      reason: 'addresses unchanged',
    });
  });

  test('change detection, upstream TestNodeAddressesChangeDetected', () => {
    const a = [INTERNAL('10.0.0.1'), EXTERNAL('132.143.154.163')];
    expect(nodeAddressesChangeDetected(a, [INTERNAL('10.0.0.1'), EXTERNAL('132.143.154.163')])).toBe(false);
    expect(nodeAddressesChangeDetected([INTERNAL('10.0.0.1'), EXTERNAL('132.143.154.164')], a)).toBe(true);
    expect(nodeAddressesChangeDetected([...a, HOSTNAME('hostname.zone.region.aws.test')], a)).toBe(true);
    expect(nodeAddressesChangeDetected(a, [...a, HOSTNAME('hostname.zone.region.aws.test')])).toBe(true);
    expect(nodeAddressesChangeDetected([EXTERNAL('10.0.0.1'), INTERNAL('132.143.154.163')], a)).toBe(true);
    // Upstream compares by type, so a new order alone is not a change.
    expect(nodeAddressesChangeDetected([EXTERNAL('132.143.154.163'), INTERNAL('10.0.0.1')], a)).toBe(false);
  });
});

describe('label reconciliation (upstream Test_reconcileNodeLabels)', () => {
  const beta = {
    'failure-domain.beta.kubernetes.io/zone': 'foo',
    'failure-domain.beta.kubernetes.io/region': 'bar',
    'beta.kubernetes.io/instance-type': 'the-best-type',
  };

  test('requires reconcile: GA labels added from the beta ones', () => {
    expect(labelsToReconcile(makeNode({ tainted: false, labels: beta }))).toEqual({
      'topology.kubernetes.io/zone': 'foo',
      'topology.kubernetes.io/region': 'bar',
      'node.kubernetes.io/instance-type': 'the-best-type',
    });
  });

  test("doesn't require reconcile", () => {
    const labels = { ...beta, 'topology.kubernetes.io/zone': 'foo', 'topology.kubernetes.io/region': 'bar', 'node.kubernetes.io/instance-type': 'the-best-type' };
    expect(labelsToReconcile(makeNode({ tainted: false, labels }))).toEqual({});
  });

  test('GA labels that differ are corrected from the beta ones', () => {
    const labels = { ...beta, 'topology.kubernetes.io/zone': 'wrongfoo', 'topology.kubernetes.io/region': 'wrongbar', 'node.kubernetes.io/instance-type': 'the-wrong-type' };
    expect(labelsToReconcile(makeNode({ tainted: false, labels }))).toEqual({
      'topology.kubernetes.io/zone': 'foo',
      'topology.kubernetes.io/region': 'bar',
      'node.kubernetes.io/instance-type': 'the-best-type',
    });
  });

  test('a GA label without its beta label is left alone', () => {
    expect(labelsToReconcile(makeNode({ tainted: false, labels: { 'topology.kubernetes.io/zone': 'z' } }))).toEqual({});
  });
});

describe('instance metadata (upstream TestGetInstanceMetadata, InstancesV2 cases)', () => {
  test('the provider providerID is used', async () => {
    const cloud = new FakeCloud().setNode('node0', { metadata: meta() });
    expect((await fetchInstanceMetadata(cloud.instances!, makeNode()))?.providerID).toBe('fake://12345');
  });

  test('without a providerID from the provider, the node spec one is used', async () => {
    const cloud = new FakeCloud().setNode('node0', { metadata: meta({ providerID: '' }) });
    expect((await fetchInstanceMetadata(cloud.instances!, makeNode({ providerID: 'spec://1' })))?.providerID).toBe('spec://1');
  });

  test('no providerID anywhere is an error', async () => {
    const cloud = new FakeCloud().setNode('node0', { metadata: meta({ providerID: '' }) });
    await expect(fetchInstanceMetadata(cloud.instances!, makeNode())).rejects.toBeInstanceOf(MissingProviderIDError);
  });

  test('nil metadata passes through', async () => {
    const cloud = new FakeCloud();
    expect(await fetchInstanceMetadata(cloud.instances!, makeNode())).toBeNull();
  });

  test('a provider error propagates', async () => {
    const cloud = new FakeCloud().failWith('instanceMetadata', new Error('metadata error'));
    await expect(fetchInstanceMetadata(cloud.instances!, makeNode())).rejects.toThrow('metadata error');
  });
});
