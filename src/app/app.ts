import type { KubeConfig } from '@kubernetes/client-node';
import type { CloudProvider } from '../cloud/types.ts';
import type { ProviderRegistry } from '../cloud/registry.ts';
import { NODE_ROUTE_CONTROLLER } from '../controllers/route/controller.ts';
import { SERVICE_LB_CONTROLLER } from '../controllers/service/index.ts';
import type { Controller } from '../controllers/types.ts';
import type { EventRecorder } from '../kube/event-recorder.ts';
import { EventBroadcaster } from '../kube/events.ts';
import { LeaderElector, makeIdentity } from '../kube/leader-election.ts';
import { ApiServerReturn } from '../kube/api-server-return.ts';
import { ReplicaGuard } from './replica-guard.ts';
import { RequestFence } from '../kube/request-fence.ts';
import { BunKubeTransport, type KubeTransport, type TransportOptions } from '../kube/transport.ts';
import { logHttpVersionChange, logHttpVersionAtStart } from '../kube/http-version.ts';
import type { Logger } from '../log.ts';
import type { Options } from '../options/index.ts';
import { delegatingAuth } from '../server/delegating-auth.ts';
import { HealthChecks } from '../server/health.ts';
import { createServer } from '../server/server.ts';
import { ServingTlsError } from '../server/tls.ts';
import { version, versionLine } from '../version.ts';
import { SystemdNotifier } from '../systemd/notify.ts';
import { BgpService } from '../announce/bgp/announcer.ts';
import { CONTROLLERS, buildControllers } from './controllers.ts';
import { installDebugHandlers } from './debug-handlers.ts';
import { delegatedAuthClients } from './delegated-auth-clients.ts';
import { loggerFromOptions, logStartupWarnings } from './logging.ts';
import { ControllerManagerMetrics, createRegistry, restClientObserver } from './metrics.ts';
import { ConfigurationError, loadSettings, type LeaderElectionSettings, type Settings } from './settings.ts';
import { ServiceAccountCredentials } from './service-account-credentials.ts';
import { reloadOnHangup } from './reload-signal.ts';
import { aborted } from '../util/abort.ts';
import { errorMessage } from '../util/errors.ts';

/**
 * The controller manager process: provider, client, server, leader election, controllers and
 * an orderly shutdown, from the settings (settings.ts turns the flags into them, once). Resolves
 * with the process exit code.
 */
