import type { KubeConfig } from '@kubernetes/client-node';
import type { Registry } from 'prom-client';
import type { BgpService } from '../announce/bgp/announcer.ts';
import type { CloudProvider } from '../cloud/types.ts';
import { NODE_ROUTE_CONTROLLER } from '../names.ts';
import type { Controller } from '../controllers/types.ts';
import type { ApiServerReturn } from '../kube/api-server-return.ts';
import type { EventBroadcaster } from '../kube/events.ts';
import { RequestFence } from '../kube/request-fence.ts';
import type { KubeTransport, TransportOptions } from '../kube/transport.ts';
import type { Logger } from '../log.ts';
import type { HealthChecks } from '../server/health.ts';
import { CONTROLLERS, buildControllers, type ControllerSpec } from './controllers.ts';
import type { ControllerManagerMetrics } from './metrics.ts';
import { ServiceAccountCredentials } from './service-account-credentials.ts';
import type { Settings } from './settings.ts';

/**
 * One leadership term: what runs while this process may write (one per lease won, one for the
 * process without leader election). Every request the controllers and the provider make belongs
 * to the term's fence: when the term ends, those still in flight are aborted and accounted for
 * (before the lease is released). The term starts the provider, the controllers, the shared
 * informers and the leader's BGP announcer, and adds their health checks.
 */
export interface Term {
  fence: RequestFence;
  running?: Promise<void>;
  /** The health checks the term added, removed when it ends. */
  checks: string[];
}

/** A client of the process's --kube-api-qps/--kube-api-burst budget, one per component (see app.ts). */
export type ClientFor = (component: string, extra?: Partial<TransportOptions>) => KubeTransport;

/** What a term is started with: the process's parts, made once in app.ts. */
export interface TermDeps {
  settings: Settings;
  cloud: CloudProvider;
  logger: Logger;
  registry: Registry;
  checks: HealthChecks;
  events: EventBroadcaster;
  clientFor: ClientFor;
  transportOptions: TransportOptions;
  metrics: ControllerManagerMetrics;
  retryWait: ApiServerReturn;
  /** The leader's BGP announcer, when the provider has a bgp section. */
  bgp?: BgpService;
}

/** How long the aborted requests of an ending term may take to settle (an abort settles at once). */
export const TERM_SETTLE_MS = 5_000;

/** A new term whose fence starts stopping (refusing new writes gracefully) when `stop` aborts. */
export function beginTerm(stop: AbortSignal): Term {
  const fence = new RequestFence();
  const stopping = () => fence.stopping();
  if (stop.aborted) stopping();
  else stop.addEventListener('abort', stopping, { once: true });
  fence.signal.addEventListener('abort', () => stop.removeEventListener('abort', stopping), { once: true });
  return { fence, checks: [] };
}

/**
 * Runs the term until `signal` aborts: the provider's start, the controllers, the informers and
 * the BGP announcer. `ensureBlocked`: without leader election, why the service controller may not
 * ensure now (ReplicaGuard).
 */
export async function runTerm(deps: TermDeps, term: Term, signal: AbortSignal, ensureBlocked?: () => string | undefined): Promise<void> {
  const { settings, cloud, logger, registry, events } = deps;
  const leaderElection = settings.leaderElection;
  const termClient = (component: string) => deps.clientFor(component, { fence: term.fence });
  const addCheck: HealthChecks['add'] = (name, check, options) => {
    deps.checks.add(name, check, options);
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
    ? await serviceAccountTransports(settings.controllers.enabled, settings.kubeConfig, termClient('controller-credentials'), { ...deps.transportOptions, fence: term.fence }, logger, signal)
    : new Map<string, KubeTransport>();
  signal.throwIfAborted(); // the same, after the service-account tokens were requested
  const { informers, controllers } = buildControllers(settings.controllers, {
    transport: termClient('shared-informers'),
    transportFor: (component) => controllerTransports.get(component) ?? termClient(component),
    recorderFor: (component) => events.recorder(component, term.fence),
    logger,
    registry,
    cloud,
    isManagedNode: settings.isManagedNode,
    ensureBlocked,
    retryWait: deps.retryWait,
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
  // Each provider's own answers (several providers in one process): on /healthz only, since an
  // outage of one provider's API is no reason for the process to be restarted (/livez) nor to stop
  // serving the others (/readyz).
  for (const { name, check } of cloud.healthChecks?.() ?? []) addCheck(name, check, { endpoints: ['healthz'] });
  const informerRuns = [informers.nodes.run(signal), informers.services.run(signal), informers.endpoints.run(signal)];
  addCheck('informer-sync', () => {
    if (!informers.nodes.hasSynced() || !informers.services.hasSynced()) throw new Error('informers not synced yet');
  }, { endpoints: ['readyz'] });
  // The leader's BGP speaker: pod CIDR routes and load-balancer addresses (src/announce/bgp/announcer.ts).
  const bgpRun = deps.bgp && cloud.bgp
    ? deps.bgp.run({
        source: cloud.bgp,
        provider: cloud,
        nodes: informers.nodes,
        services: informers.services,
        endpoints: informers.endpoints,
        isManagedNode: settings.isManagedNode,
        waitForRoutes: controllers.some((c) => c.name === NODE_ROUTE_CONTROLLER),
        blocked: () => ensureBlocked?.() ?? term.fence.refusal(),
        takeoverMs: leaderElection.enabled ? leaderElection.leaseDurationMs + leaderElection.retryPeriodMs : undefined,
        logger,
        warn: (reason, message) => configEvents.event(lease, 'Warning', reason, message),
      }, signal)
    : undefined;
  await Promise.all([
    ...controllers.map((c) => runController(c, signal, deps.metrics, logger).finally(() => ended.add(c.name))),
    ...informerRuns,
    ...(bgpRun ? [bgpRun] : []),
  ]);
}

/**
 * Ends the term's requests once draining is over (done or out of grace): new ones are refused,
 * those in flight aborted. Whether the lease may be released: not when a write was cut off on its
 * way (the SIGTERM or this abort), since the API server may still commit it; a standby taking
 * over at once could write first and be overwritten, so the lease is left to expire, as after a
 * crash. Events are not the term's: they are flushed afterwards. `holdsLease`: whether there is
 * a lease to speak of (none without leader election, unless a ReplicaGuard holds one).
 */
export async function endTerm(term: RequestFence, logger: Logger, holdsLease: boolean): Promise<boolean> {
  const outcome = await term.close('the leadership term ended (shutting down)', TERM_SETTLE_MS);
  if (outcome.settled && outcome.cutOffWrites === 0) return true;
  if (!holdsLease) return false;
  logger.warn('not releasing the lease: writes of this term were cut off in flight and may still land; a standby takes over once the lease expires', {
    cutOffWrites: outcome.cutOffWrites,
    settled: outcome.settled,
  });
  return false;
}

/** Waits for in-flight work, but no longer than the shutdown grace period; false when it did not end in time. */
export async function drain(running: Promise<void> | undefined, graceMs: number, logger: Logger): Promise<boolean> {
  if (!running) return true;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timedOut = new Promise<'timeout'>((r) => (timer = setTimeout(() => r('timeout'), graceMs)));
  const outcome = await Promise.race([running.then(() => 'done' as const), timedOut]);
  clearTimeout(timer);
  if (outcome === 'timeout') logger.warn('in-flight work did not finish within the shutdown grace period', { gracePeriodMs: graceMs });
  return outcome === 'done';
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
  for (const { name: component, serviceAccount: account } of CONTROLLERS as readonly ControllerSpec[]) {
    if (!enabled.has(component) || !account) continue;
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
