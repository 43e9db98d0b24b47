import type { BgpClusterView, BgpSource } from '../../cloud/types.ts';
import type { Announcement, SpeakerConfig } from '../../net/bgp/speaker.ts';
import type { LoadBalancerConfig } from '../../lb/config-model.ts';
import type { BgpConfig } from './config-model.ts';
import { loadBalancerAnnouncements, mergeAnnouncements, podCIDRAnnouncements } from './announcements.ts';
import { BgpRouteTable } from './route-table.ts';

/** What the BGP side reads of a provider's configuration. */
export interface ProviderSections {
  loadBalancer: LoadBalancerConfig;
  bgp?: BgpConfig;
}

/**
 * A provider's BGP side, the same for every provider: the `bgp` section in force, the pod CIDR
 * route table (its Routes implementation) and the table to announce. The provider creates one
 * with its configuration at start and hands it each new one (use); the app's announcer runs the speaker.
 */
export class ProviderBgp implements BgpSource {
  readonly routeTable = new BgpRouteTable();

  private sections: ProviderSections;

  /**
   * `initial`: the provider's sections at start (SharedSections of src/config-sections.ts); the
   * provider hands every later configuration in force to use(). Pushed, not read back through a
   * getter: the table is computed here from what this room holds, without a call into the provider.
   */
  constructor(initial: ProviderSections) {
    this.sections = initial;
  }

  /** The sections in force from now on (the provider's last good configuration). */
  use(sections: ProviderSections): void {
    this.sections = sections;
  }


  /**
   * The Routes implementation when the configuration at start announces pod CIDRs, else
   * undefined (the route controller stays off, as without BGP). Read once by the provider's
   * constructor: turning pod CIDR announcement on or off takes a restart, as the controllers
   * are chosen at start.
   */
  routesAtStart(): BgpRouteTable | undefined {
    return this.sections.bgp?.podCIDRs.announce ? this.routeTable : undefined;
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
    return this.sections.bgp?.speaker;
  }

  announcements(view: BgpClusterView): { table: Announcement[]; clashes: string[] } {
    const config = this.sections;
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
