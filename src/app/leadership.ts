import type { CloudProvider } from '../cloud/types.ts';
import { SERVICE_LB_CONTROLLER } from '../names.ts';
import type { ApiServerReturn } from '../kube/api-server-return.ts';
import type { EventRecorder } from '../kube/event-recorder.ts';
import type { EventBroadcaster } from '../kube/events.ts';
import { LeaderElector, makeIdentity } from '../kube/leader-election.ts';
import type { KubeTransport } from '../kube/transport.ts';
import type { Logger } from '../log.ts';
import type { Registry } from 'prom-client';
import type { HealthChecks } from '../server/health.ts';
import type { SystemdNotifier } from '../systemd/notify.ts';
import { aborted } from '../util/abort.ts';
import { errorMessage } from '../util/errors.ts';
import type { ProcessStop } from './process-stop.ts';
import { ReplicaGuard } from './replica-guard.ts';
import type { LeaderElectionSettings, Settings } from './settings.ts';
import { TERM_SETTLE_MS, beginTerm, drain, endTerm, runTerm, type Term, type TermDeps } from './term.ts';

/**
 * When this process may run a term (term.ts): with leader election, each time it wins the lease
 * (runElected: the elected loop, the lease's loss, campaigning again); without, at once, the
 * Lease held by a ReplicaGuard when the provider's load balancer decides from memory
 * (runUnelected). Both return once the term in force has ended after `stop`, with the lease
 * released unless a write of the term may still land.
 */
export interface LeadershipDeps {
  settings: Settings;
  cloud: CloudProvider;
  logger: Logger;
  registry: Registry;
  events: EventBroadcaster;
  checks: HealthChecks;
  systemd: SystemdNotifier;
  retryWait: ApiServerReturn;
  /** The lease's client (as upstream's: requests time out after one renew deadline). */
  leaseClient: () => KubeTransport;
  stop: ProcessStop;
  terms: TermDeps;
  /** --exit-on-lease-loss, as upstream: ends the process at once, no shutdown; its supervisor restarts it. */
  exitNow: (code: number) => never;
}

export async function runElected(deps: LeadershipDeps): Promise<void> {
  const { settings, logger, checks, systemd, stop } = deps;
  const leaderElection = settings.leaderElection;
  const electionStop = new AbortController();
  const leaseTransport = deps.leaseClient();
  // The term in force: one per lease won.
  let current: Term | undefined;
  // Whether the lease may be released at the stop: see endTerm.
  let releaseLease = true;

  const newElector = (identity: string): LeaderElector => {
    const elector: LeaderElector = new LeaderElector({
      ...leaseTerms(leaderElection),
      identity,
      transport: leaseTransport,
      logger: logger.with({ component: 'leader-election' }),
      registry: deps.registry,
      events: deps.events.recorder('cloud-controller-manager'),
      retryWait: deps.retryWait,
      // Unless a write of this term may still land (see endTerm): then the lease expires instead.
      releaseOnCancel: () => releaseLease,
      onStartedLeading: (leading) => {
        const term = beginTerm(stop.signal);
        current = term;
        // Beyond upstream: a leader paused past its lease writes nothing until it has renewed it.
        term.fence.guardWrites(() => (elector.holdsLeaseNow() ? undefined : 'the leader lease was not renewed within the renew deadline'));
        // The lease lost: every request of the term is aborted at once, with no grace (a
        // standby may take over); a no-op after a stop, which closed the term already.
        leading.addEventListener('abort', () => void term.fence.close('the leader lease was lost', TERM_SETTLE_MS), { once: true });
        systemd.status('leading: running the controllers');
        const both = AbortSignal.any([leading, stop.signal]);
        term.running = runTerm(deps.terms, term, both).catch((e) => {
          // Stopped while starting (SIGTERM during the provider's start, or the lease lost):
          // the stop itself decides the exit code.
          if (both.aborted) return;
          logger.error('controllers failed', { error: errorMessage(e) });
          stop.fail(e);
        });
      },
      onStoppedLeading: () => {},
    });
    return elector;
  };
  let elector = newElector(makeIdentity());
  checks.add('leaderElection', () => {
    const err = elector.check();
    if (err) throw err;
  }, { endpoints: ['healthz', 'livez'] });
  // The election ends (and releases the lease) only after the controllers stopped, so a
  // standby never runs while our in-flight syncs are still writing.
  stop.signal.addEventListener('abort', async () => {
    await drain(current?.running, settings.shutdownGracePeriodMs, logger);
    releaseLease = current ? await endTerm(current.fence, logger, true) : true;
    electionStop.abort(new Error('shutdown'));
  }, { once: true });

  /**
   * Beyond upstream, after the lease was lost: the term's requests were aborted when it was
   * (see onStartedLeading); waits for its controllers, the provider's start and the BGP
   * speaker to end (the provider forgets its address memory then) and drops its checks.
   */
  const endLostTerm = async (): Promise<{ stopped: boolean; cutOffWrites: number }> => {
    const term = current;
    logger.warn('leader lease lost: ending this term', { identity: elector.identity });
    systemd.status('standby: the leader lease was lost, ending the term');
    if (!term) return { stopped: true, cutOffWrites: 0 };
    const outcome = await term.fence.close('the leader lease was lost', TERM_SETTLE_MS);
    const stopped = await drain(term.running, settings.shutdownGracePeriodMs, logger);
    for (const name of term.checks) checks.remove(name);
    if (current === term) current = undefined;
    return { stopped, cutOffWrites: outcome.cutOffWrites };
  };

  for (;;) {
    const outcome = await elector.run(electionStop.signal);
    if (outcome === 'aborted') break;
    if (leaderElection.exitOnLeaseLoss) {
      // As upstream: a replica that lost its lease exits at once; its supervisor restarts it.
      logger.error('leader election lost', { identity: elector.identity });
      deps.exitNow(1);
    }
    const ended = await endLostTerm();
    if (!ended.stopped && !stop.requested) {
      // Its work would overlap the next term's: leave that to a fresh process.
      logger.error('the lost term did not end within the shutdown grace period: exiting', { gracePeriodMs: settings.shutdownGracePeriodMs });
      stop.fail(new Error('the lost term did not end'));
    }
    if (stop.requested) {
      await aborted(electionStop.signal);
      break;
    }
    if (ended.cutOffWrites > 0) {
      // Such a write may still land: the lease must expire, as after a crash, before any term
      // writes again (ours included), so the next campaign is under a new identity.
      logger.warn('writes of the lost term were cut off in flight and may still land: campaigning under a new identity once the lease expires', { cutOffWrites: ended.cutOffWrites });
      elector = newElector(makeIdentity());
    }
    logger.info('campaigning again', { identity: elector.identity });
    systemd.status('standby: waiting for the leader lease');
  }
}

