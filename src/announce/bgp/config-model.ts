import type { SpeakerConfig } from '../../net/bgp/speaker.ts';
import type { BfdTimers } from '../../net/bfd/session.ts';

/**
 * The `bgp` section after validation: the speaker's configuration (password files read) and
 * the attributes of each kind of announcement. Every field is documented in docs/networking/bgp.md.
 */

export interface BgpAttributes {
  communities: readonly string[];
  localPref?: number;
}

export interface BgpConfig {
  /** Plain data for BgpSpeaker.start / reconfigure. */
  speaker: SpeakerConfig;
  /** Nodes' pod CIDRs (the Routes interface, with --configure-cloud-routes). */
  podCIDRs: { announce: boolean } & BgpAttributes;
  /**
   * Who announces load-balancer addresses. `leader`: the leader, with every eligible node as a
   * next hop (a dead node's next hop stays until its Node object changes). `nodes`: each node's
   * `edge-ccm speaker` over its own sessions, with itself as next hop, each session tied to a
   * BFD session (`bfd`, undefined: off) so a dead node's paths leave with it; the leader then
   * announces pod CIDRs only.
   */
  loadBalancers: { announceFrom: 'leader' | 'nodes'; bfd?: BfdTimers };
  /** Attributes of the addresses of each `announce: bgp` pool, by pool name (none listed: no communities, default LOCAL_PREF). */
  pools: ReadonlyMap<string, BgpAttributes>;
}

export const DEFAULT_RESTART_TIME_SECONDS = 120;
/** BFD of the per-node sessions by default: 3 x 200 ms, a dead node detected within 600 ms. */
export const DEFAULT_NODE_BFD: BfdTimers = { desiredMinTxMs: 200, requiredMinRxMs: 200, detectMult: 3 };
