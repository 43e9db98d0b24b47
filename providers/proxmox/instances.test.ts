import { describe, expect, test } from 'bun:test';
import { selectAddresses, vmNodeAddresses } from './addresses.ts';
import type { AddressPolicy } from './config-model.ts';
import { instanceTypeOf } from './instance-type.ts';
import { parseProviderID, providerIDOf } from './matching.ts';
import { parseAgentInterfaces, parseVmConfig } from './vm-details.ts';
import { parseAddressRange, type AddressRange } from '../../src/lb/ranges.ts';
import { formatIP } from '../../src/net/ip.ts';
import { Clock, closedAfterEach, node, providerFor, sampleResponder, tokenConfig } from '../../test/fakes/proxmox-fixtures.ts';

const ranges = (...texts: string[]) => texts.map((t) => parseAddressRange(t) as AddressRange);
const policy = (p: Partial<AddressPolicy> = {}): AddressPolicy => ({ include: [], exclude: [], families: [4, 6], guestAgent: true, hostname: true, ...p });

describe('address selection', () => {
  const found = ['fd00:1::11', '10.0.1.11', '127.0.0.1', '::1', 'fe80::1', '169.254.3.4', '10.244.0.1', 'not-an-ip', '10.0.1.11', '192.0.2.7'];

  test('canonical, no loopback or link-local, each once, IPv4 first by default', () => {
    expect(selectAddresses(found, policy()).map(formatIP)).toEqual(['10.0.1.11', '10.244.0.1', '192.0.2.7', 'fd00:1::11']);
  });

  test('include and exclude CIDRs; IPv6 preferred; one family only', () => {
    expect(selectAddresses(found, policy({ include: ranges('10.0.0.0/8', 'fd00::/8'), exclude: ranges('10.244.0.0/16') })).map(formatIP)).toEqual(['10.0.1.11', 'fd00:1::11']);
    expect(selectAddresses(found, policy({ families: [6, 4], include: ranges('10.0.1.0/24', 'fd00::/8') })).map(formatIP)).toEqual(['fd00:1::11', '10.0.1.11']);
    expect(selectAddresses(found, policy({ families: [6] })).map(formatIP)).toEqual(['fd00:1::11']);
  });

  test('node addresses: InternalIP each, the VM name as Hostname unless turned off', () => {
    const ips = selectAddresses(['10.0.0.5'], policy());
    expect(vmNodeAddresses(ips, 'vm-a', policy())).toEqual([{ type: 'InternalIP', address: '10.0.0.5' }, { type: 'Hostname', address: 'vm-a' }]);
    expect(vmNodeAddresses(ips, 'vm-a', policy({ hostname: false }))).toEqual([{ type: 'InternalIP', address: '10.0.0.5' }]);
  });
});

