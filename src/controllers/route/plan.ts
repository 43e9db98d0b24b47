import type { V1Node, V1NodeAddress, V1NodeCondition } from '@kubernetes/client-node';
import type { Route } from '../../cloud/types.ts';
import { parsePrefix, prefixContains, type Prefix } from '../../net/ip.ts';
import { podCIDRs } from '../../kube/node-helpers.ts';

/** Decisions of the route controller, kept pure so the upstream scenarios test them directly. */

export type RouteAction = 'keep' | 'add' | 'update' | 'remove';

export interface RoutePlan {
  /** Routes to delete: blackholes, unwanted, or to be re-created with new addresses. */
  toDelete: Route[];
  /** Routes to create, with the name hint (the node's UID). */
  toCreate: { nameHint: string; route: Route }[];
  /** Per node: its pod CIDRs and what happens to each; absent for nodes with no CIDR and no route. */
  actions: Map<string, Map<string, RouteAction>>;
  /** Whether creation must wait for deletion (an update deletes and re-creates the same CIDR). */
  deleteBeforeCreate: boolean;
}

/** A route is ours when its first or last address is inside one of the cluster CIDRs (upstream). */
export function isResponsibleForRoute(route: Route, clusterCIDRs: Prefix[]): boolean {
  const cidr = parsePrefix(route.destinationCIDR, true);
  if (!cidr) return false;
  return clusterCIDRs.some(
    (c) => prefixContains(c, { family: cidr.family, value: cidr.first }) || prefixContains(c, { family: cidr.family, value: cidr.last }),
  );
}

export function sameAddresses(a: V1NodeAddress[], b: V1NodeAddress[]): boolean {
  return a.length === b.length && a.every((x) => b.some((y) => x.type === y.type && x.address === y.address));
}

function routeAction(routes: Route[], cidr: string, addresses: V1NodeAddress[]): RouteAction {
  const route = routes.find((r) => r.destinationCIDR === cidr);
  if (!route) return 'add';
  return !route.enableNodeAddresses || sameAddresses(addresses, route.targetNodeAddresses) ? 'keep' : 'update';
}

export function planRoutes(nodes: V1Node[], routes: Route[], clusterCIDRs: Prefix[]): RoutePlan {
  const routesByNode = new Map<string, Route[]>();
  for (const r of routes) {
    if (!r.targetNode) continue;
    routesByNode.set(r.targetNode, [...(routesByNode.get(r.targetNode) ?? []), r]);
  }
  const actions = new Map<string, Map<string, RouteAction>>();
  for (const name of routesByNode.keys()) actions.set(name, new Map());
  const toCreate: RoutePlan['toCreate'] = [];
  for (const node of nodes) {
    const name = node.metadata?.name ?? '';
    const cidrs = podCIDRs(node);
    if (cidrs.length === 0) continue;
    const addresses = node.status?.addresses ?? [];
    const perCidr = actions.get(name) ?? new Map<string, RouteAction>();
    actions.set(name, perCidr);
    for (const cidr of cidrs) {
      const action = routeAction(routesByNode.get(name) ?? [], cidr, addresses);
      perCidr.set(cidr, action);
      if (action === 'add' || action === 'update') {
        toCreate.push({
          nameHint: node.metadata?.uid ?? '',
          route: { name: '', targetNode: name, targetNodeAddresses: addresses, destinationCIDR: cidr, blackhole: false },
        });
      }
    }
  }
  const toDelete = routes.filter((r) => {
    if (!isResponsibleForRoute(r, clusterCIDRs)) return false;
    if (r.blackhole) return true;
    const action = actions.get(r.targetNode)?.get(r.destinationCIDR);
    return action === undefined || action === 'remove' || action === 'update';
  });
  return { toDelete, toCreate, actions, deleteBeforeCreate: routes[0]?.enableNodeAddresses === true };
}

/**
 * The NetworkUnavailable condition to write, or undefined when the node already says the same
 * (upstream skips only when status AND our reason match, so a foreign reason is overwritten).
 */
export function networkCondition(node: V1Node, routesCreated: boolean, now: Date): V1NodeCondition | undefined {
  const current = node.status?.conditions?.find((c) => c.type === 'NetworkUnavailable');
  if (routesCreated && current?.status === 'False' && current.reason === 'RouteCreated') return undefined;
  if (!routesCreated && current?.status === 'True' && current.reason === 'NoRouteCreated') return undefined;
  return routesCreated
    ? { type: 'NetworkUnavailable', status: 'False', reason: 'RouteCreated', message: 'RouteController created a route', lastTransitionTime: now }
    : { type: 'NetworkUnavailable', status: 'True', reason: 'NoRouteCreated', message: 'RouteController failed to create a route', lastTransitionTime: now };
}
