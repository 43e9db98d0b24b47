import { describe, expect, test } from 'bun:test';
import type { V1Service } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import { AddressAllocator } from '../../lb/allocator.ts';
import { PoolLoadBalancer } from '../../lb/load-balancer.ts';
import { loadStaticConfig } from '../../../providers/static/config-load.ts';
import { ADDRESS_ASSIGNED_CONDITION, ASSIGNED_POOL_ANNOTATION, addressStatePatch, failedState } from './address-condition.ts';
import { LoadBalancerSync } from './load-balancer-sync.ts';
import { ServiceControllerMetrics } from './metrics.ts';
import { silentLogger } from '../../log.ts';
import { RecordingEventRecorder } from '../../../test/fakes/event-recorder.ts';

/**
 * The edge-ccm.io/AddressAssigned condition and edge-ccm.io/assigned-pool annotation: the reason
 * for each way an address cannot be had, written on the status patch the controller already
 * sends, and nothing written when nothing changed.
 */

const CONFIG = `loadBalancer:
  pools:
    - name: web
      addresses: [198.51.100.1-198.51.100.2]
    - name: spare
      addresses: [203.0.113.1]
      autoAssign: false
    - name: team-b
      addresses: [203.0.113.9]
      namespaces: [team-b]
`;
const NOW = new Date('2026-01-02T03:04:05.678Z');

function world() {
  const loaded = loadStaticConfig(CONFIG);
  if (!loaded.ok) throw new Error(JSON.stringify(loaded.errors));
  const allocator = new AddressAllocator(loaded.config.loadBalancer.pools);
  const balancer = new PoolLoadBalancer(allocator, () => [], silentLogger);
  balancer.rebuild([]);
  const store = new Map<string, V1Service>();
  const patches: { name: string; patch: Record<string, unknown> }[] = [];
  const sync = new LoadBalancerSync({
    balancer,
    clusterName: 'c',
    ownedClasses: () => [],
    recorder: new RecordingEventRecorder(),
    logger: silentLogger,
    metrics: ServiceControllerMetrics.for(new Registry()),
    getService: (key) => store.get(key),
    listNodes: () => [],
    patchServiceStatus: async (service, patch) => {
      patches.push({ name: service.metadata!.name!, patch });
      store.set(`default/${service.metadata!.name}`, applyPatch(store.get(`default/${service.metadata!.name}`)!, patch));
    },
    patchService: async () => {},
    now: () => NOW,
  });
  const put = (s: V1Service) => store.set(`${s.metadata!.namespace}/${s.metadata!.name}`, s);
  const run = (name: string) => sync.syncService(`default/${name}`).catch((e: Error) => e);
  return { store, patches, put, run, get: (name: string) => store.get(`default/${name}`)! };
}

function svc(name: string, annotations: Record<string, string> = {}, port = 80): V1Service {
  return {
    metadata: { name, namespace: 'default', uid: `uid-${name}`, generation: 1, annotations },
    spec: { type: 'LoadBalancer', ports: [{ port, protocol: 'TCP' }], ipFamilies: ['IPv4'], ipFamilyPolicy: 'SingleStack' },
  };
}

/** The little of a strategic merge patch these tests need: finalizers, annotations, ingress, conditions by type. */
function applyPatch(s: V1Service, patch: Record<string, any>): V1Service {
  const out = structuredClone(s);
  const meta = patch.metadata ?? {};
  if (meta.finalizers) out.metadata!.finalizers = [...new Set([...(out.metadata!.finalizers ?? []), ...meta.finalizers])];
  for (const [k, v] of Object.entries(meta.annotations ?? {})) {
    out.metadata!.annotations ??= {};
    if (v === null) delete out.metadata!.annotations[k];
    else out.metadata!.annotations[k] = v as string;
  }
  const status = patch.status ?? {};
  if (status.loadBalancer) out.status = { ...out.status, loadBalancer: status.loadBalancer.ingress ? status.loadBalancer : {} };
  for (const c of status.conditions ?? []) {
    const rest = (out.status?.conditions ?? []).filter((x) => x.type !== c.type);
    out.status = { ...out.status, conditions: c.$patch === 'delete' ? rest : [...rest, c] };
  }
  return out;
}

const condition = (s: V1Service) => s.status?.conditions?.find((c) => c.type === ADDRESS_ASSIGNED_CONDITION);