describe('instance types, VM configs, providerIDs', () => {
  const naming = { format: '{cores}VCPU-{memory}', tagPrefix: 'instance-type.' };
  const GiB = 1024 ** 3;

  test('cores and memory name the type; a tag overrides; other formats', () => {
    expect(instanceTypeOf({ cores: 4, memoryBytes: 8 * GiB, tags: [] }, naming)).toBe('4VCPU-8GB');
    expect(instanceTypeOf({ cores: 2, memoryBytes: 1.5 * GiB, tags: [] }, naming)).toBe('2VCPU-1536MB');
    expect(instanceTypeOf({ cores: 16, memoryBytes: 64 * GiB, tags: ['k8s', 'instance-type.gpu-large'] }, naming)).toBe('gpu-large');
    expect(instanceTypeOf({ cores: 16, memoryBytes: 64 * GiB, tags: ['instance-type.gpu-large'] }, { ...naming, tagPrefix: '' })).toBe('16VCPU-64GB');
    expect(instanceTypeOf({ cores: 2, memoryBytes: 1.5 * GiB, tags: [] }, { format: 'c{cores}.m{memoryGiB}.{memoryMiB}', tagPrefix: '' })).toBe('c2.m1.5.1536');
  });

  test('VM config: SMBIOS UUID lower-cased, static addresses of every ipconfig, the agent flag', () => {
    expect(parseVmConfig({ smbios1: 'manufacturer=QEMU,uuid=3F2504E0-4F89-11D3-9A0C-0305E82C3301', ipconfig1: 'ip6=fd00::5/64', ipconfig0: 'ip=10.0.0.5/24,gw=10.0.0.1', ipconfig2: 'ip=dhcp,ip6=auto', agent: 'enabled=1,fstrim_cloned_disks=1' })).toEqual({
      uuid: '3f2504e0-4f89-11d3-9a0c-0305e82c3301',
      staticAddresses: ['10.0.0.5', 'fd00::5'],
      agentEnabled: true,
    });
    expect(parseVmConfig({ agent: '0' })).toEqual({ uuid: undefined, staticAddresses: [], agentEnabled: false });
    expect(parseAgentInterfaces({ result: [{ name: 'lo', 'ip-addresses': [{ 'ip-address': '127.0.0.1' }] }, { name: 'eth0', 'ip-addresses': [{ 'ip-address': '10.1.1.1' }] }] })).toEqual(['10.1.1.1']);
    expect(() => parseAgentInterfaces({})).toThrow('no result list');
  });

  test('providerIDs', () => {
    expect(providerIDOf('fra1', 101)).toBe('proxmox://fra1/101');
    expect(parseProviderID('proxmox://fra1/101')).toEqual({ region: 'fra1', vmid: 101 });
    expect(parseProviderID('proxmox://fra1/x')).toBeUndefined();
    expect(parseProviderID('static://a')).toBeUndefined();
  });
});

