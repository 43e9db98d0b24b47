import { describe, expect, test } from 'bun:test';
import type { V1LoadBalancerStatus, V1Service } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import {
  KUBE_VIP_ANNOTATION,
  KUBE_VIP_OWNED_ANNOTATION,
  LoadBalancerSync,
  ServiceControllerMetrics,
  kubeVipAddresses,
  kubeVipAnnotationPatch,
  type MergePatch,
  type StrategicPatch,
} from './index.ts';
import { KubeApiError } from '../../kube/errors.ts';
import { LB_CLEANUP_FINALIZER } from '../../kube/service-helpers.ts';
import { silentLogger } from '../../log.ts';
import { FakeCloud } from '../../../test/fakes/fake-cloud.ts';
import { needsCleanup, needsUpdate } from './predicates.ts';
import { RecordingEventRecorder } from '../../../test/fakes/event-recorder.ts';

// --kube-vip-annotation: the decision (a pure function of the annotations and the status), and
// the service sync writing it through an in-memory API that applies the patches as the API
// server would, so the informer's view after each write is the real one.

const OURS = { [KUBE_VIP_OWNED_ANNOTATION]: 'true' };
const status = (...ips: string[]): V1LoadBalancerStatus => ({ ingress: ips.map((ip) => ({ ip })) });

function service(annotations?: Record<string, string>, type = 'LoadBalancer'): V1Service {
  return {
    metadata: { name: 'web', namespace: 'default', uid: 'uid-web', resourceVersion: '1', annotations },
    spec: { type, ports: [{ port: 80, protocol: 'TCP' }] },
  };
}

describe('kubeVipAddresses', () => {
  test('IPv4 first, each family in status order, without duplicates or hostnames', () => {
    const s: V1LoadBalancerStatus = {
      ingress: [{ ip: 'fd00::2' }, { ip: '192.0.2.7' }, { hostname: 'lb.example' }, { ip: 'fd00::1' }, { ip: '192.0.2.3' }, { ip: '192.0.2.7' }],
    };
    expect(kubeVipAddresses(s)).toBe('192.0.2.7,192.0.2.3,fd00::2,fd00::1');
  });

  test('nothing to announce: an empty string', () => {
    expect(kubeVipAddresses(undefined)).toBe('');
    expect(kubeVipAddresses({})).toBe('');
    expect(kubeVipAddresses({ ingress: [{ hostname: 'lb.example' }] })).toBe('');
  });
});

describe('kubeVipAnnotationPatch', () => {
  const set = (addresses: string): MergePatch => ({ metadata: { annotations: { [KUBE_VIP_ANNOTATION]: addresses, [KUBE_VIP_OWNED_ANNOTATION]: 'true' } } });
  const remove: MergePatch = { metadata: { annotations: { [KUBE_VIP_ANNOTATION]: null, [KUBE_VIP_OWNED_ANNOTATION]: null } } };

  test.each([
    ['no annotations yet: the addresses and our mark', service(), status('192.0.2.7'), set('192.0.2.7')],
    ['dual stack, IPv4 first', service(), status('fd00::7', '192.0.2.7'), set('192.0.2.7,fd00::7')],
    ['other annotations are left out of the patch', service({ team: 'a' }), status('192.0.2.7'), set('192.0.2.7')],
    ['ours, already right: nothing', service({ ...OURS, [KUBE_VIP_ANNOTATION]: '192.0.2.7' }), status('192.0.2.7'), undefined],
    ['ours, the address changed', service({ ...OURS, [KUBE_VIP_ANNOTATION]: '192.0.2.7' }), status('192.0.2.8'), set('192.0.2.8')],
    ['ours with a second family added', service({ ...OURS, [KUBE_VIP_ANNOTATION]: '192.0.2.7' }), status('192.0.2.7', 'fd00::7'), set('192.0.2.7,fd00::7')],
    // On a service we load-balance, the assigned addresses win: kube-vip must announce what the status says.
    ["a user's value on a service we load-balance is replaced", service({ [KUBE_VIP_ANNOTATION]: '198.51.100.1' }), status('192.0.2.7'), set('192.0.2.7')],
    ["a user's value equal to ours is marked ours", service({ [KUBE_VIP_ANNOTATION]: '192.0.2.7' }), status('192.0.2.7'), set('192.0.2.7')],
    ['load balancer gone, ours: removed', service({ ...OURS, [KUBE_VIP_ANNOTATION]: '192.0.2.7' }), {}, remove],
    ['only our mark left: removed', service(OURS), {}, remove],
    ['hostname-only ingress, ours: removed (nothing to announce)', service({ ...OURS, [KUBE_VIP_ANNOTATION]: '192.0.2.7' }), { ingress: [{ hostname: 'lb.example' }] }, remove],
    ["load balancer gone, a user's annotation: never touched", service({ [KUBE_VIP_ANNOTATION]: '198.51.100.1' }), {}, undefined],
    ["a mark that is not 'true' is not ours", service({ [KUBE_VIP_OWNED_ANNOTATION]: 'false', [KUBE_VIP_ANNOTATION]: '198.51.100.1' }), {}, undefined],
    ['load balancer gone, no annotations: nothing', service(), {}, undefined],
  ] satisfies [string, V1Service, V1LoadBalancerStatus, MergePatch | undefined][])('%s', (_desc, svc, lbStatus, want) => {
    expect(kubeVipAnnotationPatch(svc, lbStatus)).toEqual(want);
  });
});

