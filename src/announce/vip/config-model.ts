import type { BfdTimers } from '../../net/bfd/session.ts';
import type { PeerConfig } from '../../net/bgp/speaker.ts';
import type { IP, IPFamily } from '../../net/ip.ts';
import type { HealthCheckFiles } from './health-check-config.ts';

/** The `controlPlaneEndpoint` section after validation (docs/networking/control-plane-vip.md). */
export interface ControlPlaneEndpointConfig {
  /** One per family at most; all held by one host. */
  addresses: { address: string; ip: IP }[];
  announce: 'l2' | 'bgp';
  /** announce: bgp: the sessions each host opens, and what it announces while it holds the VIP. */
  bgp?: VipBgpConfig;
  /** announce: l2. Undefined: for each address, the interface whose subnet holds it. */
  interfaces?: string[];
  healthURL: string;
  /** Undefined: the check is anonymous and does not verify the certificate. */
  healthCheck?: HealthCheckFiles;
  /** Every control-plane host: name -> the address its heartbeats go to. */
  hosts: Map<string, string>;
  /**
   * Undefined (the default): sticky, a healthy holder keeps the VIP. Set: this host takes it back
   * whenever it is eligible (the ordered handback; each one resets the connections in flight).
   */
  preferredHost?: string;
  heartbeatPort: number;
  timings: VipTimings;
}

export interface VipBgpConfig {
  localAsn: number;
  /** As the file gives them (password read), without a source address: each host adds its own next hop. */
  peers: PeerConfig[];
  /** undefined: BFD off. */
  bfd?: BfdTimers;
  communities: string[];
  localPref?: number;
  /** Host -> its address of each family: the source of its sessions of that family and the VIP's next hop. */
  nextHops: Map<string, Partial<Record<IPFamily, string>>>;
}

export interface VipTimings {
  healthIntervalMs: number;
  healthTimeoutMs: number;
  unhealthyAfter: number;
  healthyAfter: number;
  heartbeatIntervalMs: number;
  livenessTimeoutMs: number;
}

export const DEFAULT_HEALTH_URL = 'https://127.0.0.1:6443/readyz';
/** The speaker's heartbeats use 7947: both may run on one host. */
export const DEFAULT_VIP_HEARTBEAT_PORT = 7948;
/**
 * 250 ms x 3 with a 200 ms timeout: a dead API server (connection refused) is noticed in ~0.75 s,
 * a hung one in ~0.8 s, inside the 2 s budget with the heartbeat that tells the others; two
 * successes in a row before it counts again, so a flapping server does not pull the VIP back at
 * its first answer.
 */
export const DEFAULT_VIP_TIMINGS: VipTimings = {
  healthIntervalMs: 250,
  healthTimeoutMs: 200,
  unhealthyAfter: 3,
  healthyAfter: 2,
  heartbeatIntervalMs: 250,
  livenessTimeoutMs: 1000,
};
