import { Counter, Gauge, type Registry } from '../../util/prom.ts';
import type { BfdSessionStats } from '../../net/bfd/session.ts';
import type { SpeakerStats } from '../../net/bgp/speaker.ts';
import { perRegistry } from '../../util/per-registry.ts';
import { registerBgpMetrics } from './metrics.ts';

/**
 * The metrics of a node's own sessions (announceFrom: nodes) on the speaker's /metrics: the BGP
 * series of the leader's (metrics.ts, one per peer) and, per peer, its BFD session. Read at
 * scrape time; no series while the node runs no sessions.
 */
export interface NodeSessionStats {
  bgp: SpeakerStats;
  bfd: (BfdSessionStats & { peer: string })[];
}

const bfdMetricsOf = perRegistry((registry) => {
  const source: { stats: () => NodeSessionStats | undefined } = { stats: () => undefined };
  const registers = [registry];
  new Gauge({
    name: 'edge_ccm_bfd_session_state',
    help: 'BFD session state per peer, as RFC 5880 numbers it: 0 AdminDown, 1 Down, 2 Init, 3 Up.',
    labelNames: ['peer'],
    registers,
    collect() {
      this.reset();
      for (const s of source.stats()?.bfd ?? []) this.set({ peer: s.peer }, s.state);
    },
  });
  new Counter({
    name: 'edge_ccm_bfd_session_downs_total',
    help: 'Times the BFD session with the peer left Up (each one withdrew this node\'s addresses from that peer).',
    labelNames: ['peer'],
    registers,
    collect() {
      this.reset();
      for (const s of source.stats()?.bfd ?? []) this.inc({ peer: s.peer }, s.downs);
    },
  });
  return source;
});

export function registerNodeBgpMetrics(registry: Registry, stats: () => NodeSessionStats | undefined): void {
  registerBgpMetrics(registry, () => stats()?.bgp);
  bfdMetricsOf(registry).stats = stats;
}
