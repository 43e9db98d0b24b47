import type { SpeakerConfig } from '../../net/bgp/speaker.ts';

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
  /** Attributes of the addresses of each `announce: bgp` pool, by pool name (none listed: no communities, default LOCAL_PREF). */
  pools: ReadonlyMap<string, BgpAttributes>;
}

export const DEFAULT_RESTART_TIME_SECONDS = 120;
