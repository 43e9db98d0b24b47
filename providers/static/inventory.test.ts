import { describe, expect, test } from 'bun:test';
import type { V1Node } from '@kubernetes/client-node';
import { loadStaticConfig } from './config-load.ts';
import { StaticInstances } from './instances.ts';
import { Inventory } from './inventory.ts';
import { RedfishClientPool } from './redfish.ts';
import { FULFILLED_FALSE, FULFILLED_TRUE, FULFILLED_UNDEFINED } from '../../src/util/settled.ts';

const YAML = `
inventory:
  defaults: { region: eu, instanceType: generic }
  sites:
    paris: { zone: paris-1, labels: { city: paris } }
  racks:
    r7: { site: paris, labels: { rack-power: b } }
  machines:
    - id: m-name
      rack: r7
      addresses:
        - { type: InternalIP, address: 10.0.0.11 }
        - { type: ExternalIP, address: "2001:db8::11" }
    - id: m-host
      hostname: host-b.example
      nodeName: some-other-name
    - id: m-addr
      nodeName: m-addr-node
      addresses: [{ type: InternalIP, address: 10.0.0.13 }]
    - id: m-off
      power: off
    - id: m-retired
      decommissioned: true
      addresses: [{ type: InternalIP, address: 10.0.0.99 }]
    - id: m-new
      nodeName: m-new-node
      addresses: [{ type: InternalIP, address: 10.0.0.99 }]
`;

function inventoryOf(yaml: string, extra = ''): Inventory {
  const r = loadStaticConfig(yaml.replace('inventory:\n', `inventory:\n${extra}`));
  if (!r.ok) throw new Error(JSON.stringify(r.errors));
  return new Inventory(r.config.inventory);
}

function node(name: string, o: { providerID?: string; addresses?: { type: string; address: string }[]; hostnameLabel?: string; providedIP?: string } = {}): V1Node {
  return {
    metadata: {
      name,
      labels: o.hostnameLabel ? { 'kubernetes.io/hostname': o.hostnameLabel } : {},
      annotations: o.providedIP ? { 'alpha.kubernetes.io/provided-node-ip': o.providedIP } : {},
    },
    spec: { providerID: o.providerID },
    status: { addresses: o.addresses ?? [] },
  };
}

describe('inventory matching', () => {
  const inv = inventoryOf(YAML);

  test('by node name (the id by default), hostname, address and providerID', () => {
    expect(inv.match(node('m-name'))?.id).toBe('m-name');
    expect(inv.match(node('x', { addresses: [{ type: 'Hostname', address: 'host-b.example' }] }))?.id).toBe('m-host');
    expect(inv.match(node('x', { hostnameLabel: 'host-b.example' }))?.id).toBe('m-host');
    expect(inv.match(node('x', { addresses: [{ type: 'InternalIP', address: '10.0.0.13' }] }))?.id).toBe('m-addr');
    // Addresses compare as addresses, not as text.
    expect(inv.match(node('x', { addresses: [{ type: 'ExternalIP', address: '2001:0db8::0011' }] }))?.id).toBe('m-name');
    expect(inv.match(node('x', { providedIP: '10.0.0.200,10.0.0.13' }))?.id).toBe('m-addr');
    expect(inv.match(node('whatever', { providerID: 'static://m-off' }))?.id).toBe('m-off');
  });

  test('a providerID decides alone; another scheme is never ours', () => {
    expect(inv.match(node('m-name', { providerID: 'static://not-listed' }))).toBeUndefined();
    expect(inv.match(node('m-name', { providerID: 'aws:///eu-west-1a/i-123' }))).toBeUndefined();
  });

  test('a machine in service wins an address over a decommissioned one', () => {
    expect(inv.match(node('x', { addresses: [{ type: 'InternalIP', address: '10.0.0.99' }] }))?.id).toBe('m-new');
  });

  test('matchBy restricts and orders the criteria', () => {
    const byAddressOnly = inventoryOf(YAML, '  matchBy: [address]\n');
    expect(byAddressOnly.match(node('m-name'))).toBeUndefined();
    expect(byAddressOnly.match(node('m-name', { addresses: [{ type: 'InternalIP', address: '10.0.0.13' }] }))?.id).toBe('m-addr');
    const addressFirst = inventoryOf(YAML, '  matchBy: [address, nodeName]\n');
    expect(addressFirst.match(node('m-name', { addresses: [{ type: 'InternalIP', address: '10.0.0.13' }] }))?.id).toBe('m-addr');
  });

  test('existence: listed, decommissioned, not listed (authoritative or not), foreign', () => {
    expect(inv.existence(node('m-name'))).toBe('exists');
    expect(inv.existence(node('m-retired'))).toBe('not-found');
    expect(inv.existence(node('stranger'))).toBe('unknown');
    expect(inv.existence(node('m-name', { providerID: 'gce://p/z/i' }))).toBe('unknown');
    const authoritative = inventoryOf(YAML, '  authoritative: true\n');
    expect(authoritative.existence(node('stranger'))).toBe('not-found');
    expect(authoritative.existence(node('x', { providerID: 'static://gone' }))).toBe('not-found');
    expect(authoritative.existence(node('m-name', { providerID: 'gce://p/z/i' }))).toBe('unknown');
  });
});

describe('static instances', () => {
  const inv = inventoryOf(YAML);
  const instances = new StaticInstances(() => inv, new RedfishClientPool());

  test('metadata with group defaults, site and rack labels; null when unmatched or decommissioned', async () => {
    expect(await instances.instanceMetadata(node('m-name'))).toEqual({
      providerID: 'static://m-name',
      instanceType: 'generic',
      nodeAddresses: [
        { type: 'InternalIP', address: '10.0.0.11' },
        { type: 'ExternalIP', address: '2001:db8::11' },
      ],
      zone: 'paris-1',
      region: 'eu',
      additionalLabels: { city: 'paris', 'rack-power': 'b', 'edge-ccm.io/site': 'paris', 'edge-ccm.io/rack': 'r7' },
      // No nodeRules: nothing to apply, and whatever rules applied before is to be removed.
      ruleEffects: { labels: {}, annotations: {}, taints: [] },
    });
    expect((await instances.instanceMetadata(node('some-other-name')))?.nodeAddresses).toEqual([{ type: 'Hostname', address: 'host-b.example' }]);
    expect(await instances.instanceMetadata(node('stranger'))).toBeNull();
    expect(await instances.instanceMetadata(node('m-retired'))).toBeNull();
  });

  test('shutdown from the power field; unknown for unknown machines', async () => {
    expect(await instances.instanceShutdown(node('m-off'))).toBe(true);
    expect(await instances.instanceShutdown(node('m-name'))).toBe(false);
    expect(await instances.instanceShutdown(node('stranger'))).toBeUndefined();
  });

  test('shutdown answers from the inventory are shared fulfilled promises: nothing allocated per node and period', () => {
    expect(instances.instanceShutdown(node('m-name'))).toBe(FULFILLED_FALSE);
    expect(instances.instanceShutdown(node('m-off'))).toBe(FULFILLED_TRUE);
    expect(instances.instanceShutdown(node('stranger'))).toBe(FULFILLED_UNDEFINED);
  });

  test('bulk existence answers every node, in the order asked', async () => {
    const answer = await instances.instancesExist([node('m-name'), node('m-retired'), node('stranger')]);
    expect(answer).toEqual(['exists', 'not-found', 'unknown']);
  });
});
