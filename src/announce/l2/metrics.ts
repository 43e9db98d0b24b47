import { Counter, Gauge, type Registry } from '../../util/prom.ts';
import type { LivenessStats } from './liveness.ts';
import type { ResponderStats } from '../../net/l2/responder.ts';

/**
 * The speaker's metrics. Each speaker exports what it announces itself (summed over the
 * DaemonSet, Prometheus shows which node announces which address), what its election says for
 * every address (so a disagreement between speakers shows as two owners), and counters read
 * from the responder and the liveness mesh at scrape time.
 */
export class L2AnnouncerMetrics {
  readonly announcing: Gauge<'address' | 'interface' | 'node'>;
  readonly elected: Gauge<'address' | 'node' | 'pool'>;
  readonly takeovers: Counter<'address' | 'node'>;
  readonly conflicts: Counter<'address' | 'node'>;
  readonly alive: Gauge;
  readonly isolated: Gauge;
  readonly held: Gauge;
  readonly pauses: Counter;

  constructor(registry: Registry, stats: () => { responder: ResponderStats; liveness?: LivenessStats; announcing: number }) {
    this.announcing = new Gauge({
      name: 'edge_ccm_l2_announcing',
      help: 'Addresses this node answers ARP/NDP for: 1 per address and interface.',
      labelNames: ['address', 'interface', 'node'],
      registers: [registry],
    });
    this.elected = new Gauge({
      name: 'edge_ccm_l2_elected_node',
      help: 'The node this speaker elects for each address of an announce: l2 pool (1); node "" when no node is eligible.',
      labelNames: ['address', 'node', 'pool'],
      registers: [registry],
    });
    this.takeovers = new Counter({
      name: 'edge_ccm_l2_takeovers_total',
      help: 'Times this node began announcing an address (gratuitous ARP / unsolicited NA sent).',
      labelNames: ['address', 'node'],
      registers: [registry],
    });
    this.conflicts = new Counter({
      name: 'edge_ccm_l2_conflicts_total',
      help: 'Frames from another station claiming an address this node announces, after its takeover settled.',
      labelNames: ['address', 'node'],
      registers: [registry],
    });
    this.alive = new Gauge({ name: 'edge_ccm_l2_speakers_alive', help: 'Speakers this one hears (itself included).', registers: [registry] });
    this.isolated = new Gauge({ name: 'edge_ccm_l2_isolated', help: '1 while this speaker hears no other speaker but other nodes are Ready: it elects by the Node objects (docs/networking/l2.md).', registers: [registry] });
    this.pauses = new Counter({ name: 'edge_ccm_l2_pauses_total', help: 'Times this speaker woke from a pause longer than the liveness timeout (SIGSTOP, a frozen cgroup, a blocked event loop) and joined again as a returning speaker.', registers: [registry] });
    this.held = new Gauge({ name: 'edge_ccm_l2_takeovers_held', help: 'Addresses this node is elected for but does not answer yet: a speaker it hears sees other speakers alive.', registers: [registry] });
    new Gauge({
      name: 'edge_ccm_l2_takeover_announcements_pending',
      help: 'Addresses whose gratuitous ARP / unsolicited Neighbor Advertisements are still being repeated after a takeover.',
      registers: [registry],
      collect() {
        this.set(stats().announcing);
      },
    });
    // Counters kept by the responder and the mesh, copied in at each scrape (prom-client's collect).
    new Counter({
      name: 'edge_ccm_l2_answers_total',
      help: 'ARP replies and Neighbor Advertisements sent in answer to a request.',
      labelNames: ['address'],
      registers: [registry],
      collect() {
        this.reset();
        for (const [address, n] of Object.entries(stats().responder.answers)) this.inc({ address }, n);
      },
    });
    // Labelled by a reason of a fixed set (src/net/l2/refusals.ts), never by what a frame carried.
    new Counter({
      name: 'edge_ccm_l2_malformed_frames_total',
      help: 'ARP/NDP frames ignored as malformed, by reason (a fixed set: docs/networking/l2.md).',
      labelNames: ['reason'],
      registers: [registry],
      collect() {
        this.reset();
        for (const [reason, n] of Object.entries(stats().responder.malformedReasons)) this.inc({ reason }, n);
      },
    });
    new Counter({
      name: 'edge_ccm_l2_martian_frames_total',
      help: 'Well-formed ARP/NDP frames ignored because their sender cannot be a station (broadcast, multicast or zero MAC; multicast, broadcast, loopback or 0/8 IPv4 sender; multicast, loopback or IPv4-mapped IPv6 source), by reason.',
      labelNames: ['reason'],
      registers: [registry],
      collect() {
        this.reset();
        for (const [reason, n] of Object.entries(stats().responder.martianReasons)) this.inc({ reason }, n);
      },
    });
    new Counter({
      name: 'edge_ccm_l2_requests_dropped_total',
      help: 'ARP requests and Neighbor Solicitations read but not answered because this process had just woken from a pause longer than the liveness timeout (they were queued while another node held the addresses).',
      registers: [registry],
      collect() {
        this.reset();
        this.inc(stats().responder.dropped);
      },
    });
    new Counter({
      name: 'edge_ccm_l2_heartbeats_total',
      help: 'Liveness heartbeats: sent, received, and refused by reason.',
      labelNames: ['kind', 'reason'],
      registers: [registry],
      collect() {
        this.reset();
        const live = stats().liveness;
        if (!live) return;
        this.inc({ kind: 'sent', reason: '' }, live.sent);
        this.inc({ kind: 'received', reason: '' }, live.received);
        for (const [reason, n] of Object.entries(live.refused)) this.inc({ kind: 'refused', reason }, n);
      },
    });
    new Counter({
      name: 'edge_ccm_l2_liveness_errors_total',
      help: 'Liveness mesh trouble by kind: send (a heartbeat not sent), socket (an error on the socket), internal (an exception while sending or judging), reopen (the socket closed under the speaker and was bound again), unreachable (a node refused a heartbeat: ICMP port unreachable, its speaker is not running).',
      labelNames: ['kind'],
      registers: [registry],
      collect() {
        this.reset();
        for (const [kind, n] of Object.entries(stats().liveness?.errors ?? {})) this.inc({ kind }, n);
      },
    });
  }
}
