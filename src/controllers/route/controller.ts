import type { V1Node } from '@kubernetes/client-node';
import type { Counter } from 'prom-client';
import type { CloudProvider, Route, Routes } from '../../cloud/types.ts';
import { NODES, ResourceClient } from '../../kube/resources.ts';
import { forEachLimited } from '../../util/parallel.ts';
import type { Prefix } from '../../net/ip.ts';
import type { Controller, ControllerContext } from '../types.ts';
import { routeSyncTotal } from './metrics.ts';
import { networkCondition, planRoutes, type RouteAction } from './plan.ts';
import { podCIDRs } from '../../kube/node-helpers.ts';
import { ResyncTrigger } from '../../util/resync-trigger.ts';
import { errorMessage } from '../../util/errors.ts';
import { sleep } from '../../util/time.ts';
import { NODE_ROUTE_CONTROLLER } from '../../names.ts';

/** A burst of node changes gives one early round, this long after the last of them. */
const CHANGE_DEBOUNCE_MS = 1000;

/** Upstream's cap on route operations in flight at once. */
export const MAX_CONCURRENT_ROUTE_OPERATIONS = 200;

export interface RouteControllerOptions {
  clusterCIDRs: Prefix[];
  reconciliationPeriodMs: number;
  /**
   * The CloudControllerManagerWatchBasedRoutesReconciliation gate, as upstream (KEP 5237): no
   * periodic round; a round when a node is added or deleted or its pod CIDRs or addresses change,
   * at most one per WATCH_BASED_MIN_INTERVAL_MS (a failed round is retried after that interval).
   */
  watchBased?: boolean;
  /** The watch-based rate limit; default WATCH_BASED_MIN_INTERVAL_MS (tests shorten it). */
  minIntervalMs?: number;
}

/** Upstream's minRouteResyncInterval: the rate limit of watch-based rounds. */
export const WATCH_BASED_MIN_INTERVAL_MS = 10_000;
/** The longest timer there is: "no period" for watch-based rounds. */
const NO_PERIOD_MS = 2 ** 31 - 1;

/** What the route controller uses of the app's context: the provider's routes, the node informer, its writes, events and metrics. */
export type RouteControllerContext = Pick<ControllerContext, 'transport' | 'recorder' | 'logger' | 'registry' | 'clusterName' | 'nodeInformer' | 'isManagedNode'> & { cloud: Pick<CloudProvider, 'routes'> };

/** Its name in logs, health checks and metrics: src/names.ts, the one list of names. */
export { NODE_ROUTE_CONTROLLER };

/**
 * node-route-controller: one route per node pod CIDR in the provider's route table, and the
 * node's NetworkUnavailable condition saying whether its routes exist. The whole cluster is
 * reconciled at once, every period, and also soon after a node's CIDRs or addresses change.
 */
export class RouteController implements Controller {
  readonly name = NODE_ROUTE_CONTROLLER;
  private readonly nodes: ResourceClient<V1Node>;
  private readonly syncTotal: Counter;
  private readonly routes: Routes;
  /** Node changes ask for an early round, debounced to at most one a second; one arriving during a round is kept. */
  private readonly changed = new ResyncTrigger(CHANGE_DEBOUNCE_MS);

  constructor(
    private readonly ctx: RouteControllerContext,
    private readonly opts: RouteControllerOptions,
  ) {
    if (!ctx.cloud.routes) throw new Error('route controller needs a provider with routes');
    this.routes = ctx.cloud.routes;
    this.nodes = new ResourceClient<V1Node>(ctx.transport, NODES);
    this.syncTotal = routeSyncTotal(ctx.registry);
  }

  async run(signal: AbortSignal): Promise<void> {
    this.ctx.nodeInformer.addHandlers({
      onAdd: () => this.changed.request(),
      onDelete: () => this.changed.request(),
      onUpdate: (a, b) => {
        if (JSON.stringify(podCIDRs(a)) !== JSON.stringify(podCIDRs(b)) || JSON.stringify(a.status?.addresses) !== JSON.stringify(b.status?.addresses)) this.changed.request();
      },
    });
    if (!(await this.ctx.nodeInformer.waitForSync(signal))) return;
    this.ctx.logger.info('starting route controller', { controller: this.name });
    while (!signal.aborted) {
      const started = performance.now();
      let failed = false;
      // Watch-based: the node changes seen so far (the informer's initial adds too) are in this round.
      if (this.opts.watchBased) this.changed.clear();
      try {
        await this.reconcile(signal);
      } catch (e) {
        if (signal.aborted) break;
        failed = true;
        this.ctx.logger.error("couldn't reconcile node routes", { controller: this.name, error: errorMessage(e) });
      }
      if (!this.opts.watchBased) {
        await this.changed.wait(this.opts.reconciliationPeriodMs, signal);
        continue;
      }
      if (!failed) await this.changed.wait(NO_PERIOD_MS, signal);
      const rest = (this.opts.minIntervalMs ?? WATCH_BASED_MIN_INTERVAL_MS) - (performance.now() - started);
      if (rest > 0 && !signal.aborted) await sleep(rest, signal).catch(() => {});
    }
    this.changed.stop();
  }

