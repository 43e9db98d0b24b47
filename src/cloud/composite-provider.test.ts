import { describe, expect, test } from 'bun:test';
import type { V1Node } from '@kubernetes/client-node';
import { makeNode } from '../../test/fakes/node-fixtures.ts';
import { RecordingEventRecorder } from '../../test/fakes/event-recorder.ts';
import { createLogger } from '../log.ts';
import { CompositeProvider, PLATFORM_ANNOTATION, providerIDPlatform } from './composite-provider.ts';
import { parseCloudConfigs, parseProviderNames } from './provider-list.ts';
import type { CloudProvider, Existence, InstanceMetadata } from './types.ts';

/** A provider of one platform that knows some machines by node name, records whom it was asked about, and can be down. */
export function platformProvider(platform: string, machines: string[], opts: { down?: boolean } = {}) {
  const asked: string[] = [];
  const known = new Set(machines);
  const ask = (node: V1Node) => {
    asked.push(node.metadata!.name!);
    if (opts.down) throw new Error(`${platform} API down`);
  };
  const provider: CloudProvider & { asked: string[]; known: Set<string>; opts: { down?: boolean } } = {
    providerName: platform,
    platform,
    asked,
    known,
    opts,
    instances: {
      async instanceExists(node): Promise<Existence> {
        ask(node);
        return known.has(node.metadata!.name!) ? 'exists' : 'not-found';
      },
      async instanceShutdown(node) {
        ask(node);
        return false;
      },
      async instanceMetadata(node): Promise<InstanceMetadata | null> {
        ask(node);
        const name = node.metadata!.name!;
        return known.has(name) ? { providerID: `${platform}://${name}`, instanceType: platform, nodeAddresses: [], zone: '', region: '' } : null;
      },
    },
  };
  return provider;
}

const node = (name: string, shape: { providerID?: string; platform?: string; tainted?: boolean } = {}): V1Node => {
  const n = makeNode({ name, providerID: shape.providerID, tainted: shape.tainted });
  if (shape.platform) n.metadata!.annotations = { [PLATFORM_ANNOTATION]: shape.platform };
  return n;
};

describe('--cloud-provider and --cloud-config lists', () => {
  const known = ['proxmox', 'static'];
  test('one name, one path: as ever', () => {
    expect(parseProviderNames('static', known)).toEqual(['static']);
    expect(parseCloudConfigs('/etc/a,b.yaml', ['static'])).toEqual(new Map([['static', '/etc/a,b.yaml']]));
    expect(parseCloudConfigs('', ['static'])).toEqual(new Map([['static', undefined]]));
  });
  test('several names, a file each', () => {
    expect(parseProviderNames('static,proxmox', known)).toEqual(['static', 'proxmox']);
    expect(parseCloudConfigs('proxmox=/p.yaml,static=/s.yaml', ['static', 'proxmox'])).toEqual(new Map([['static', '/s.yaml'], ['proxmox', '/p.yaml']]));
    expect(parseCloudConfigs('proxmox=/p.yaml', ['static', 'proxmox'])).toEqual(new Map([['static', undefined], ['proxmox', '/p.yaml']]));
  });
  test('unknown names, duplicates, empty entries: every problem named', () => {
    expect(() => parseProviderNames('static,proxmx,static,', known)).toThrow(
      '--cloud-provider: unknown cloud provider "proxmx" (did you mean proxmox?) (known: proxmox, static)\n' +
      '--cloud-provider: "static" is named twice\n--cloud-provider: name 4 of "static,proxmx,static," is empty');
  });
  test('several providers: a bare path, a stranger or a file given twice is refused', () => {
    expect(() => parseCloudConfigs('/s.yaml,lxd=/l.yaml,static=/a,static=/b', ['static', 'proxmox'])).toThrow(
      '--cloud-config: "/s.yaml" is not NAME=PATH');
    expect(() => parseCloudConfigs('lxd=/l.yaml,static=/a,static=/b', ['static', 'proxmox'])).toThrow(
      '--cloud-config: "lxd" is not among the providers of --cloud-provider (static, proxmox)\n--cloud-config: "static" is given two files');
  });
});

