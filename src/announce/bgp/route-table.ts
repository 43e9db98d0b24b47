import type { Route, Routes } from '../../cloud/types.ts';
import { formatPrefix, parsePrefix } from '../../net/ip.ts';
import { nodeNextHop } from './next-hop.ts';

/** A pod CIDR route as announced: the route controller's Route and the next hop chosen for it. */
export interface AnnouncedRoute {
  route: Route;
  nextHop: string;
}

/**
 * The Routes interface over BGP: the route controller's routes are kept here, one per pod CIDR,
 * each announced with the node's address of the CIDR's family as next hop (the app's BGP
 * announcer reads the table and listens for changes). listRoutes is exactly what is announced.
 *
 * Routes record the node's addresses (enableNodeAddresses), so a node whose address changed gets
 * its route deleted and re-created with the new next hop. The table is this process's memory:
 * a new leader starts empty and the route controller's first round fills it (the announcer
 * waits for that round before it opens sessions, see synced()).
 */
export class BgpRouteTable implements Routes {
  private readonly routes = new Map<string, AnnouncedRoute>();
  private readonly listeners = new Set<() => void>();
  private rounds = 0;

  async listRoutes(): Promise<Route[]> {
    return [...this.routes.values()].map((r) => ({ ...r.route }));
  }

  async createRoute(clusterName: string, nameHint: string, route: Route): Promise<void> {
    const prefix = parsePrefix(route.destinationCIDR, true);
    if (!prefix) throw new Error(`${route.destinationCIDR} is not a CIDR`);
    const nextHop = nodeNextHop(route.targetNodeAddresses, prefix.family);
    if (!nextHop) throw new Error(`node ${route.targetNode} has no InternalIP or ExternalIP of IPv${prefix.family} to announce ${route.destinationCIDR} with`);
    // The CIDR as announced (host bits cleared), and as the controller knows it.
    const key = formatPrefix(prefix);
    this.routes.set(key, {
      route: { ...route, name: `${clusterName}-${nameHint}`, blackhole: false, enableNodeAddresses: true },
      nextHop,
    });
    this.changed();
  }

  async deleteRoute(_clusterName: string, route: Route): Promise<void> {
    const prefix = parsePrefix(route.destinationCIDR, true);
    if (prefix && this.routes.delete(formatPrefix(prefix))) this.changed();
  }

  /** Beyond upstream: the route controller finished a round (see Routes.synced). */
  synced(): void {
    // Only the first round is news (the announcer waits for it); later ones changed nothing by themselves.
    if (this.rounds++ === 0) this.changed();
  }

  /** Whether the route controller has finished a round since this process started. */
  get hasSynced(): boolean {
    return this.rounds > 0;
  }

  /**
   * Forgets every route and round: the table is one term's (the route controller of the next
   * term fills it again, and the announcer waits for its first round before opening sessions).
   */
  forget(): void {
    this.rounds = 0;
    if (this.routes.size === 0) return;
    this.routes.clear();
    this.changed();
  }

  /** The routes and their next hops, in no particular order. */
  announced(): AnnouncedRoute[] {
    return [...this.routes.values()];
  }

  /** Called after every change of the table. Returns the unsubscribe function. */
  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private changed(): void {
    for (const l of this.listeners) l();
  }
}