// ---- the service sync, against an in-memory API ----

/** RFC 7386: objects merge, null deletes, anything else replaces. */
function mergePatch(target: unknown, patch: unknown): unknown {
  if (patch === null || typeof patch !== 'object' || Array.isArray(patch)) return patch;
  const out: Record<string, unknown> = target && typeof target === 'object' && !Array.isArray(target) ? { ...(target as Record<string, unknown>) } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}

/** The controller's strategic patches: the finalizer directives, and status merged. */
function strategicPatch(svc: V1Service, patch: StrategicPatch): V1Service {
  const { metadata, ...rest } = patch as { metadata?: Record<string, string[]> };
  const out = mergePatch(svc, rest) as V1Service;
  const finalizers = new Set(out.metadata?.finalizers ?? []);
  for (const f of metadata?.finalizers ?? []) finalizers.add(f);
  for (const f of metadata?.['$deleteFromPrimitiveList/finalizers'] ?? []) finalizers.delete(f);
  out.metadata = { ...out.metadata, finalizers: [...finalizers] };
  return out;
}

interface Write {
  kind: 'status' | 'service';
  body: unknown;
}

/** One service in an API that applies the controller's writes, and a sync that queues as the informer handlers do. */
function harness(opts: { kubeVipAnnotation: boolean; initial: V1Service; failServicePatch?: () => Error }) {
  const cloud = new FakeCloud({ ingressIP: '192.0.2.7' });
  const recorder = new RecordingEventRecorder();
  let stored: V1Service | undefined = structuredClone(opts.initial);
  const writes: Write[] = [];
  const store = (next: V1Service) => {
    next.metadata!.resourceVersion = String(Number(next.metadata!.resourceVersion) + 1);
    // Deleted once the last finalizer of a deleting object is gone, as the API server does.
    stored = next.metadata?.deletionTimestamp && !next.metadata.finalizers?.length ? undefined : next;
  };
  const notFound = () => new KubeApiError(404, 'NotFound', 'gone', 'PATCH', '/api/v1/namespaces/default/services/web');
  const sync = new LoadBalancerSync({
    balancer: cloud.loadBalancer!,
    clusterName: 'test-cluster',
    ownedClasses: () => [],
    recorder,
    logger: silentLogger,
    metrics: ServiceControllerMetrics.for(new Registry()),
    getService: () => stored,
    listNodes: () => [],
    patchServiceStatus: async (_svc, patch) => {
      writes.push({ kind: 'status', body: patch });
      if (!stored) throw notFound();
      store(strategicPatch(stored, patch));
    },
    patchService: async (_svc, patch) => {
      writes.push({ kind: 'service', body: patch });
      const error = opts.failServicePatch?.();
      if (error) throw error;
      if (!stored) throw notFound();
      store(mergePatch(stored, patch) as V1Service);
    },
    kubeVipAnnotation: opts.kubeVipAnnotation,
  });
  return {
    cloud,
    recorder,
    writes,
    current: () => stored,
    /** Replaces the object (a user's edit). */
    edit: (change: (s: V1Service) => void) => {
      const next = structuredClone(stored!);
      change(next);
      store(next);
    },
    /** Syncs the key; returns whether the informer's update events would queue it again. */
    async syncOnce(): Promise<boolean> {
      const before = structuredClone(stored);
      await sync.syncService('default/web');
      const after = stored;
      if (!before || !after || before.metadata?.resourceVersion === after.metadata?.resourceVersion) return false;
      return needsUpdate(before, after) || needsCleanup(after);
    },
    /** Syncs until nothing is queued any more; a write loop fails instead of hanging. */
    async settle(): Promise<number> {
      for (let syncs = 1; syncs <= 5; syncs++) if (!(await this.syncOnce())) return syncs;
      throw new Error('still queued after 5 syncs: the controller keeps writing');
    },
  };
}

const serviceWrites = (writes: Write[]) => writes.filter((w) => w.kind === 'service').map((w) => w.body);

