import { hostname } from 'node:os';
import { Gauge, type Registry } from '../util/prom.ts';
import { perRegistry } from '../util/per-registry.ts';
import type { Logger } from '../log.ts';
import { isConflict, isNotFound, isUnanswered } from './errors.ts';
import type { EventRecorder } from './event-recorder.ts';
import type { RetryWait } from './api-server-return.ts';
import { LEASES, ResourceClient } from './resources.ts';
import type { KubeTransport } from './transport.ts';
import { sleep } from '../util/time.ts';
import { errorMessage } from '../util/errors.ts';

/**
 * Lease-based leader election, as client-go's leaderelection with a LeaseLock: candidates race to
 * hold a coordination.k8s.io/v1 Lease; the holder renews it every retry period, and the others
 * take it over once it has not changed for a whole lease duration (measured on their own clock,
 * from when they last saw it change, so clocks need not agree across machines). Every write is a
 * PUT carrying the resourceVersion we read: of two candidates racing, the API server lets one win
 * and answers the other 409.
 */

/** Retry waits are retryPeriod * (1 + random * JITTER_FACTOR), as upstream's wait.JitterUntil. */
export const JITTER_FACTOR = 1.2;
/** How long past its lease duration a leader that cannot renew still counts as healthy (upstream app's 20s). */
export const DEFAULT_HEALTH_TOLERANCE_MS = 20_000;
const METRIC_NAME = 'leader_election_master_status';

/** The Lease as plain JSON; times are MicroTime strings. */
export interface LeaseSpec {
  holderIdentity?: string;
  leaseDurationSeconds?: number;
  acquireTime?: string;
  renewTime?: string;
  leaseTransitions?: number;
}

export interface Lease {
  apiVersion?: string;
  kind?: string;
  metadata?: { name?: string; namespace?: string; uid?: string; resourceVersion?: string };
  spec?: LeaseSpec;
}

/** Wall time for the Lease's timestamps; monotonic time for measuring expiry (immune to clock steps). */
export interface ElectionClock {
  wallMs(): number;
  monotonicMs(): number;
}

const SYSTEM_ELECTION_CLOCK: ElectionClock = {
  wallMs: () => Date.now(),
  monotonicMs: () => performance.now(),
};

export interface LeaderElectionOptions {
  transport: KubeTransport;
  namespace: string;
  name: string;
  identity: string;
  leaseDurationMs?: number;
  renewDeadlineMs?: number;
  retryPeriodMs?: number;
  logger: Logger;
  /** Called (not awaited) once the lease is ours; the signal aborts when leadership ends. */
  onStartedLeading(signal: AbortSignal): void | Promise<void>;
  /**
   * Called once when run() ends, as upstream: after losing the lease, or when run's signal
   * aborted (also if we never led). The signal tells the two apart: lost means not aborted.
   */
  onStoppedLeading(): void;
  /** Called when the observed holder changes to a (non-empty) identity, ours included. */
  onNewLeader?(identity: string): void;
  /**
   * On abort, clear the holder so a standby takes over at once instead of after the lease duration.
   * A function is asked at that moment (false: leave the lease to expire). Never after the lease
   * was lost: a write of that term may still land, and the lease is not ours to clear.
   */
  releaseOnCancel?: boolean | (() => boolean);
  /**
   * How the waits between attempts are made (beyond upstream): ApiServerReturn cuts them short
   * when the API server answers again after an outage. Default: plain sleeps.
   */
  retryWait?: RetryWait;
  /** Gets leader_election_master_status{name}. */
  registry?: Registry;
  /** Records "became leader" / "stopped leading" on the Lease, as upstream's lock does. */
  events?: EventRecorder;
  clock?: ElectionClock;
}

/** A candidate identity unique per process: HOSTNAME_UUID, as upstream's controller managers. */
export function makeIdentity(host: string = hostname()): string {
  return `${host}_${crypto.randomUUID()}`;
}

/** Kubernetes MicroTime: RFC 3339 in UTC with exactly six fractional digits. */
export function formatMicroTime(ms: number): string {
  const wholeMs = Math.floor(ms);
  const micros = Math.floor((ms - wholeMs) * 1000);
  const iso = new Date(wholeMs).toISOString(); // 2006-01-02T15:04:05.000Z
  return `${iso.slice(0, -1)}${String(micros).padStart(3, '0')}Z`;
}

export class LeaderElector {
  private readonly leases: ResourceClient<Lease>;
  private readonly leaseDurationMs: number;
  private readonly renewDeadlineMs: number;
  private readonly retryPeriodMs: number;
  private readonly clock: ElectionClock;
  private readonly gauge?: Gauge<'name'>;
  private readonly log: Logger;