describe('AddressAssigned condition through the service controller', () => {
  test('assigned: the condition and the pool annotation ride on the ingress patch; a second sync writes nothing', async () => {
    const w = world();
    w.put(svc('a'));
    expect(await w.run('a')).toBeUndefined();
    // The finalizer first (upstream's order), then one patch with ingress, condition and annotation.
    expect(w.patches).toHaveLength(2);
    expect(w.patches[1]!.patch).toMatchObject({
      metadata: { annotations: { [ASSIGNED_POOL_ANNOTATION]: 'web' } },
      status: { loadBalancer: { ingress: [{ ip: '198.51.100.1' }] }, conditions: [{ type: ADDRESS_ASSIGNED_CONDITION, status: 'True', reason: 'Assigned' }] },
    });
    expect(condition(w.get('a'))).toMatchObject({ message: 'Assigned 198.51.100.1 from pool web', lastTransitionTime: '2026-01-02T03:04:05Z', observedGeneration: 1 });
    await w.run('a');
    expect(w.patches).toHaveLength(2);
  });

  const cases: [string, Record<string, string>, string, RegExp][] = [
    ['PoolExhausted', {}, 'PoolExhausted', /^Pool web exhausted: add addresses to it in the cloud config, or delete a LoadBalancer service that holds one$/],
    ['RequestedAddressNotInPool', { 'edge-ccm.io/load-balancer-ips': '192.0.2.77' }, 'RequestedAddressNotInPool', /not in any pool .*add this one to a pool/],
    ['RequestedAddressInUse', { 'edge-ccm.io/load-balancer-ips': '198.51.100.1' }, 'RequestedAddressInUse', /already used by service default\/a/],
    ['NoEligiblePool (unknown name)', { 'edge-ccm.io/address-pool': 'nope' }, 'NoEligiblePool', /unknown address pool "nope" .*name one of web, spare, team-b/i],
    ['NoEligiblePool (out of scope)', { 'edge-ccm.io/address-pool': 'team-b' }, 'NoEligiblePool', /does not serve service default\/x/],
    ['InvalidRequest', { 'edge-ccm.io/load-balancer-ips': 'not-an-ip' }, 'InvalidRequest', /invalid address "not-an-ip" in annotation edge-ccm.io\/load-balancer-ips: write IP addresses/i],
  ];
  for (const [label, annotations, reason, message] of cases) {
    test(`refused: ${label}`, async () => {
      const w = world();
      // Two services fill pool web.
      for (const name of ['a', 'b']) {
        w.put(svc(name));
        await w.run(name);
      }
      w.put(svc('x', annotations));
      const before = w.patches.length;
      expect(await w.run('x')).toBeInstanceOf(Error);
      const c = condition(w.get('x'))!;
      expect(c).toMatchObject({ status: 'False', reason });
      expect(c.message).toMatch(message);
      // No address: no pool annotation.
      expect(w.get('x').metadata!.annotations?.[ASSIGNED_POOL_ANNOTATION]).toBeUndefined();
      // Retried while nothing changed: the condition is not written again.
      const written = w.patches.length;
      expect(written).toBeGreaterThan(before);
      await w.run('x');
      expect(w.patches.length).toBe(written);
    });
  }

  test('SharingRefused: the key is shared but the port is taken on its address', async () => {
    const w = world();
    w.put(svc('a', { 'edge-ccm.io/allow-shared-ip': 'k' }));
    await w.run('a');
    w.put(svc('b', { 'edge-ccm.io/allow-shared-ip': 'k', 'edge-ccm.io/load-balancer-ips': '198.51.100.1' }));
    await w.run('b');
    expect(condition(w.get('b'))).toMatchObject({ status: 'False', reason: 'SharingRefused' });
    expect(condition(w.get('b'))!.message).toContain('which already uses port TCP/80');
  });

  test('a refused service that later gets its address turns True with a new transition time; a cleaned-up one loses both', async () => {
    const w = world();
    w.put(svc('a'));
    w.put(svc('b'));
    w.put(svc('c'));
    for (const n of ['a', 'b', 'c']) await w.run(n);
    expect(condition(w.get('c'))!.reason).toBe('PoolExhausted');
    // c may now use the spare pool.
    w.put({ ...w.get('c'), metadata: { ...w.get('c').metadata, annotations: { 'edge-ccm.io/address-pool': 'spare' } } });
    await w.run('c');
    expect(condition(w.get('c'))).toMatchObject({ status: 'True', reason: 'Assigned', message: 'Assigned 203.0.113.1 from pool spare' });
    expect(w.get('c').metadata!.annotations![ASSIGNED_POOL_ANNOTATION]).toBe('spare');
    // No longer a LoadBalancer: the ingress, the condition and the annotation go together.
    w.put({ ...w.get('c'), spec: { ...w.get('c').spec, type: 'ClusterIP' } });
    await w.run('c');
    expect(condition(w.get('c'))).toBeUndefined();
    expect(w.get('c').metadata!.annotations![ASSIGNED_POOL_ANNOTATION]).toBeUndefined();
    expect(w.get('c').status!.loadBalancer).toEqual({});
  });
});

describe('addressStatePatch', () => {
  const assigned = { status: 'True' as const, reason: 'Assigned', message: 'Assigned 198.51.100.1 from pool web', pools: ['web'] };

  test('keeps the transition time while the status stays, bumps it when the status flips', () => {
    const s = svc('a');
    s.status = { conditions: [{ type: ADDRESS_ASSIGNED_CONDITION, status: 'True', reason: 'Assigned', message: 'old', lastTransitionTime: '2020-01-01T00:00:00Z' as unknown as Date, observedGeneration: 1 }] };
    const same = addressStatePatch(s, assigned, NOW) as any;
    expect(same.status.conditions[0].lastTransitionTime).toBe('2020-01-01T00:00:00Z');
    const flipped = addressStatePatch(s, { status: 'False', reason: 'PoolExhausted', message: 'x' }, NOW) as any;
    expect(flipped.status.conditions[0].lastTransitionTime).toBe('2026-01-02T03:04:05Z');
  });

  test('a new generation rewrites the condition with it', () => {
    const s = svc('a', { [ASSIGNED_POOL_ANNOTATION]: 'web' });
    s.status = { conditions: [{ type: ADDRESS_ASSIGNED_CONDITION, ...assigned, lastTransitionTime: NOW, observedGeneration: 1 }] };
    expect(addressStatePatch(s, assigned, NOW)).toBeUndefined();
    s.metadata!.generation = 2;
    expect((addressStatePatch(s, assigned, NOW) as any).status.conditions[0].observedGeneration).toBe(2);
  });

  test('failedState reads the reason through wrapped errors and ignores other failures', () => {
    expect(failedState(new Error('boom'))).toBeUndefined();
    const w = world();
    w.put(svc('q', { 'edge-ccm.io/load-balancer-ips': 'bad' }));
    return w.run('q').then(() => expect(condition(w.get('q'))!.reason).toBe('InvalidRequest'));
  });
});
