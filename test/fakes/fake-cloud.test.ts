import { describe, expect, test } from 'bun:test';
import type { V1Service } from '@kubernetes/client-node';
import { RetryAfterError } from '../../src/cloud/types.ts';
import { FakeCloud, fakeMetadata } from './fake-cloud.ts';
import { makeNode } from './node-fixtures.ts';

// The fake provider other controllers' tests build on: its answers, failures and records.

const service: V1Service = {
  metadata: { name: 'web', namespace: 'default', uid: '3b5f-11aa-22bb-33cc-44dd55ee66ff' },
  spec: { type: 'LoadBalancer', ports: [{ port: 80, protocol: 'TCP' }] },
};

describe('FakeCloud', () => {
  test('capabilities can be left out', () => {
    const cloud = new FakeCloud({ instances: false, routes: false });
    expect(cloud.instances).toBeUndefined();
    expect(cloud.routes).toBeUndefined();
    expect(cloud.loadBalancer).toBeDefined();
    expect(new FakeCloud().instances?.instancesExist).toBeUndefined();
    expect(new FakeCloud({ bulkExistence: true }).instances?.instancesExist).toBeDefined();
  });

  test('per-node answers over defaults, and per-node errors', async () => {
    const cloud = new FakeCloud().setNode('gone', { existence: 'not-found' }).setNode('broken', { error: new Error('boom') });
    cloud.setNode('gone', { shutdown: true });
    const i = cloud.instances!;
    expect(await i.instanceExists(makeNode({ name: 'other' }))).toBe('exists');
    expect(await i.instanceExists(makeNode({ name: 'gone' }))).toBe('not-found');
    expect(await i.instanceShutdown(makeNode({ name: 'gone' }))).toBe(true);
    await expect(i.instanceMetadata(makeNode({ name: 'broken' }))).rejects.toThrow('boom');
    cloud.setNode('m', { metadata: fakeMetadata('m', { zone: 'z' }) });
    expect((await i.instanceMetadata(makeNode({ name: 'm' })))?.zone).toBe('z');
    expect(cloud.calls).toEqual(['instanceExists', 'instanceExists', 'instanceShutdown', 'instanceMetadata', 'instanceMetadata']);
    expect(cloud.count('instanceExists', 'gone')).toBe(1);
  });

  test('bulk existence answers unknown for nodes whose calls fail', async () => {
    const cloud = new FakeCloud({ bulkExistence: true }).setNode('a', { existence: 'not-found' }).setNode('b', { error: new Error('x') });
    const answer = await cloud.instances!.instancesExist!([makeNode({ name: 'a' }), makeNode({ name: 'b' }), makeNode({ name: 'c' })]);
    expect(answer).toEqual(['not-found', 'unknown', 'exists']);
  });

  test('failWith: a number of times, for one target', async () => {
    const cloud = new FakeCloud().failWith('instanceExists', new Error('once for a'), { times: 1, target: 'a' });
    const i = cloud.instances!;
    expect(await i.instanceExists(makeNode({ name: 'b' }))).toBe('exists');
    await expect(i.instanceExists(makeNode({ name: 'a' }))).rejects.toThrow('once for a');
    expect(await i.instanceExists(makeNode({ name: 'a' }))).toBe('exists');
  });

  test('load balancers live in a map; ensure returns the ingress IP and ports; failures are typed', async () => {
    const cloud = new FakeCloud({ ingressIP: '203.0.113.7' });
    const lb = cloud.loadBalancer!;
    expect(await lb.getLoadBalancer('c', service)).toEqual({ exists: false, status: {} });
    const status = await lb.ensureLoadBalancer('c', service, [makeNode({ name: 'n1' })]);
    expect(status).toEqual({ ingress: [{ ip: '203.0.113.7', ports: [{ port: 80, protocol: 'TCP' }] }] });
    expect((await lb.getLoadBalancer('c', service)).exists).toBe(true);
    await lb.updateLoadBalancer('c', service, [makeNode({ name: 'n1' }), makeNode({ name: 'n2' })]);
    expect(cloud.balancers.get(lb.getLoadBalancerName('c', service))?.nodeNames).toEqual(['n1', 'n2']);
    expect(lb.getLoadBalancerName('c', service)).toBe('a3b5f11aa22bb33cc44dd55ee66ff');

    cloud.failWith('ensureLoadBalancer', new RetryAfterError(7), { times: 1 });
    await expect(lb.ensureLoadBalancer('c', service, [])).rejects.toBeInstanceOf(RetryAfterError);
    await lb.ensureLoadBalancerDeleted('c', service);
    expect(cloud.balancers.size).toBe(0);
    expect(cloud.ensureCalls.map((c) => c.nodeNames)).toEqual([['n1'], []]);
    expect(cloud.updateCalls).toHaveLength(1);
    expect(cloud.deleteCalls).toHaveLength(1);
    cloud.ensureStatus = () => undefined;
    expect(await lb.ensureLoadBalancer('c', service, [])).toBeUndefined();
  });

  test('routes: create, list per cluster, delete; duplicates and unknown routes fail', async () => {
    const cloud = new FakeCloud();
    const routes = cloud.routes!;
    const route = { name: '', targetNode: 'n1', targetNodeAddresses: [], destinationCIDR: '10.244.1.0/24', blackhole: false };
    await routes.createRoute('c', 'uid-1', route);
    expect(cloud.createRouteCalls.map((c) => c.nameHint)).toEqual(['uid-1']);
    await expect(routes.createRoute('c', 'uid-1', route)).rejects.toThrow('already exists');
    cloud.addRoute('other', { ...route, name: 'x' });
    expect((await routes.listRoutes('c')).map((r) => r.name)).toEqual(['c-n1-10.244.1.0/24']);
    await routes.deleteRoute('c', route);
    await expect(routes.deleteRoute('c', route)).rejects.toThrow('no route found');
    expect(await routes.listRoutes('c')).toEqual([]);
  });

  test('latency delays calls and honours the abort signal', async () => {
    const cloud = new FakeCloud({ latencyMs: 60_000 });
    const abort = new AbortController();
    const call = cloud.instances!.instanceExists(makeNode(), abort.signal);
    expect(cloud.inFlight).toBe(1);
    abort.abort(new Error('stopped'));
    await expect(call).rejects.toThrow('stopped');
    expect(cloud.inFlight).toBe(0);
  });

  test('the call log is capped, the counts are not', async () => {
    const cloud = new FakeCloud({ callLogLimit: 3 });
    for (let i = 0; i < 5; i++) await cloud.instances!.instanceExists(makeNode({ name: `n${i}` }));
    expect(cloud.callLog.map((c) => c.target)).toEqual(['n2', 'n3', 'n4']);
    expect(cloud.count('instanceExists')).toBe(5);
    cloud.clearCalls();
    expect(cloud.calls).toEqual([]);
  });
});
