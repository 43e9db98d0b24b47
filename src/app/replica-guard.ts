import type { EventRecorder } from '../kube/event-recorder.ts';
import { LeaderElector } from '../kube/leader-election.ts';
import type { KubeTransport } from '../kube/transport.ts';
import type { Logger } from '../log.ts';

/**
 * Without leader election (--leader-elect=false) every replica runs every controller. For most
 * work that is only wasteful, but a load balancer that decides from this process's memory (the
 * static provider's address allocator) would hand one address to two services, one per replica.
 *
 * The guard keeps such decisions to one edge-ccm: it holds the Lease that leader election would
 * use (--leader-elect-resource-*), renewing it as a leader does, without stopping any controller.
 * While another edge-ccm holds it, a replica elected or not, `blockedReason()` says so and the
 * service controller ensures no load balancer; the first time it sees each other holder it records
 * a Warning event `AnotherReplicaActive` on the Lease. It takes the Lease when it is released, or
 * once it has expired (a lease duration without renewal, as leader election), and then has the
 * load balancer re-read its memory from the cluster (the other edge-ccm decided meanwhile).
 */

export const ANOTHER_REPLICA_REASON = 'AnotherReplicaActive';

export interface ReplicaGuardOptions {
  transport: KubeTransport;
  namespace: string;
  name: string;
  identity: string;
  leaseDurationMs: number;
  renewDeadlineMs: number;
  retryPeriodMs: number;
  logger: Logger;
  events: EventRecorder;
  /** Asked when the guard stops: whether to release the Lease (false: leave it to expire). */
  releaseOnStop: () => boolean;
  /** Called each time this process gets the Lease, with a signal that aborts when it loses it. */
  onAcquired?: (held: AbortSignal) => void;
}

export class ReplicaGuard {
  private readonly elector: LeaderElector;
  private holding = false;
  private readonly reported = new Set<string>();

  constructor(private readonly opts: ReplicaGuardOptions) {
    this.elector = new LeaderElector({
      transport: opts.transport,
      namespace: opts.namespace,
      name: opts.name,
      identity: opts.identity,
      leaseDurationMs: opts.leaseDurationMs,
      renewDeadlineMs: opts.renewDeadlineMs,
      retryPeriodMs: opts.retryPeriodMs,
      logger: opts.logger,
      releaseOnCancel: opts.releaseOnStop,
      onStartedLeading: (held) => {
        this.holding = true;
        held.addEventListener('abort', () => (this.holding = false), { once: true });
        opts.logger.info('this replica holds the Lease: it allocates load-balancer addresses');
        opts.onAcquired?.(held);
      },
      onStoppedLeading: () => {
        this.holding = false;
      },
      onNewLeader: (holder) => this.noticeHolder(holder),
    });
  }

  /** Why this process must not ensure load balancers now; undefined while it holds the Lease. */
  blockedReason(): string | undefined {
    if (this.holding) return undefined;
    const lease = `Lease ${this.opts.namespace}/${this.opts.name}`;
    const holder = this.elector.leader();
    return holder && holder !== this.opts.identity
      ? `another edge-ccm (${holder}) holds the ${lease}: with --leader-elect=false this replica allocates no load-balancer addresses while it does (run one replica, or turn leader election on)`
      : `the ${lease} is not this replica's yet: with --leader-elect=false it allocates no load-balancer addresses until it holds it`;
  }

  /** Holds the Lease whenever it can, until the signal aborts (then releases it, if allowed). */
  async run(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) await this.elector.run(signal);
  }

  private noticeHolder(holder: string): void {
    if (holder === this.opts.identity || this.reported.has(holder)) return;
    this.reported.add(holder);
    const message = `edge-ccm ${holder} holds this Lease: replica ${this.opts.identity} (--leader-elect=false) allocates no load-balancer addresses while it does; run one replica, or turn leader election on`;
    this.opts.logger.warn('another edge-ccm holds the Lease: not allocating load-balancer addresses', { holder });
    this.opts.events.event(
      { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { namespace: this.opts.namespace, name: this.opts.name } },
      'Warning',
      ANOTHER_REPLICA_REASON,
      message,
    );
  }
}