  /** The last Lease we read or wrote: its resourceVersion makes our next PUT conditional. */
  private lease?: Lease;
  /** The holder record as we last saw it, and when (monotonic) we saw it change. */
  private observed: LeaseSpec = {};
  private observedJson = '';
  private observedAt = 0;
  private reportedLeader = '';
  /** When (monotonic) the write of our last successful acquire or renewal was sent. */
  private renewedAt = Number.NEGATIVE_INFINITY;
  /** The last attempt failed without an answer from the API server: its return may cut the next wait short. */
  private unanswered = false;

  constructor(private readonly options: LeaderElectionOptions) {
    this.leaseDurationMs = options.leaseDurationMs ?? 15_000;
    this.renewDeadlineMs = options.renewDeadlineMs ?? 10_000;
    this.retryPeriodMs = options.retryPeriodMs ?? 2_000;
    // The same sanity rules as upstream's NewLeaderElector.
    if (this.leaseDurationMs <= this.renewDeadlineMs) throw new RangeError('leaseDuration must be greater than renewDeadline');
    if (this.renewDeadlineMs <= JITTER_FACTOR * this.retryPeriodMs) throw new RangeError('renewDeadline must be greater than retryPeriod*JitterFactor');
    if (this.retryPeriodMs < 1 || this.leaseDurationMs < 1000) throw new RangeError('retryPeriod must be positive and leaseDuration at least 1s');
    if (!options.identity) throw new RangeError('leader election identity must not be empty');
    this.clock = options.clock ?? SYSTEM_ELECTION_CLOCK;
    this.leases = new ResourceClient<Lease>(options.transport, LEASES);
    this.log = options.logger.with({ lease: `${options.namespace}/${options.name}` });
    if (options.registry) this.gauge = masterStatusGauge(options.registry);
    this.gauge?.set({ name: options.name }, 0);
  }

  get identity(): string {
    return this.options.identity;
  }

  /** Whether we hold the lease, as far as we last saw. */
  isLeader(): boolean {
    return this.observed.holderIdentity === this.options.identity;
  }

  /** The holder we last saw ('' when none). */
  leader(): string {
    return this.observed.holderIdentity ?? '';
  }

  /**
   * Whether we may act as leader right now (beyond upstream): we hold the lease and our last
   * renewal was sent less than the renew deadline ago, by our own monotonic clock. A process
   * paused past its lease (SIGSTOP, a frozen VM) wakes up with its timers and watch events all
   * due at once, and its controllers would write before the renewal loop sees the lease is gone;
   * the term's writes are refused while this is false (RequestFence.guardWrites). The bound is
   * below the lease duration (renewDeadline < leaseDuration), after which a standby may take over.
   */
  holdsLeaseNow(): boolean {
    return this.isLeader() && this.clock.monotonicMs() - this.renewedAt < this.renewDeadlineMs;
  }

  /**
   * Upstream's HealthzAdaptor check: an error when we think we lead but have not renewed for
   * longer than the lease duration plus a tolerance (a leader stuck without noticing).
   */
  check(toleranceMs: number = DEFAULT_HEALTH_TOLERANCE_MS): Error | undefined {
    if (!this.isLeader()) return undefined;
    if (this.clock.monotonicMs() - this.observedAt > this.leaseDurationMs + toleranceMs) {
      return new Error(`failed election to renew leadership on lease ${this.options.name}`);
    }
    return undefined;
  }

  /**
   * Campaigns until the lease is ours, leads until it is lost or the signal aborts, then calls
   * onStoppedLeading. Resolves with why it ended. May be called again after 'lost' (beyond
   * upstream, whose process exits): with the lease still naming this identity, it leads again at
   * its first successful attempt, without waiting for the lease to expire.
   */
  async run(signal: AbortSignal): Promise<'lost' | 'aborted'> {
    try {
      if (!(await this.acquire(signal))) return 'aborted';
      const leading = new AbortController();
      this.startLeading(leading.signal);
      try {
        await this.renew(signal);
      } finally {
        leading.abort(new Error('leadership ended'));
        this.gauge?.set({ name: this.options.name }, 0);
        this.recordEvent('stopped leading');
      }
      if (!signal.aborted) return 'lost';
      const release = this.options.releaseOnCancel ?? true;
      if (typeof release === 'function' ? release() : release) await this.release();
      return 'aborted';
    } finally {
      this.options.onStoppedLeading();
    }
  }

  private startLeading(signal: AbortSignal): void {
    // Not awaited, as upstream's `go OnStartedLeading(ctx)`; a failure is the app's to handle.
    void (async () => {
      try {
        await this.options.onStartedLeading(signal);
      } catch (e) {
        this.log.error('onStartedLeading failed', { error: errorMessage(e) });
      }
    })();
  }