export async function runUnelected(deps: LeadershipDeps): Promise<void> {
  const { settings, logger, stop } = deps;
  // Whether the guard's Lease may be released at the stop: see endTerm.
  let releaseLease = true;
  const guard = replicaGuard(settings, deps.cloud, deps.leaseClient(), {
    logger: logger.with({ component: 'replica-guard' }),
    events: deps.events.recorder('cloud-controller-manager'),
    releaseOnStop: () => releaseLease,
    stop: stop.signal,
  });
  const guardStop = new AbortController();
  const guarding = guard?.run(guardStop.signal);
  const term = beginTerm(stop.signal);
  term.running = runTerm(deps.terms, term, stop.signal, guard && (() => guard.blockedReason())).catch((e) => {
    if (stop.signal.aborted) return; // stopped while starting: not a failure
    logger.error('controllers failed', { error: errorMessage(e) });
    // The exit code only: without leader election the process runs on until stopped.
    stop.exitCode = 1;
  });
  await aborted(stop.signal);
  await drain(term.running, settings.shutdownGracePeriodMs, logger);
  releaseLease = await endTerm(term.fence, logger, !!guard);
  guardStop.abort(new Error('shutdown'));
  await guarding;
}

/**
 * With --leader-elect=false, a guard on the leader Lease when the service controller runs and the
 * provider's load balancer decides from memory (LoadBalancer.exclusive); none otherwise, so other
 * providers keep upstream's behaviour (no Lease at all).
 */
function replicaGuard(
  settings: Settings,
  cloud: CloudProvider,
  transport: KubeTransport,
  deps: { logger: Logger; events: EventRecorder; releaseOnStop: () => boolean; stop: AbortSignal },
): ReplicaGuard | undefined {
  const exclusive = cloud.loadBalancer?.exclusive;
  if (!exclusive || !settings.controllers.enabled.has(SERVICE_LB_CONTROLLER)) return undefined;
  return new ReplicaGuard({
    ...leaseTerms(settings.leaderElection),
    transport,
    logger: deps.logger,
    events: deps.events,
    releaseOnStop: deps.releaseOnStop,
    // Another edge-ccm may have handed out addresses while this one held no Lease.
    onAcquired: (held) => {
      const signal = AbortSignal.any([held, deps.stop]);
      exclusive.refresh(signal).catch((e: unknown) => {
        if (!signal.aborted) deps.logger.error('cannot refresh the load balancer after taking the Lease', { error: errorMessage(e) });
      });
    },
  });
}

/** The Lease and its timings, as the elector and the replica guard take them, with a fresh identity. */
function leaseTerms(l: LeaderElectionSettings) {
  return { namespace: l.namespace, name: l.name, identity: makeIdentity(), leaseDurationMs: l.leaseDurationMs, renewDeadlineMs: l.renewDeadlineMs, retryPeriodMs: l.retryPeriodMs };
}
