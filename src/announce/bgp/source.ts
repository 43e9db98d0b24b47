import type { BgpClusterView, BgpSource } from '../../cloud/types.ts';
import type { Announcement, SpeakerConfig } from '../../net/bgp/speaker.ts';
import type { LoadBalancerConfig } from '../../lb/config-model.ts';
import type { BgpConfig } from './config-model.ts';
import { loadBalancerAnnouncements, mergeAnnouncements, podCIDRAnnouncements } from './announcements.ts';
import { BgpRouteTable } from './route-table.ts';

/**
 * A provider's BGP side, the same for every provider: the `bgp` section in force, the pod CIDR
 * route table (its Routes implementation) and the table to announce. The provider creates one
 * with a reader of its configuration in force; the app's announcer runs the speaker.
 */
export class ProviderBgp implements BgpSource {
  readonly routeTable = new BgpRouteTable();

  /** `config` reads the provider's sections in force (SharedSections of src/config-sections.ts). */
  constructor(private readonly config: () => { loadBalancer: LoadBalancerConfig; bgp?: BgpConfig }) {}

  /**
   * The Routes implementation when the configuration at start announces pod CIDRs, else
   * undefined (the route controller stays off, as without BGP). Read once by the provider's
   * constructor: turning pod CIDR announcement on or off takes a restart, as the controllers
   * are chosen at start.
   */
  routesAtStart(): BgpRouteTable | undefined {
    return this.config().bgp?.podCIDRs.announce ? this.routeTable : undefined;
  }

  /**
   * At the start of a leadership term (the provider's initialize): the pod CIDR routes of an
   * earlier term are forgotten now and when this one ends, so a new term announces only once its
   * own route controller finished a round (routesSynced), not a table left by the last.
   */
  beginTerm(signal: AbortSignal): void {
    this.routeTable.forget();
    signal.addEventListener('abort', () => this.routeTable.forget(), { once: true });
  }

  speakerConfig(): SpeakerConfig | undefined {
    return this.config().bgp?.speaker;
  }

  announcements(view: BgpClusterView): { table: Announcement[]; clashes: string[] } {
    const config = this.config();
    if (!config.bgp) return { table: [], clashes: [] };
    // Per-node sessions announce the load-balancer addresses (src/announce/bgp/node-announcer.ts): the leader keeps the pod CIDRs.
    const loadBalancers = config.bgp.loadBalancers.announceFrom === 'nodes' ? [] : loadBalancerAnnouncements(view, config.loadBalancer, config.bgp);
    return mergeAnnouncements(podCIDRAnnouncements(this.routeTable.announced(), config.bgp), loadBalancers);
  }

  get routesSynced(): boolean {
    return this.routeTable.hasSynced;
  }

  onRoutesChange(listener: () => void): () => void {
    return this.routeTable.onChange(listener);
  }
}