  private async acquire(signal: AbortSignal): Promise<boolean> {
    this.log.info('attempting to acquire leader lease');
    while (!signal.aborted) {
      const acquired = await this.tryAcquireOrRenew(signal);
      this.maybeReportTransition();
      if (acquired) {
        this.log.info('successfully acquired lease');
        this.gauge?.set({ name: this.options.name }, 1);
        this.recordEvent('became leader');
        return true;
      }
      this.log.debug(4, 'failed to acquire lease', { holder: this.leader() });
      const jittered = this.retryPeriodMs * (1 + Math.random() * JITTER_FACTOR);
      if (!(await this.pause(jittered, signal))) break;
    }
    return false;
  }

  /** Renews every retry period; returns when a renewal round failed for a whole renew deadline, or on abort. */
  private async renew(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      const renewed = await this.renewWithinDeadline(signal);
      this.maybeReportTransition();
      if (signal.aborted) return;
      if (!renewed) {
        this.log.info('failed to renew lease: leadership lost', { renewDeadlineMs: this.renewDeadlineMs });
        return;
      }
      this.log.debug(5, 'successfully renewed lease');
      if (!(await pause(this.retryPeriodMs, signal))) return;
    }
  }

  /** One renewal round: tries at once, then every retry period, until the renew deadline (which also cancels the request in flight). */
  private async renewWithinDeadline(signal: AbortSignal): Promise<boolean> {
    const deadline = AbortSignal.any([signal, AbortSignal.timeout(this.renewDeadlineMs)]);
    for (;;) {
      if (await this.tryAcquireOrRenew(deadline)) return true;
      if (!(await this.pause(this.retryPeriodMs, deadline))) return false;
    }
  }

  /**
   * One attempt to take or keep the lease: upstream's tryAcquireOrRenew. Never throws; API
   * errors are logged and count as "not acquired".
   */
  async tryAcquireOrRenew(signal?: AbortSignal): Promise<boolean> {
    this.unanswered = false;
    const now = formatMicroTime(this.clock.wallMs());
    const desired: LeaseSpec = {
      holderIdentity: this.options.identity,
      leaseDurationSeconds: Math.floor(this.leaseDurationMs / 1000),
      acquireTime: now,
      renewTime: now,
      leaseTransitions: 0,
    };

    // Fast path: we lead and the lease is still ours by our own reckoning: renew without reading.
    if (this.isLeader() && this.leaseValid() && this.lease) {
      const spec = { ...desired, acquireTime: this.observed.acquireTime, leaseTransitions: this.observed.leaseTransitions ?? 0 };
      try {
        await this.write(spec, signal);
        return true;
      } catch (e) {
        this.log.debug(2, 'failed to update lease optimistically, falling back to slow path', { error: errorMessage(e) });
      }
    }

    let current: Lease;
    try {
      current = await this.leases.get(this.options.name, { namespace: this.options.namespace, signal });
    } catch (e) {
      if (!isNotFound(e)) {
        this.logFailure('error retrieving lease', e, signal);
        return false;
      }
      return this.create(desired, signal);
    }
    this.lease = current;
    const seen = current.spec ?? {};
    const seenJson = recordJson(seen);
    if (seenJson !== this.observedJson) this.observe(seen, seenJson);

    if (seen.holderIdentity && this.leaseValid() && !this.isLeader()) {
      this.log.debug(4, 'lease is held and has not yet expired', { holder: seen.holderIdentity });
      return false;
    }
    const spec = this.isLeader()
      ? { ...desired, acquireTime: seen.acquireTime, leaseTransitions: seen.leaseTransitions ?? 0 }
      : { ...desired, leaseTransitions: (seen.leaseTransitions ?? 0) + 1 };
    try {
      await this.write(spec, signal);
      return true;
    } catch (e) {
      this.logFailure('failed to update lease', e, signal);
      return false;
    }
  }

  /** Gives the lease up (holder cleared, 1s duration) so a standby takes over at its next try. */
  private async release(): Promise<boolean> {
    const signal = AbortSignal.timeout(this.renewDeadlineMs);
    for (;;) {
      let current: Lease;
      try {
        current = await this.leases.get(this.options.name, { namespace: this.options.namespace, signal });
      } catch (e) {
        this.log.error('error retrieving lease to release it', { error: errorMessage(e) });
        return false;
      }
      this.lease = current;
      // Unlike upstream, look at the holder on the server: a lease lost meanwhile is not ours to clear.
      const seen = current.spec ?? {};
      const seenJson = recordJson(seen);
      if (seenJson !== this.observedJson) this.observe(seen, seenJson);
      if (!this.isLeader()) return true;
      const now = formatMicroTime(this.clock.wallMs());
      const spec: LeaseSpec = {
        holderIdentity: '',
        leaseDurationSeconds: 1,
        acquireTime: now,
        renewTime: now,
        leaseTransitions: current.spec?.leaseTransitions ?? 0,
      };
      try {
        await this.write(spec, signal);
        this.log.info('released lease');
        return true;
      } catch (e) {
        if (isConflict(e)) continue;
        this.log.error('failed to release lease', { error: errorMessage(e) });
        return false;
      }
    }
  }

  private async create(spec: LeaseSpec, signal?: AbortSignal): Promise<boolean> {
    const sentAt = this.clock.monotonicMs();
    try {
      // A create, not an apply: two candidates creating at once must not both succeed.
      this.lease = await this.leases.create(
        {
          apiVersion: 'coordination.k8s.io/v1',
          kind: 'Lease',
          metadata: { name: this.options.name, namespace: this.options.namespace },
          spec,
        },
        { namespace: this.options.namespace, signal },
      );
    } catch (e) {
      this.logFailure('error initially creating lease', e, signal);
      return false;
    }
    this.observe(spec, recordJson(spec));
    this.renewedAt = sentAt;
    return true;
  }

  /** A PUT of the lease we last read with a new spec: conditional on its resourceVersion. */
  private async write(spec: LeaseSpec, signal?: AbortSignal): Promise<void> {
    const base = this.lease;
    if (!base) throw new Error('no lease read yet');
    const sentAt = this.clock.monotonicMs();
    this.lease = await this.leases.update({ ...base, spec }, { namespace: this.options.namespace, signal });
    this.observe(spec, recordJson(spec));
    if (spec.holderIdentity === this.options.identity) this.renewedAt = sentAt;
  }

  /**
   * Waits between attempts; false when the signal aborted instead. After an attempt without an
   * answer, through retryWait (cut short by the API server's return); otherwise plainly, so a
   * standby whose attempts are answered costs no probe.
   */
  private async pause(ms: number, signal: AbortSignal): Promise<boolean> {
    if (!this.options.retryWait || !this.unanswered) return pause(ms, signal);
    try {
      await this.options.retryWait.wait(ms, signal);
      return true;
    } catch {
      return false;
    }
  }

  private logFailure(msg: string, e: unknown, signal?: AbortSignal): void {
    this.unanswered = !signal?.aborted && isUnanswered(e);
    // A 409 is the normal outcome of losing a race (someone else wrote or created the lease since
    // we read it), and an abort is ours: neither is worth an error line.
    if (isConflict(e) || signal?.aborted) this.log.debug(2, msg, { error: errorMessage(e) });
    else this.log.error(msg, { error: errorMessage(e) });
  }

  private observe(spec: LeaseSpec, json: string): void {
    this.observed = spec;
    this.observedJson = json;
    this.observedAt = this.clock.monotonicMs();
  }

  private leaseValid(): boolean {
    return this.observedAt + (this.observed.leaseDurationSeconds ?? 0) * 1000 > this.clock.monotonicMs();
  }

  private maybeReportTransition(): void {
    const holder = this.leader();
    if (holder === this.reportedLeader) return;
    this.reportedLeader = holder;
    if (!holder) return;
    this.log.info('new leader elected', { holder });
    try {
      this.options.onNewLeader?.(holder);
    } catch (e) {
      this.log.error('onNewLeader failed', { error: errorMessage(e) });
    }
  }

  private recordEvent(what: string): void {
    this.options.events?.event(
      { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name: this.options.name, namespace: this.options.namespace, uid: this.lease?.metadata?.uid } },
      'Normal',
      'LeaderElection',
      `${this.options.identity} ${what}`,
    );
  }
}

/** The fields that make up upstream's LeaderElectionRecord, in a fixed order, to spot changes. */
function recordJson(spec: LeaseSpec): string {
  return JSON.stringify([spec.holderIdentity ?? '', spec.leaseDurationSeconds ?? 0, spec.acquireTime ?? '', spec.renewTime ?? '', spec.leaseTransitions ?? 0]);
}

/** Sleeps; false when the signal aborted instead. */
async function pause(ms: number, signal: AbortSignal): Promise<boolean> {
  try {
    await sleep(ms, signal);
    return true;
  } catch {
    return false;
  }
}

/** One gauge per registry, shared by every elector on it (one label value per lease name). */
const masterStatusGauge = perRegistry((registry): Gauge<'name'> => new Gauge({
  name: METRIC_NAME,
  help: 'Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. \'name\' is the string used to identify the lease.',
  labelNames: ['name'],
  registers: [registry],
}));