describe('instances against a Proxmox VE API', () => {
  const t = closedAfterEach();

  function start(extra: { cluster?: string[]; top?: string[] } = {}) {
    const responder = (t.responder = sampleResponder());
    t.provider = providerFor(tokenConfig(responder.url, extra), new Clock());
    return { responder, instances: t.provider.instances };
  }

  test('metadata of a VM found by name: providerID, type from size, zone = host, region = cluster, static addresses', async () => {
    const { instances } = start();
    expect(await instances.instanceMetadata(node('K8S-Worker-1'))).toEqual({
      providerID: 'proxmox://fra1/101',
      instanceType: '4VCPU-8GB',
      zone: 'pve1',
      region: 'fra1',
      nodeAddresses: [
        { type: 'InternalIP', address: '10.0.1.11' },
        { type: 'InternalIP', address: 'fd00:1::11' },
        { type: 'Hostname', address: 'k8s-worker-1' },
      ],
      ruleEffects: { labels: {}, annotations: {}, taints: [] },
    });
  });

  test('node rules select VMs by their tags, pool, host and name: the metadata carries what they give', async () => {
    const { instances } = start({
      top: [
        'nodeRules:',
        '  - name: workers',
        '    nodeSelector: [{ matchExpressions: [{ key: name, operator: Glob, values: ["k8s-worker-*"] }] }]',
        '    labels: { node-role.kubernetes.io/worker: "" }',
        '  - name: storage',
        '    nodeSelector:',
        '      - matchExpressions: [{ key: pool, operator: In, values: [storage] }, { key: tags, operator: In, values: [ceph] }]',
        '    labels: { example.com/storage: ceph }',
        '    taints: [{ key: example.com/storage, effect: NoSchedule }]',
        '  - name: on-pve1',
        '    nodeSelector: [{ matchExpressions: [{ key: host, operator: In, values: [pve1] }, { key: id, operator: In, values: ["101"] }] }]',
        '    annotations: { example.com/host: pve1 }',
      ],
    });
    expect((await instances.instanceMetadata(node('k8s-worker-1')))?.ruleEffects).toEqual({
      labels: { 'node-role.kubernetes.io/worker': '' },
      annotations: { 'example.com/host': 'pve1' },
      taints: [],
    });
    expect((await instances.instanceMetadata(node('k8s-worker-2')))?.ruleEffects).toEqual({
      labels: { 'node-role.kubernetes.io/worker': '', 'example.com/storage': 'ceph' },
      annotations: {},
      taints: [{ key: 'example.com/storage', value: '', effect: 'NoSchedule' }],
    });
  });

  test('the guest agent gives the addresses when the config has none; a tag names the type', async () => {
    const { instances } = start({ top: ['addresses:', '  exclude: [10.244.0.0/16]'] });
    const md = await instances.instanceMetadata(node('k8s-worker-2'));
    expect(md?.nodeAddresses).toEqual([{ type: 'InternalIP', address: '10.0.1.12' }, { type: 'Hostname', address: 'k8s-worker-2' }]);
    expect(md?.instanceType).toBe('2VCPU-1536MB');
    // Agent enabled but not running, and only DHCP in the config: no metadata yet, an error to retry.
    await expect(instances.instanceMetadata(node('k8s-gpu-1'))).rejects.toThrow('guest agent does not answer');
  });

  test('with the guest agent turned off, a VM without static addresses gets only its Hostname', async () => {
    const { instances, responder } = start({ top: ['addresses:', '  guestAgent: false'] });
    const md = await instances.instanceMetadata(node('k8s-gpu-1'));
    expect(md).toMatchObject({ instanceType: 'gpu-large', nodeAddresses: [{ type: 'Hostname', address: 'k8s-gpu-1' }] });
    expect(responder.requestsTo('/nodes/pve2/qemu/104/agent')).toHaveLength(0);
  });

  test('matching by SMBIOS UUID (kubelet systemUUID), by providerID, and the order of matchBy', async () => {
    const { instances } = start();
    expect((await instances.instanceMetadata(node('renamed', { systemUUID: '3f2504e0-4f89-11d3-9a0c-0305e82c3301' })))?.providerID).toBe('proxmox://fra1/101');
    expect((await instances.instanceMetadata(node('whatever', { providerID: 'proxmox://fra1/103' })))?.providerID).toBe('proxmox://fra1/103');
    // A providerID decides alone: the node name of another VM does not matter.
    expect(await instances.instanceExists(node('k8s-worker-1', { providerID: 'proxmox://fra1/555' }))).toBe('not-found');
  });

  test('matchBy limits the criteria: name only ignores the UUID', async () => {
    const { instances } = start({ top: ['matchBy: [name]'] });
    expect(await instances.instanceExists(node('renamed', { systemUUID: '3f2504e0-4f89-11d3-9a0c-0305e82c3301' }))).toBe('not-found');
  });

  test('exists, not-found, shutdown; templates and containers are not nodes', async () => {
    const { instances, responder } = start();
    expect(await instances.instanceExists(node('k8s-worker-3'))).toBe('exists');
    expect(await instances.instanceShutdown(node('k8s-worker-3'))).toBe(true);
    expect(await instances.instanceShutdown(node('k8s-worker-1'))).toBe(false);
    expect(await instances.instanceExists(node('ubuntu-template'))).toBe('not-found');
    expect(await instances.instanceExists(node('ct-dns'))).toBe('not-found');
    expect(await instances.instanceMetadata(node('nobody'))).toBeNull();
    expect(await instances.instanceShutdown(node('nobody'))).toBeUndefined();
    // A host that went offline: its VMs are listed with status unknown.
    responder.updateVm(101, { status: 'unknown' });
    t.provider = providerFor(tokenConfig(responder.url), new Clock());
    expect(await t.provider.instances.instanceShutdown(node('k8s-worker-1'))).toBeUndefined();
    expect(await t.provider.instances.instanceExists(node('k8s-worker-1'))).toBe('exists');
  });

  test('unknown, never not-found: another provider\'s node, an unconfigured region, duplicate names, nothing to match by', async () => {
    const { instances, responder } = start();
    expect(await instances.instanceExists(node('k8s-worker-1', { providerID: 'static://k8s-worker-1' }))).toBe('unknown');
    expect(await instances.instanceMetadata(node('k8s-worker-1', { providerID: 'static://k8s-worker-1' })).catch((e: Error) => e.message)).toContain('another provider');
    expect(await instances.instanceExists(node('x', { providerID: 'proxmox://ams1/101' }))).toBe('unknown');
    responder.setVm({ vmid: 201, name: 'K8S-WORKER-1', node: 'pve2' });
    t.provider = providerFor(tokenConfig(responder.url), new Clock());
    expect(await t.provider.instances.instanceExists(node('k8s-worker-1'))).toBe('unknown');
    const byUuidOnly = providerFor(tokenConfig(responder.url, { top: ['matchBy: [systemUUID]'] }), new Clock());
    expect(await byUuidOnly.instances.instanceExists(node('k8s-worker-1'))).toBe('unknown');
  });

  test('a destroyed VM\'s cached config is forgotten at the next VM list, so a new VM reusing its VMID is read afresh', async () => {
    t.responder = sampleResponder();
    const clock = new Clock();
    t.provider = providerFor(tokenConfig(t.responder.url, { top: ['matchBy: [systemUUID]'] }), clock);
    const oldUuid = '3f2504e0-4f89-11d3-9a0c-0305e82c3301';
    const newUuid = '0b1c2d3e-4f50-4617-8293-a4b5c6d7e8f9';
    expect((await t.provider.instances.instanceMetadata(node('old', { systemUUID: oldUuid })))?.providerID).toBe('proxmox://fra1/101');
    // VM 101 is destroyed: the next list (cache expired) no longer has it.
    t.responder.removeVm(101);
    clock.advance(10_000); // past the 5s VM-list cache, well within the 60s config cache
    expect(await t.provider.instances.instanceExists(node('old', { systemUUID: oldUuid }))).toBe('not-found');
    // Proxmox hands the free VMID out again, on the same host, well within the config cache time.
    t.responder.setVm({ vmid: 101, name: 'k8s-worker-new', node: 'pve1', uuid: newUuid.toUpperCase(), ipconfig: ['ip=10.0.1.21/24'] });
    clock.advance(10_000); // past the 5s VM-list cache, well within the 60s config cache
    expect((await t.provider.instances.instanceMetadata(node('new', { systemUUID: newUuid })))?.providerID).toBe('proxmox://fra1/101');
  });

  test('zones from HA groups; the host when a VM has none', async () => {
    t.responder = sampleResponder({ vms: [{ vmid: 1, name: 'a', node: 'pve1', haGroup: 'rack-a', ipconfig: ['ip=10.0.0.1/24'] }, { vmid: 2, name: 'b', node: 'pve2', ipconfig: ['ip=10.0.0.2/24'] }] });
    t.provider = providerFor(tokenConfig(t.responder.url, { cluster: ['zoneFrom: haGroup'] }), new Clock());
    expect((await t.provider.instances.instanceMetadata(node('a')))?.zone).toBe('rack-a');
    expect((await t.provider.instances.instanceMetadata(node('b')))?.zone).toBe('pve2');
  });

  test('two clusters: a name is searched in both; one unreachable cluster makes a missing name unknown', async () => {
    t.responder = sampleResponder();
    const other = sampleResponder({ vms: [{ vmid: 101, name: 'ams-worker', node: 'ams-pve1', ipconfig: ['ip=10.9.0.1/24'] }] });
    try {
      const yaml = tokenConfig(t.responder.url) + tokenConfig(other.url, { region: 'ams1' }).replace('clusters:\n', '');
      t.provider = providerFor(yaml, new Clock());
      expect((await t.provider.instances.instanceMetadata(node('ams-worker')))?.providerID).toBe('proxmox://ams1/101');
      expect(await t.provider.instances.instanceExists(node('gone'))).toBe('not-found');
      other.failStatus = 500;
      t.provider = providerFor(yaml, new Clock());
      expect(await t.provider.instances.instanceExists(node('gone'))).toBe('unknown');
      // The VM is in the cluster that answers: found.
      expect(await t.provider.instances.instanceExists(node('k8s-worker-1'))).toBe('exists');
      // A providerID names its cluster: the other one's trouble does not matter.
      expect(await t.provider.instances.instanceExists(node('x', { providerID: 'proxmox://fra1/999' }))).toBe('not-found');
    } finally {
      other.stop();
    }
  });
});
