import { describe, expect, test } from 'bun:test';
import type { V1Node } from '@kubernetes/client-node';
import { RouteController } from './controller.ts';
import { parsePrefix } from '../../net/ip.ts';
import { HandFedInformer, controllerContext } from '../../../test/fakes/controller-context.ts';
import { FakeCloud } from '../../../test/fakes/fake-cloud.ts';
import { eventually } from '../../../test/harness/eventually.ts';
import { RecordingEventRecorder } from '../../../test/fakes/event-recorder.ts';
import { recordingLogger } from '../../../test/fakes/proxmox-fixtures.ts';

const node = (name: string, podCIDR: string, managed: boolean): V1Node => ({
  metadata: { name, uid: `uid-${name}`, labels: managed ? { 'edge-ccm.io/managed': 'true' } : {} },
  spec: { podCIDR, podCIDRs: [podCIDR] },
  status: { addresses: [{ type: 'InternalIP', address: `10.0.0.${podCIDR.split('.')[2]}` }] },
});

function setup(nodes: V1Node[], reconciliationPeriodMs = 10_000) {
  const cloud = new FakeCloud();
  const informer = new HandFedInformer<V1Node>();
  for (const n of nodes) informer.set(n);
  const ctx = controllerContext({
    cloud,
    nodeInformer: informer.asInformer(),
    isManagedNode: (n) => n.metadata?.labels?.['edge-ccm.io/managed'] === 'true',
  });
  return { cloud, informer, controller: new RouteController(ctx, { clusterCIDRs: [parsePrefix('10.244.0.0/16')!], reconciliationPeriodMs }) };
}

test('routes to nodes this CCM does not manage are left alone; ours are created; stale ones of ours deleted', async () => {
  const s = setup([node('ours', '10.244.1.0/24', true), node('theirs', '10.244.2.0/24', false)]);
  // Already in the route table: the foreign node's route, and a stale one of a node that is gone.
  for (const [name, target, cidr] of [['r-theirs', 'theirs', '10.244.2.0/24'], ['r-gone', 'gone', '10.244.9.0/24']] as const) {
    await s.cloud.routes!.createRoute('test-cluster', name, { name, targetNode: target, targetNodeAddresses: [], destinationCIDR: cidr, blackhole: false });
  }
  await s.controller.reconcile();
  const table = [...s.cloud.routeTable.values()].map((r) => `${r.route.targetNode} ${r.route.destinationCIDR}`).sort();
  expect(table).toEqual(['ours 10.244.1.0/24', 'theirs 10.244.2.0/24']);
});

test('a node without addresses yet is a wait (info, no event), not an error; a node with addresses whose route fails is an error', async () => {
  const cloud = new FakeCloud();
  const informer = new HandFedInformer<V1Node>();
  const fresh = node('fresh', '10.244.1.0/24', true);
  fresh.status = {}; // just registered: the node controller has not set its addresses yet
  informer.set(fresh);
  informer.set(node('broken', '10.244.2.0/24', true));
  // As the BGP route table answers: no address of the family to announce the prefix with.
  cloud.failWith('createRoute', new Error('node has no InternalIP or ExternalIP of IPv4 to announce'), { times: 10 });
  const { logger, lines } = recordingLogger();
  const recorder = new RecordingEventRecorder();
  const ctx = controllerContext({ cloud, logger, recorder, nodeInformer: informer.asInformer(), isManagedNode: () => true });
  await new RouteController(ctx, { clusterCIDRs: [parsePrefix('10.244.0.0/16')!], reconciliationPeriodMs: 10_000 }).reconcile();
  const about = (name: string) => lines.filter((l) => l.includes(` node=${name}`));
  expect(about('fresh').map((l) => l.replace(/^\S+ (\w+) ("[^"]*").*$/, '$1 $2'))).toEqual(['INFO "waiting for the node\'s addresses before creating its route"']);
  expect(about('broken').join('\n')).toContain('could not create route');
  expect(recorder.events.map((e) => `${e.name} ${e.reason}`)).toEqual(['broken FailedToCreateRoute']);
});

test('a node change that arrives while a round runs is kept: another round follows without waiting out the period', async () => {
  // A period of an hour: only the kept change can bring the next round within the wait below.
  const s = setup([node('first', '10.244.1.0/24', true)], 3_600_000);
  const routes = s.cloud.routes!;
  const listRoutes = routes.listRoutes.bind(routes);
  let rounds = 0;
  routes.listRoutes = async (clusterName, signal) => {
    // The first round has read the nodes already: a node that registers now is not in its plan.
    if (++rounds === 1) s.informer.set(node('second', '10.244.2.0/24', true));
    return listRoutes(clusterName, signal);
  };
  const stop = new AbortController();
  const running = s.controller.run(stop.signal);
  try {
    await eventually('a route for the node that registered during the first round', () =>
      [...s.cloud.routeTable.values()].some((r) => r.route.targetNode === 'second'), 30_000);
    expect(rounds).toBeGreaterThanOrEqual(2);
  } finally {
    stop.abort();
    await running;
  }
});

describe('CloudControllerManagerWatchBasedRoutesReconciliation (watch-based rounds, as upstream with the gate)', () => {
  function watchBased(periodMs: number, watch: boolean) {
    const s = setup([node('first', '10.244.1.0/24', true)]);
    const ctx = controllerContext({ cloud: s.cloud, nodeInformer: s.informer.asInformer(), isManagedNode: (n) => n.metadata?.labels?.['edge-ccm.io/managed'] === 'true' });
    const controller = new RouteController(ctx, { clusterCIDRs: [parsePrefix('10.244.0.0/16')!], reconciliationPeriodMs: periodMs, watchBased: watch, minIntervalMs: 300 });
    const starts: number[] = [];
    const routes = s.cloud.routes!;
    const listRoutes = routes.listRoutes.bind(routes);
    routes.listRoutes = async (clusterName, signal) => {
      starts.push(performance.now());
      return listRoutes(clusterName, signal);
    };
    return { ...s, controller, starts };
  }

  test('no periodic round: with a 50ms period, an observation window of 1s without node changes sees only the first round', async () => {
    const s = watchBased(50, true);
    const stop = new AbortController();
    const running = s.controller.run(stop.signal);
    try {
      await eventually('the first round', () => s.starts.length === 1);
      // A window, not a wait for a condition: nothing is supposed to happen in it (without the gate: ~20 rounds).
      await Bun.sleep(1000);
      expect(s.starts.length).toBe(1);
      s.informer.set(node('second', '10.244.2.0/24', true));
      await eventually('a round for the node added', () => [...s.cloud.routeTable.values()].some((r) => r.route.targetNode === 'second'));
      expect(s.starts.length).toBe(2);
    } finally {
      stop.abort();
      await running;
    }
  });

  test('node changes are rate limited: the next round starts no sooner than the interval after the last began', async () => {
    const s = watchBased(3_600_000, true);
    const stop = new AbortController();
    const running = s.controller.run(stop.signal);
    try {
      await eventually('the first round', () => s.starts.length === 1);
      s.informer.set(node('second', '10.244.2.0/24', true));
      await eventually('the second round', () => s.starts.length === 2);
      expect(s.starts[1]! - s.starts[0]!).toBeGreaterThanOrEqual(300);
    } finally {
      stop.abort();
      await running;
    }
  });

  test('without the gate the period drives rounds (the contrast the first test relies on)', async () => {
    const s = watchBased(50, false);
    const stop = new AbortController();
    const running = s.controller.run(stop.signal);
    try {
      await eventually('several periodic rounds', () => s.starts.length >= 3);
    } finally {
      stop.abort();
      await running;
    }
  });
});
