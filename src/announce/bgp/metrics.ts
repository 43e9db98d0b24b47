import { Counter, Gauge, type Registry } from '../../util/prom.ts';
import type { PeerState, SpeakerStats } from '../../net/bgp/speaker.ts';
import { UPDATE_ERROR_KINDS } from '../../net/bgp/update-faults.ts';
import { perRegistry } from '../../util/per-registry.ts';

/**
 * Per-peer BGP metrics, read from the running speaker's stats at scrape time (no series while
 * no speaker runs: a standby, or BGP not configured). Counters restart from 0 with each leader,
 * as every counter of a new process does.
 */

/** BGP4-MIB bgpPeerState numbering (RFC 4273), so dashboards written for routers read the same. */
export const PEER_STATE_CODES: Record<PeerState, number> = { idle: 1, connect: 2, active: 3, opensent: 4, openconfirm: 5, established: 6 };

type PeerStats = SpeakerStats['peers'][number];
type StatsSource = () => SpeakerStats | undefined;

/** Writes each running peer's value under its labels (after a reset, so a removed peer leaves no series). */
function eachPeer(stats: StatsSource, write: (labels: { peer: string; peer_asn: string }, value: number) => void, value: (p: PeerStats) => number): void {
  for (const p of stats()?.peers ?? []) write({ peer: p.address, peer_asn: String(p.asn) }, value(p));
}

/** The metrics of a registry, made once; `stats` is where they read the speaker (set by registerBgpMetrics). */
const metricsOf = perRegistry((registry) => {
  const source: { stats: StatsSource } = { stats: () => undefined };
  const stats = () => source.stats();
  const labelNames = ['peer', 'peer_asn'];
  const registers = [registry];
  const gauge = (name: string, help: string, value: (p: PeerStats) => number) =>
    new Gauge({ name, help, labelNames, registers, collect() { this.reset(); eachPeer(stats, (l, v) => this.set(l, v), value); } });
  const counter = (name: string, help: string, value: (p: PeerStats) => number) =>
    new Counter({ name, help, labelNames, registers, collect() { this.reset(); eachPeer(stats, (l, v) => this.inc(l, v), value); } });
  gauge('edge_ccm_bgp_session_state', 'BGP session state per peer, numbered as BGP4-MIB bgpPeerState: 1 idle, 2 connect, 3 active, 4 opensent, 5 openconfirm, 6 established.', (p) => PEER_STATE_CODES[p.state]);
  gauge('edge_ccm_bgp_session_established', '1 while the BGP session with the peer is established, else 0.', (p) => (p.state === 'established' ? 1 : 0));
  gauge('edge_ccm_bgp_session_uptime_seconds', 'Seconds since the BGP session with the peer was established (0 when it is not).', (p) => p.uptimeSeconds);
  gauge('edge_ccm_bgp_prefixes_announced', 'Prefixes announced to the peer on the current session.', (p) => p.prefixesAnnounced);
  counter('edge_ccm_bgp_updates_sent_total', 'UPDATE messages sent to the peer.', (p) => p.updatesSent);
  counter('edge_ccm_bgp_updates_received_total', 'UPDATE messages received from the peer (validated and counted, never installed).', (p) => p.updatesReceived);
  counter('edge_ccm_bgp_notifications_sent_total', 'NOTIFICATION messages sent to the peer.', (p) => p.notificationsSent);
  counter('edge_ccm_bgp_notifications_received_total', 'NOTIFICATION messages received from the peer.', (p) => p.notificationsReceived);
  counter('edge_ccm_bgp_session_flaps_total', 'Times an established BGP session with the peer went down.', (p) => p.flaps);
  gauge('edge_ccm_bgp_write_queue_bytes', 'Bytes queued for the peer that it has not read yet (capped; see docs/networking/bgp.md).', (p) => p.queuedBytes);
  counter('edge_ccm_bgp_route_refreshes_coalesced_total', 'ROUTE-REFRESH requests from the peer not answered because the previous answer was still queued.', (p) => p.routeRefreshesCoalesced);
  new Counter({
    name: 'edge_ccm_bgp_update_errors_total',
    help: 'Malformed UPDATEs from the peer by RFC 7606 handling: treat_as_withdraw (per UPDATE), attribute_discard and repeated_attribute (per attribute), session_reset.',
    labelNames: [...labelNames, 'kind'],
    registers,
    collect() {
      this.reset();
      for (const p of stats()?.peers ?? []) {
        for (const kind of UPDATE_ERROR_KINDS) this.inc({ peer: p.address, peer_asn: String(p.asn), kind }, p.updateErrors[kind]);
      }
    },
  });
  new Gauge({
    name: 'edge_ccm_bgp_announcements',
    help: 'Prefixes in the table the BGP speaker announces (pod CIDRs and load-balancer addresses).',
    registers,
    collect() {
      this.reset();
      const s = stats();
      if (s) this.set(s.announcements);
    },
  });
  return source;
});

/** Registers the BGP metrics on `registry` (once), read from `stats` at each scrape. */
export function registerBgpMetrics(registry: Registry, stats: StatsSource): void {
  metricsOf(registry).stats = stats;
}