describe('the service sync with --kube-vip-annotation', () => {
  test('the ingress IP is written once; the sync our own write triggers writes nothing, and then nothing is queued', async () => {
    const h = harness({ kubeVipAnnotation: true, initial: service({ team: 'a' }) });
    expect(await h.syncOnce()).toBe(true); // our annotation changed the annotations: queued again, as upstream
    expect(serviceWrites(h.writes)).toEqual([{ metadata: { annotations: { [KUBE_VIP_ANNOTATION]: '192.0.2.7', [KUBE_VIP_OWNED_ANNOTATION]: 'true' } } }]);
    expect(h.current()?.metadata?.annotations).toEqual({ team: 'a', [KUBE_VIP_ANNOTATION]: '192.0.2.7', [KUBE_VIP_OWNED_ANNOTATION]: 'true' });

    const writesBefore = h.writes.length;
    expect(await h.syncOnce()).toBe(false); // nothing written, so no update event at all
    expect(h.writes.length).toBe(writesBefore);
    expect(h.cloud.count('ensureLoadBalancer')).toBe(2); // the one extra ensure upstream would do too
  });

  test("a user's edit of the annotation is put right on the sync it triggers", async () => {
    const h = harness({ kubeVipAnnotation: true, initial: service() });
    await h.settle();
    h.edit((s) => (s.metadata!.annotations![KUBE_VIP_ANNOTATION] = '198.51.100.1'));
    expect(await h.syncOnce()).toBe(true);
    expect(h.current()?.metadata?.annotations?.[KUBE_VIP_ANNOTATION]).toBe('192.0.2.7');
    expect(await h.syncOnce()).toBe(false);
  });

  test('no longer a LoadBalancer: the load balancer, our annotations and the finalizer go; the sync writes nothing more', async () => {
    const h = harness({ kubeVipAnnotation: true, initial: service({ team: 'a' }) });
    await h.settle();
    h.edit((s) => (s.spec!.type = 'ClusterIP'));
    const writesBefore = h.writes.length;
    await h.settle();
    expect(h.cloud.count('ensureLoadBalancerDeleted')).toBe(1);
    expect(serviceWrites(h.writes.slice(writesBefore))).toEqual([{ metadata: { annotations: { [KUBE_VIP_ANNOTATION]: null, [KUBE_VIP_OWNED_ANNOTATION]: null } } }]);
    expect(h.current()?.metadata?.annotations).toEqual({ team: 'a' });
    expect(h.current()?.metadata?.finalizers).toEqual([]);
  });

  test("no longer a LoadBalancer, with a user's kube-vip annotation: left alone", async () => {
    const h = harness({ kubeVipAnnotation: true, initial: { ...service({ [KUBE_VIP_ANNOTATION]: '198.51.100.1' }, 'ClusterIP') } });
    h.edit((s) => (s.metadata!.finalizers = [LB_CLEANUP_FINALIZER])); // a leftover finalizer: cleanup runs
    await h.settle();
    expect(serviceWrites(h.writes)).toEqual([]);
    expect(h.current()?.metadata?.annotations).toEqual({ [KUBE_VIP_ANNOTATION]: '198.51.100.1' });
  });

  test('another controller\'s class: no write, even with a kube-vip annotation', async () => {
    const foreign = service({ [KUBE_VIP_ANNOTATION]: '198.51.100.1' });
    foreign.spec!.loadBalancerClass = 'other.example/lb';
    const h = harness({ kubeVipAnnotation: true, initial: foreign });
    await h.syncOnce();
    expect(h.writes).toEqual([]);
  });

  test('a deleted service: the annotation patch finds it gone, which is no error', async () => {
    const h = harness({ kubeVipAnnotation: true, initial: service() });
    await h.settle();
    h.edit((s) => (s.metadata!.deletionTimestamp = new Date()));
    await h.settle();
    expect(h.current()).toBeUndefined();
    expect(serviceWrites(h.writes).at(-1)).toEqual({ metadata: { annotations: { [KUBE_VIP_ANNOTATION]: null, [KUBE_VIP_OWNED_ANNOTATION]: null } } });
    expect(h.recorder.reasons()).not.toContain('SyncLoadBalancerFailed');
  });

  test('a refused write (no RBAC for it): SyncLoadBalancerFailed, and the sync throws to be retried', async () => {
    const forbidden = () => new KubeApiError(403, 'Forbidden', 'cannot patch resource "services"', 'PATCH', '/api/v1/namespaces/default/services/web');
    const h = harness({ kubeVipAnnotation: true, initial: service(), failServicePatch: forbidden });
    await expect(h.syncOnce()).rejects.toThrow('failed to update the kube-vip annotation: PATCH /api/v1/namespaces/default/services/web: 403 Forbidden');
    expect(h.recorder.events.at(-1)).toMatchObject({ type: 'Warning', reason: 'SyncLoadBalancerFailed' });
    // The load balancer and its status are in place; only the annotation is missing.
    expect(h.current()?.status?.loadBalancer?.ingress?.[0]?.ip).toBe('192.0.2.7');
  });
});

test('without --kube-vip-annotation the Service itself is never written', async () => {
  const h = harness({ kubeVipAnnotation: false, initial: service() });
  await h.settle();
  h.edit((s) => (s.spec!.type = 'ClusterIP'));
  await h.settle();
  expect(h.writes.length).toBeGreaterThan(0);
  expect(serviceWrites(h.writes)).toEqual([]);
});
