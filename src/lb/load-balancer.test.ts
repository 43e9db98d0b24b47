import { expect, test } from 'bun:test';
import type { V1Service } from '@kubernetes/client-node';
import { RetryAfterError } from '../cloud/types.ts';
import type { KubeRequest, KubeTransport, WatchEvent } from '../kube/transport.ts';
import { silentLogger } from '../log.ts';
import { loadStaticConfig } from '../../providers/static/config-load.ts';
import { AddressAllocator } from './allocator.ts';
import { PoolLoadBalancer, rebuildFromServices } from './load-balancer.ts';

/** The services list a rebuild reads, as the test sets it. */
class ServiceList implements KubeTransport {
  readonly server = 'https://services.invalid';
  items: V1Service[] = [];

  async request<T>(_req: KubeRequest): Promise<T> {
    return { kind: 'ServiceList', apiVersion: 'v1', metadata: { resourceVersion: '1' }, items: structuredClone(this.items) } as T;
  }

  // eslint-disable-next-line require-yield
  async *watch<T>(): AsyncGenerator<WatchEvent<T>> {
    throw new Error('not used');
  }
}

function balancer(): PoolLoadBalancer {
  const loaded = loadStaticConfig('loadBalancer:\n  pools:\n    - { name: p, addresses: [203.0.113.1-203.0.113.3] }\n');
  if (!loaded.ok) throw new Error(JSON.stringify(loaded.errors));
  return new PoolLoadBalancer(new AddressAllocator(loaded.config.loadBalancer.pools), () => [], silentLogger);
}

const svc = (name: string, ingress?: string): V1Service => ({
  metadata: { name, namespace: 'default', uid: `uid-${name}`, creationTimestamp: `2026-01-01T00:00:0${name.length}Z` as unknown as Date },
  spec: { type: 'LoadBalancer', ports: [{ port: 80, protocol: 'TCP' }], ipFamilies: ['IPv4'], ipFamilyPolicy: 'SingleStack' },
  status: ingress ? { loadBalancer: { ingress: [{ ip: ingress }] } } : {},
});

const ip = async (p: Promise<{ ingress?: { ip?: string }[] } | undefined>) => (await p)?.ingress?.[0]?.ip;

test('the end of a leadership term forgets every assignment; the next term answers only after its own rebuild', async () => {
  const lb = balancer();
  const services = new ServiceList();
  const retry = { initialMs: 1, maxMs: 1 };
  const firstTerm = new AbortController();
  await rebuildFromServices(lb, { transport: services, signal: firstTerm.signal }, retry, silentLogger);
  expect(await ip(lb.ensureLoadBalancer('c', svc('a'), []))).toBe('203.0.113.1');

  // The term ends (lease lost): nothing remembered is used any more, nor shown as in use.
  firstTerm.abort(new Error('the leader lease was lost'));
  expect(lb.isRebuilt).toBe(false);
  expect(await lb.getLoadBalancer('c', svc('a'))).toEqual({ exists: false, status: {} });
  expect(lb.poolStatus().flatMap((p) => p.services)).toEqual([]);
  expect(await lb.ensureLoadBalancer('c', svc('b'), []).catch((e) => e)).toBeInstanceOf(RetryAfterError);

  // Meanwhile another leader gave 203.0.113.2 to "other". The next term rebuilds from the status.
  services.items = [svc('a', '203.0.113.1'), svc('other', '203.0.113.2')];
  await rebuildFromServices(lb, { transport: services, signal: new AbortController().signal }, retry, silentLogger);
  expect(await ip(lb.ensureLoadBalancer('c', svc('b'), []))).toBe('203.0.113.3');
});