  async reconcile(signal?: AbortSignal): Promise<void> {
    this.syncTotal.inc();
    const all = this.ctx.nodeInformer.store.list();
    const nodes = all.filter((n) => this.ctx.isManagedNode(n));
    // Routes to nodes we do not manage are someone else's: never planned, so never deleted.
    const foreign = new Set(all.filter((n) => !this.ctx.isManagedNode(n)).map((n) => n.metadata?.name ?? ''));
    const existing = (await this.routes.listRoutes(this.ctx.clusterName, signal)).filter((r) => !foreign.has(r.targetNode));
    const plan = planRoutes(nodes, existing, this.opts.clusterCIDRs);
    const deletions = plan.toDelete.map((route) => () => this.deleteRoute(route, signal));
    const creations = plan.toCreate.map(({ nameHint, route }) => () => this.createRoute(nameHint, route, nodes, plan.actions, signal));
    const run = (ops: (() => Promise<void>)[]) => forEachLimited(ops, MAX_CONCURRENT_ROUTE_OPERATIONS, (op) => op());
    // An update deletes and re-creates the same CIDR: then creation must not race the deletion.
    if (plan.deleteBeforeCreate) {
      await run(deletions);
      await run(creations);
    } else {
      await run([...deletions, ...creations]);
    }
    // Every wanted route now exists (or failed and is reported): a BGP table may be announced.
    this.routes.synced?.();

    await Promise.all(
      nodes.map(async (node) => {
        const actions = plan.actions.get(node.metadata?.name ?? '');
        if (!actions) return;
        const created = actions.size > 0 && [...actions.values()].every((a) => a !== 'add' && a !== 'update');
        await this.updateNetworkCondition(node, created, signal);
      }),
    );
  }

  private async deleteRoute(route: Route, signal?: AbortSignal): Promise<void> {
    try {
      await this.routes.deleteRoute(this.ctx.clusterName, route, signal);
      this.ctx.logger.info('deleted route', { controller: this.name, route: route.name, cidr: route.destinationCIDR });
    } catch (e) {
      this.ctx.logger.error('could not delete route', { controller: this.name, route: route.name, cidr: route.destinationCIDR, error: errorMessage(e) });
    }
  }

  private async createRoute(nameHint: string, route: Route, nodes: V1Node[], actions: Map<string, Map<string, RouteAction>>, signal?: AbortSignal): Promise<void> {
    try {
      await this.routes.createRoute(this.ctx.clusterName, nameHint, route, signal);
      actions.get(route.targetNode)?.set(route.destinationCIDR, 'keep');
      this.ctx.logger.info('created route', { controller: this.name, node: route.targetNode, cidr: route.destinationCIDR });
    } catch (e) {
      if (addressesPending(route)) {
        // A node the node controller has not given its addresses yet (just registered): a provider
        // that routes to an address cannot yet. Their arrival starts another round; not an error.
        this.ctx.logger.info('waiting for the node\'s addresses before creating its route', { controller: this.name, node: route.targetNode, cidr: route.destinationCIDR, reason: errorMessage(e) });
        return;
      }
      const msg = `Could not create route ${nameHint} ${route.destinationCIDR} for node ${route.targetNode}: ${errorMessage(e)}`;
      const node = nodes.find((n) => n.metadata?.name === route.targetNode);
      this.ctx.recorder.event(
        { apiVersion: 'v1', kind: 'Node', metadata: { name: route.targetNode, uid: node?.metadata?.uid } },
        'Warning',
        'FailedToCreateRoute',
        msg,
      );
      this.ctx.logger.error('could not create route', { controller: this.name, node: route.targetNode, cidr: route.destinationCIDR, error: errorMessage(e) });
    }
  }

  private async updateNetworkCondition(node: V1Node, routesCreated: boolean, signal?: AbortSignal): Promise<void> {
    const condition = networkCondition(node, routesCreated, new Date());
    if (!condition) return;
    const name = node.metadata?.name ?? '';
    try {
      // Strategic merge on status: conditions merge by type, so the kubelet's own conditions and
      // concurrent writers are untouched and no resourceVersion round trip is needed.
      await this.nodes.patch(name, 'strategic', { status: { conditions: [condition] } }, { subresource: 'status', signal });
    } catch (e) {
      this.ctx.logger.error('error updating node network condition', { controller: this.name, node: name, error: errorMessage(e) });
    }
  }
}

/** True while the route's node has no InternalIP or ExternalIP (its addresses are not set yet). */
function addressesPending(route: Route): boolean {
  return !route.targetNodeAddresses.some((a) => a.type === 'InternalIP' || a.type === 'ExternalIP');
}
