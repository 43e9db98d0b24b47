import { expect, test } from 'bun:test';
import { Registry } from 'prom-client';
import { registerBgpMetrics } from './metrics.ts';
import type { SpeakerStats } from '../../net/bgp/speaker.ts';

const peer = (address: string, asn: number, state: 'established' | 'active', updatesSent: number): SpeakerStats['peers'][number] => ({
  address, asn, state, uptimeSeconds: state === 'established' ? 42 : 0, prefixesAnnounced: 3, updatesSent,
  updatesReceived: 1, notificationsSent: 0, notificationsReceived: 2, flaps: 1,
  updateErrors: { treat_as_withdraw: 3, attribute_discard: 0, repeated_attribute: 1, session_reset: 0 }, routeRefreshesCoalesced: 4, queuedBytes: 512,
});

test('per-peer series read from the speaker at scrape time; none while no speaker runs', async () => {
  const registry = new Registry();
  let stats: SpeakerStats | undefined;
  registerBgpMetrics(registry, () => stats);
  expect(await registry.metrics()).not.toMatch(/^edge_ccm_bgp_\w+\{/m);

  stats = { announcements: 7, peers: [peer('198.51.100.1', 65000, 'established', 5), peer('2001:db8::1', 65001, 'active', 0)] };
  const lines = (await registry.metrics()).split('\n');
  expect(lines).toEqual(expect.arrayContaining([
    'edge_ccm_bgp_session_state{peer="198.51.100.1",peer_asn="65000"} 6',
    'edge_ccm_bgp_session_state{peer="2001:db8::1",peer_asn="65001"} 3',
    'edge_ccm_bgp_session_established{peer="2001:db8::1",peer_asn="65001"} 0',
    'edge_ccm_bgp_session_uptime_seconds{peer="198.51.100.1",peer_asn="65000"} 42',
    'edge_ccm_bgp_updates_sent_total{peer="198.51.100.1",peer_asn="65000"} 5',
    'edge_ccm_bgp_notifications_received_total{peer="2001:db8::1",peer_asn="65001"} 2',
    'edge_ccm_bgp_announcements 7',
    'edge_ccm_bgp_update_errors_total{peer="198.51.100.1",peer_asn="65000",kind="treat_as_withdraw"} 3',
    'edge_ccm_bgp_update_errors_total{peer="198.51.100.1",peer_asn="65000",kind="session_reset"} 0',
    'edge_ccm_bgp_write_queue_bytes{peer="2001:db8::1",peer_asn="65001"} 512',
    'edge_ccm_bgp_route_refreshes_coalesced_total{peer="198.51.100.1",peer_asn="65000"} 4',
  ]));

  // A peer removed from the config leaves no series behind.
  stats = { announcements: 7, peers: [peer('198.51.100.1', 65000, 'established', 6)] };
  const after = await registry.metrics();
  expect(after).not.toContain('2001:db8::1');
  expect(after).toContain('edge_ccm_bgp_updates_sent_total{peer="198.51.100.1",peer_asn="65000"} 6');
});

test('registered once per registry: a second registration reads its own source instead of failing on the names', async () => {
  const registry = new Registry();
  registerBgpMetrics(registry, () => ({ announcements: 1, peers: [] }));
  registerBgpMetrics(registry, () => ({ announcements: 2, peers: [] }));
  expect(await registry.metrics()).toMatch(/^edge_ccm_bgp_announcements 2$/m);
});