export async function runControllerManager(options: Options, providers: ProviderRegistry, stop: AbortSignal): Promise<number> {
  const logger = loggerFromOptions(options);
  logger.info('starting', { version: versionLine() });
  logStartupWarnings(logger, options);

  const { settings, cloud } = await loadSettings(options, providers, logger);
  const stopReloadOnHangup = reloadOnHangup(cloud, logger);
  const { kubeConfig, isManagedNode, leaderElection } = settings;
  const registry = createRegistry();
  const transportOptions: TransportOptions = {
    ...settings.clientBudget,
    userAgent: `edge-ccm/${version}`,
    observe: restClientObserver(registry),
    onHttpVersionChange: logHttpVersionChange(logger),
  };
  logHttpVersionAtStart(logger);
  // One client, with its own --kube-api-qps/--kube-api-burst budget, per component, as upstream
  // gives each controller, the leader elector and the shared informers a clientset of their own
  // (ClientBuilder.ClientOrDie(name)). Measured: with one shared budget, 30 node workers queueing
  // writes at --kube-api-qps=5 made the lease renewal wait past its deadline and the leader exit
  // (test/integration/client-budgets.test.ts).
  const clientFor = (component: string, extra: Partial<TransportOptions> = {}) =>
    new BunKubeTransport(kubeConfig, { ...transportOptions, ...extra, userAgent: `${transportOptions.userAgent}/${component}` });

  const checks = new HealthChecks();
  checks.add('ping', () => {});
  const auth = delegatingAuth(delegatedAuthClients(settings.delegatedAuth, kubeConfig, transportOptions), settings.reviewCache);
  const server = createServer({
    ...settings.server,
    authenticator: auth.authenticator,
    authorizer: auth.authorizer,
    registry,
    checks,
    logger: logger.with({ component: 'server' }),
  });
  // BGP (a provider with a bgp section): metrics, the readyz check and GET /debug/bgp for every term's speaker.
  const bgp = cloud.bgp ? new BgpService(registry, checks, server.app) : undefined;
  installDebugHandlers(server.app, options, logger);
  const served = await server.start().catch((e) => {
    throw e instanceof ServingTlsError ? new ConfigurationError(e.message) : e;
  });
  if (served.port) logger.info('serving health and metrics', { url: `https://${settings.server.bindAddress}:${served.port}` });
  // Under a systemd unit with Type=notify: started once serving (a standby is a healthy start).
  const systemd = SystemdNotifier.fromEnv(logger);
  systemd.ready(leaderElection.enabled ? 'standby: waiting for the leader lease' : 'running the controllers (no leader election)');

  // Events get a client-side budget of their own (the same --kube-api-qps/--kube-api-burst) rather
  // than sharing the controllers' as client-go's do: measured with 1000 nodes at the defaults, each
  // initialisation's Synced event took a third of the shared budget and held node writes back
  // (3 requests per node instead of 2). Events stay bounded by the spam filter and aggregation.
  const events = new EventBroadcaster({ transport: clientFor('event-broadcaster'), logger, registry });
  const managerMetrics = new ControllerManagerMetrics(registry);
  const controllersStop = new AbortController();
  const electionStop = new AbortController();
  // The retry loops (the lease's, the shared informers') wake as soon as the API server answers
  // again after an outage, instead of sleeping out a backoff that grew while it was down.
  const probeClient = clientFor('api-server-return', { requestTimeoutMs: 2_000 });
  const serverReturn = new ApiServerReturn({
    probe: async (signal) => {
      const res = await probeClient.sendRaw({ method: 'GET', path: '/readyz', signal });
      await res.arrayBuffer();
      // 5xx: up but not ready yet; any other answer (a 403 too) means it serves requests again.
      return res.status < 500;
    },
    logger: logger.with({ component: 'api-server-return' }),
  });
  let shuttingDown = false;
  // The leadership term in force: one per lease won (one for the process without leader election).
  let current: Term | undefined;
  // Whether the lease may be released at the stop: see endTerm.
  let releaseLease = true;
  // Without leader election, why the service controller may not ensure now: see ReplicaGuard.
  let ensureBlocked: (() => string | undefined) | undefined;

  // Every request the controllers and the provider make belongs to a term: when it ends, the
  // requests still in flight are aborted and accounted for (before the lease is released).
  const beginTerm = (): Term => {
    const fence = new RequestFence();
    const stopping = () => fence.stopping();
    if (controllersStop.signal.aborted) stopping();
    else controllersStop.signal.addEventListener('abort', stopping, { once: true });
    fence.signal.addEventListener('abort', () => controllersStop.signal.removeEventListener('abort', stopping), { once: true });
    return { fence, checks: [] };
  };

  const startControllers = async (signal: AbortSignal, term: Term): Promise<void> => {
    const termClient = (component: string) => clientFor(component, { fence: term.fence });
    const addCheck: HealthChecks['add'] = (name, check, options) => {
      checks.add(name, check, options);
      term.checks.push(name);
    };
    await cloud.initialize?.({
      transport: termClient('cloud-provider'),
      logger: logger.with({ provider: cloud.providerName }),
      signal,
      registry,
      recorder: events.recorder(`${cloud.providerName}-cloud-provider`, term.fence),
    });
    // A rejected config edit is logged and counted by the provider; an event makes it visible
    // with kubectl. It is recorded on our Lease, the one object this process is known by.
    // The term's events pass its fence, as its writes do: none is sent once the term has ended.
    const configEvents = events.recorder('cloud-controller-manager', term.fence);
    const lease = { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { namespace: leaderElection.namespace, name: leaderElection.name } };
    const unsubscribeConfig = cloud.onConfigRejected?.((problems) =>
      configEvents.event(lease, 'Warning', 'CloudConfigRejected', `cloud config edit rejected, the last good configuration stays in force:\n${problems}`));
    // Warnings about the configuration in force (e.g. InsecureSecretFile), told at once and after each reload.
    const unsubscribeWarnings = cloud.onConfigWarning?.((reason, problems) =>
      configEvents.event(lease, 'Warning', reason, `cloud config in force, with a warning:\n${problems}`));
    signal.addEventListener('abort', () => {
      unsubscribeConfig?.();
      unsubscribeWarnings?.();
    }, { once: true });
    // A stop or a lost lease while the provider was starting (a provider may finish its start
    // anyway): nothing of this term may start now. An abort listener added to a signal already
    // aborted never fires, so controllers and informers started now would never end.
    signal.throwIfAborted();
    const controllerTransports = settings.useServiceAccountCredentials
      ? await serviceAccountTransports(settings.controllers.enabled, kubeConfig, termClient('controller-credentials'), { ...transportOptions, fence: term.fence }, logger, signal)
      : new Map<string, KubeTransport>();
    signal.throwIfAborted(); // the same, after the service-account tokens were requested
    const { informers, controllers } = buildControllers(settings.controllers, {
      transport: termClient('shared-informers'),
      transportFor: (component) => controllerTransports.get(component) ?? termClient(component),
      recorderFor: (component) => events.recorder(component, term.fence),
      logger,
      registry,
      cloud,
      isManagedNode,
      ensureBlocked,
      retryWait: serverReturn,
    });
    // One check per running controller (as upstream's controller health adaptors): unhealthy once
    // its loop has ended while we still lead, or when the controller reports a problem itself.
    const ended = new Set<string>();
    for (const c of controllers) {
      addCheck(c.name, () => {
        if (ended.has(c.name) && !signal.aborted) throw new Error(`${c.name} is not running`);
        c.healthCheck?.();
      }, { endpoints: ['healthz', 'readyz'] });
    }
    const informerRuns = [informers.nodes.run(signal), informers.services.run(signal), informers.endpoints.run(signal)];
    addCheck('informer-sync', () => {
      if (!informers.nodes.hasSynced() || !informers.services.hasSynced()) throw new Error('informers not synced yet');
    }, { endpoints: ['readyz'] });
    // The leader's BGP speaker: pod CIDR routes and load-balancer addresses (src/announce/bgp/announcer.ts).
    const bgpRun = bgp && cloud.bgp
      ? bgp.run({
          source: cloud.bgp,
          provider: cloud,
          nodes: informers.nodes,
          services: informers.services,
          endpoints: informers.endpoints,
          isManagedNode,
          waitForRoutes: controllers.some((c) => c.name === NODE_ROUTE_CONTROLLER),
          blocked: () => ensureBlocked?.() ?? term.fence.refusal(),
          takeoverMs: leaderElection.enabled ? leaderElection.leaseDurationMs + leaderElection.retryPeriodMs : undefined,
          logger,
          warn: (reason, message) => configEvents.event(lease, 'Warning', reason, message),
        }, signal)
      : undefined;
    await Promise.all([
      ...controllers.map((c) => runController(c, signal, managerMetrics, logger).finally(() => ended.add(c.name))),
      ...informerRuns,
      ...(bgpRun ? [bgpRun] : []),
    ]);
  };

  const onSignal = (name: string) => {
    if (shuttingDown) return;
    shuttingDown = true;
    logger.info('shutting down', { signal: name });
    systemd.stopping(`shutting down (${name}): finishing in-flight syncs, releasing the lease`);
    controllersStop.abort(new Error(`received ${name}`));
  };
  stop.addEventListener('abort', () => onSignal(String(stop.reason ?? 'stop')), { once: true });

  let exitCode = 0;
  // As upstream's leader-election client (Timeout = renew deadline): a standby's acquire attempt
  // never hangs on a stalled connection past one renew deadline.
  const leaseClient = () => clientFor('leader-election', { requestTimeoutMs: leaderElection.renewDeadlineMs });
  if (leaderElection.enabled) {
    const leaseTransport = leaseClient();
    const newElector = (identity: string): LeaderElector => {
      const elector: LeaderElector = new LeaderElector({
        ...leaseTerms(leaderElection),
        identity,
        transport: leaseTransport,
        logger: logger.with({ component: 'leader-election' }),
        registry,
        events: events.recorder('cloud-controller-manager'),
        retryWait: serverReturn,
        // Unless a write of this term may still land (see endTerm): then the lease expires instead.
        releaseOnCancel: () => releaseLease,
        onStartedLeading: (leading) => {
          const term = beginTerm();
          current = term;
          // Beyond upstream: a leader paused past its lease writes nothing until it has renewed it.
          term.fence.guardWrites(() => (elector.holdsLeaseNow() ? undefined : 'the leader lease was not renewed within the renew deadline'));
          // The lease lost: every request of the term is aborted at once, with no grace (a
          // standby may take over); a no-op after a stop, which closed the term already.
          leading.addEventListener('abort', () => void term.fence.close('the leader lease was lost', TERM_SETTLE_MS), { once: true });
          systemd.status('leading: running the controllers');
          const both = AbortSignal.any([leading, controllersStop.signal]);
          term.running = startControllers(both, term).catch((e) => {
            // Stopped while starting (SIGTERM during the provider's start, or the lease lost):
            // the stop itself decides the exit code.
            if (both.aborted) return;
            logger.error('controllers failed', { error: errorMessage(e) });
            exitCode = 1;
            // An orderly stop (lease released, events flushed, provider closed).
            shuttingDown = true;
            controllersStop.abort(e);
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
    controllersStop.signal.addEventListener('abort', async () => {
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
        process.exit(1);
      }
      const ended = await endLostTerm();
      if (!ended.stopped && !shuttingDown) {
        // Its work would overlap the next term's: leave that to a fresh process.
        logger.error('the lost term did not end within the shutdown grace period: exiting', { gracePeriodMs: settings.shutdownGracePeriodMs });
        exitCode = 1;
        shuttingDown = true;
        controllersStop.abort(new Error('the lost term did not end'));
      }
      if (shuttingDown) {
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
  } else {
    const guard = replicaGuard(settings, cloud, leaseClient(), {
      logger: logger.with({ component: 'replica-guard' }),
      events: events.recorder('cloud-controller-manager'),
      releaseOnStop: () => releaseLease,
      stop: controllersStop.signal,
    });
    const guardStop = new AbortController();
    const guarding = guard?.run(guardStop.signal);
    ensureBlocked = guard && (() => guard.blockedReason());
    const term = beginTerm();
    current = term;
    term.running = startControllers(controllersStop.signal, term).catch((e) => {
      if (controllersStop.signal.aborted) return; // stopped while starting: not a failure
      logger.error('controllers failed', { error: errorMessage(e) });
      exitCode = 1;
    });
    await aborted(controllersStop.signal);
    await drain(term.running, settings.shutdownGracePeriodMs, logger);
    releaseLease = await endTerm(term.fence, logger, !!guard);
    guardStop.abort(new Error('shutdown'));
    await guarding;
  }

  await events.close(2_000);
  await server.stop();
  await cloud.close?.();
  stopReloadOnHangup();
  logger.info('stopped');
  return exitCode;
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

/** Each controller's own service-account transport, resolved before the controllers start. */
async function serviceAccountTransports(
  enabled: ReadonlySet<string>,
  kubeConfig: KubeConfig,
  root: KubeTransport,
  transportOptions: TransportOptions,
  logger: Logger,
  signal: AbortSignal,
): Promise<Map<string, KubeTransport>> {
  const credentials = new ServiceAccountCredentials(kubeConfig, root, transportOptions, logger, signal);
  const out = new Map<string, KubeTransport>();
  for (const { name: component, serviceAccount: account } of CONTROLLERS) {
    if (!enabled.has(component)) continue;
    out.set(component, await credentials.transportFor(account));
    logger.info('controller uses its own service account', { controller: component, serviceAccount: `kube-system/${account}` });
  }
  return out;
}

async function runController(c: Controller, signal: AbortSignal, metrics: ControllerManagerMetrics, logger: Logger): Promise<void> {
  metrics.started(c.name);
  logger.info('started controller', { controller: c.name });
  try {
    await c.run(signal);
  } finally {
    metrics.stopped(c.name);
  }
}

/** How long the aborted requests of an ending term may take to settle (an abort settles at once). */
const TERM_SETTLE_MS = 5_000;

/**
 * Ends the term's requests once draining is over (done or out of grace): new ones are refused,
 * those in flight aborted. Whether the lease may be released: not when a write was cut off on its
 * way (the SIGTERM or this abort), since the API server may still commit it; a standby taking
 * over at once could write first and be overwritten, so the lease is left to expire, as after a
 * crash. Events are not the term's: they are flushed afterwards. `holdsLease`: whether there is
 * a lease to speak of (none without leader election, unless a ReplicaGuard holds one).
 */
async function endTerm(term: RequestFence, logger: Logger, holdsLease: boolean): Promise<boolean> {
  const outcome = await term.close('the leadership term ended (shutting down)', TERM_SETTLE_MS);
  if (outcome.settled && outcome.cutOffWrites === 0) return true;
  if (!holdsLease) return false;
  logger.warn('not releasing the lease: writes of this term were cut off in flight and may still land; a standby takes over once the lease expires', {
    cutOffWrites: outcome.cutOffWrites,
    settled: outcome.settled,
  });
  return false;
}

/** One leadership term: its requests, its controllers' run and the health checks it added. */
interface Term {
  fence: RequestFence;
  running?: Promise<void>;
  checks: string[];
}

/** Waits for in-flight work, but no longer than the shutdown grace period; false when it did not end in time. */
async function drain(running: Promise<void> | undefined, graceMs: number, logger: Logger): Promise<boolean> {
  if (!running) return true;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timedOut = new Promise<'timeout'>((r) => (timer = setTimeout(() => r('timeout'), graceMs)));
  const outcome = await Promise.race([running.then(() => 'done' as const), timedOut]);
  clearTimeout(timer);
  if (outcome === 'timeout') logger.warn('in-flight work did not finish within the shutdown grace period', { gracePeriodMs: graceMs });
  return outcome === 'done';
}

/** The Lease and its timings, as the elector and the replica guard take them, with a fresh identity. */
function leaseTerms(l: LeaderElectionSettings) {
  return { namespace: l.namespace, name: l.name, identity: makeIdentity(), leaseDurationMs: l.leaseDurationMs, renewDeadlineMs: l.renewDeadlineMs, retryPeriodMs: l.retryPeriodMs };
}
