import { Counter, Gauge, type Registry } from '../../util/prom.ts';

/** `edge-ccm vip`'s metrics (docs/networking/control-plane-vip.md#metrics): each host exports its own view. */
export class VipMetrics {
  readonly holding: Gauge;
  readonly holdingSince: Gauge;
  readonly elected: Gauge<'node'>;
  readonly healthy: Gauge;
  readonly quorum: Gauge;
  readonly transitions: Counter<'direction' | 'reason'>;
  readonly pauses: Counter;

  constructor(registry: Registry) {
    const registers = [registry];
    this.holding = new Gauge({ name: 'edge_ccm_vip_holding', help: '1 while this host answers for the control-plane VIP.', registers });
    this.holdingSince = new Gauge({ name: 'edge_ccm_vip_holding_since_seconds', help: 'Unix time this host last took the VIP; 0 while it does not hold it.', registers });
    this.elected = new Gauge({ name: 'edge_ccm_vip_elected', help: 'The host this one elects for the VIP (1); node "" when none is eligible.', labelNames: ['node'], registers });
    this.healthy = new Gauge({ name: 'edge_ccm_vip_apiserver_healthy', help: "The local API server's health check: 1 healthy, 0 not.", registers });
    this.quorum = new Gauge({ name: 'edge_ccm_vip_quorum', help: '1 while this host hears more than half of the configured control-plane hosts (itself included).', registers });
    this.transitions = new Counter({ name: 'edge_ccm_vip_transitions_total', help: 'Times this host took or released the VIP, by reason.', labelNames: ['direction', 'reason'], registers });
    this.pauses = new Counter({ name: 'edge_ccm_vip_pauses_total', help: 'Times this process did not run for longer than the liveness timeout (it released the VIP and warmed up again).', registers });
  }
}
