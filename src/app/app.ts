import type { ProviderRegistry } from '../cloud/registry.ts';
import { EventBroadcaster } from '../kube/events.ts';
import { ApiServerReturn } from '../kube/api-server-return.ts';
import { BunKubeTransport, type TransportOptions } from '../kube/transport.ts';
import { logHttpVersionChange, logHttpVersionAtStart } from '../kube/http-version.ts';
import type { Options } from '../options/index.ts';
import { delegatingAuth } from '../server/auth/delegating.ts';
import { HealthChecks } from '../server/health.ts';
import { createServer } from '../server/server.ts';
import { ServingTlsError } from '../server/tls/serving.ts';
import { version, versionLine } from '../version.ts';
import { SystemdNotifier } from '../systemd/notify.ts';
import { BgpService } from '../announce/bgp/announcer.ts';
import { installDebugHandlers } from './debug-handlers.ts';
import { delegatedAuthClients } from './delegated-auth-clients.ts';
import { loggerFromOptions, logStartupWarnings } from './logging.ts';
import { ControllerManagerMetrics, createRegistry, restClientObserver } from './metrics.ts';
import { ConfigurationError, loadSettings } from './settings.ts';
import { runElected, runUnelected, type LeadershipDeps } from './leadership.ts';
import { ProcessStop } from './process-stop.ts';
import type { TermDeps } from './term.ts';
import { reloadOnHangup } from './reload-signal.ts';

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
  const { kubeConfig, leaderElection } = settings;
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
  const processStop = new ProcessStop(logger, systemd);
  stop.addEventListener('abort', () => processStop.onSignal(String(stop.reason ?? 'stop')), { once: true });

  // The terms run (term.ts) while leadership (leadership.ts) allows, until the stop: their
  // requests settled, the lease released unless a write of theirs may still land.
  const terms: TermDeps = { settings, cloud, logger, registry, checks, events, clientFor, transportOptions, metrics: new ControllerManagerMetrics(registry), retryWait: serverReturn, bgp };
  const leadership: LeadershipDeps = {
    settings,
    cloud,
    logger,
    registry,
    events,
    checks,
    systemd,
    retryWait: serverReturn,
    // As upstream's leader-election client (Timeout = renew deadline): a standby's acquire attempt
    // never hangs on a stalled connection past one renew deadline.
    leaseClient: () => clientFor('leader-election', { requestTimeoutMs: leaderElection.renewDeadlineMs }),
    stop: processStop,
    terms,
    exitNow: (code) => process.exit(code),
  };
  await (leaderElection.enabled ? runElected(leadership) : runUnelected(leadership));

  // The shutdown, in order, after the term: events flushed, the server stopped, the provider closed.
  await events.close(2_000);
  await server.stop();
  await cloud.close?.();
  stopReloadOnHangup();
  logger.info('stopped');
  return processStop.exitCode;
}