describe('CompositeProvider dispatch', () => {
  const setup = () => {
    const a = platformProvider('static', ['s1', 'both']);
    const b = platformProvider('proxmox', ['p1', 'both']);
    const recorder = new RecordingEventRecorder();
    const composite = new CompositeProvider([{ name: 'static', provider: a }, { name: 'proxmox', provider: b }]);
    void composite.initialize({ transport: undefined as never, logger: createLogger(), signal: new AbortController().signal, recorder });
    return { a, b, composite, recorder };
  };

  test('the platform of a providerID is its scheme', () => {
    expect(providerIDPlatform('proxmox://fra1/101')).toBe('proxmox');
    expect(providerIDPlatform('static://m1')).toBe('static');
    expect(providerIDPlatform('m1')).toBeUndefined();
  });

  test('a node with a providerID goes to the provider of its scheme only', async () => {
    const { a, b, composite } = setup();
    expect(await composite.instances.instanceExists(node('p1', { providerID: 'proxmox://p1' }))).toBe('exists');
    expect(await composite.instances.instanceExists(node('s9', { providerID: 'static://s9' }))).toBe('not-found');
    expect(b.asked).toEqual(['p1']);
    expect(a.asked).toEqual(['s9']);
  });

  test('a node of a platform nobody here serves is not served, never asked about', async () => {
    const { a, b, composite } = setup();
    const foreign = node('x1', { providerID: 'lxd://x1' });
    expect(composite.servesNode(foreign)).toBe(false);
    expect(composite.partitionOf(foreign)).toBeUndefined();
    expect(await composite.instances.instanceExists(foreign)).toBe('unknown');
    expect(await composite.instances.instanceMetadata(foreign)).toBeNull();
    expect(await composite.instances.instanceShutdown(foreign)).toBeUndefined();
    expect(await composite.instances.instancesExist([foreign])).toEqual(['unknown']);
    // Annotated for another platform while waiting: the same.
    const annotated = node('x2', { platform: 'lxd' });
    expect(composite.servesNode(annotated)).toBe(false);
    expect(await composite.instances.instanceMetadata(annotated)).toBeNull();
    expect([...a.asked, ...b.asked]).toEqual([]);
  });

  test('a waiting node: its annotation names the provider, else the first (configured order) that knows the machine', async () => {
    const { a, b, composite } = setup();
    expect((await composite.instances.instanceMetadata(node('both', { platform: 'proxmox' })))?.providerID).toBe('proxmox://both');
    expect(a.asked).toEqual([]);
    expect((await composite.instances.instanceMetadata(node('both')))?.providerID).toBe('static://both');
    expect((await composite.instances.instanceMetadata(node('p1')))?.providerID).toBe('proxmox://p1');
    expect(a.asked).toEqual(['both', 'p1']);
    expect(b.asked).toEqual(['both', 'p1']);
  });

  test('a waiting node no provider knows: left alone, with an event naming the providers asked; its existence judged by none', async () => {
    const { composite, recorder } = setup();
    const waiting = node('n1');
    expect(composite.servesNode(waiting)).toBe(true);
    expect(await composite.instances.instanceMetadata(waiting)).toBeNull();
    expect(recorder.events).toEqual([expect.objectContaining({ name: 'n1', type: 'Warning', reason: 'NoProviderKnowsMachine' })]);
    expect(recorder.events[0]!.message).toContain('(static, proxmox)');
    expect(await composite.instances.instanceExists(waiting)).toBe('unknown');
    // Without the uninitialized taint and a providerID, it was joined by someone else: not ours.
    expect(composite.servesNode(node('n2', { tainted: false }))).toBe(false);
  });

  test('a provider that fails while a waiting node is matched: no later provider takes it', async () => {
    const { a, b, composite } = setup();
    a.opts.down = true;
    await expect(composite.instances.instanceMetadata(node("p1"))).rejects.toThrow('static provider: static API down');
    expect(b.asked).toEqual([]);
  });

  test('one provider down: only its nodes unknown in the bulk answer, and only its health check fails', async () => {
    const { b, composite } = setup();
    b.opts.down = true;
    const answers = await composite.instances.instancesExist([
      node('s1', { providerID: 'static://s1' }), node('gone', { providerID: 'static://gone' }), node('p1', { providerID: 'proxmox://p1' }),
    ]);
    expect(answers).toEqual<Existence[]>(['exists', 'not-found', 'unknown']);
    // The partitions' instances feed the checks (the lifecycle controller asks through them).
    for (const p of composite.partitions) await p.instances!.instanceExists(node('s1', { providerID: `${p.platform}://s1` })).catch(() => undefined);
    const checks = composite.healthChecks();
    expect(checks.map((c) => c.name)).toEqual(['cloud-provider-static', 'cloud-provider-proxmox']);
    expect(() => checks[0]!.check()).not.toThrow();
    expect(() => checks[1]!.check()).toThrow('proxmox provider cannot tell whether its machines exist since');
  });

  test('a bulk answer that cannot be matched by position: only its nodes unknown, and its health check says why', async () => {
    for (const [reply, why] of [
      [['exists'], 'its bulk answer has 1 answers for 2 nodes; taken as unknown'],
      [new Map([['p1', 'exists']]), 'its bulk answer is not a list for 2 nodes; taken as unknown'],
    ] as const) {
      const a = platformProvider('static', ['s1']);
      const b = platformProvider('proxmox', ['p1', 'p2']);
      b.instances!.instancesExist = async () => reply as unknown as Existence[];
      const composite = new CompositeProvider([{ name: 'static', provider: a }, { name: 'proxmox', provider: b }]);
      const answers = await composite.instances.instancesExist([
        node('p1', { providerID: 'proxmox://p1' }), node('s1', { providerID: 'static://s1' }), node('p2', { providerID: 'proxmox://p2' }),
      ]);
      expect(answers).toEqual<Existence[]>(['unknown', 'exists', 'unknown']);
      const checks = composite.healthChecks();
      expect(() => checks[0]!.check()).not.toThrow();
      expect(() => checks[1]!.check()).toThrow(why);
    }
  });

  test('a provider answering a providerID of another platform is refused', async () => {
    const { a, composite } = setup();
    a.instances!.instanceMetadata = async () => ({ providerID: 'proxmox://s1', instanceType: '', nodeAddresses: [], zone: '', region: '' });
    await expect(composite.instances.instanceMetadata(node("s1", { providerID: 'static://s1' }))).rejects.toThrow('static provider answered providerID proxmox://s1, not of its platform static');
  });

  test('providers that cannot run together are refused, each problem named', () => {
    const noPlatform = { ...platformProvider('x', []), platform: undefined };
    const withBgp = { ...platformProvider('proxmox', []), bgp: { speakerConfig: () => ({}) } as never };
    expect(() => new CompositeProvider([
      { name: 'static', provider: platformProvider('static', []) },
      { name: 'x', provider: noPlatform },
      { name: 'again', provider: platformProvider('static', []) },
      { name: 'proxmox', provider: withBgp },
    ])).toThrow('x provider names no platform (providerID scheme), so it cannot run with other providers\n' +
      'again and static providers both serve platform static\n' +
      "proxmox provider's file has a bgp section: with several providers, routes and BGP come from the first one's file (static); move it there");
  });
});
