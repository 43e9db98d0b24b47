import type { KubeConfig, V1Node } from '@kubernetes/client-node';
import { readCloudConfigFile } from '../cloud/config-file.ts';
import { CompositeProvider, type CompositeMember } from '../cloud/composite-provider.ts';
import { parseCloudConfigs, parseProviderNames } from '../cloud/provider-list.ts';
import type { ProviderRegistry } from '../cloud/registry.ts';
import type { CloudProvider } from '../cloud/types.ts';
import { resolveLifecycleOptions } from '../controllers/nodelifecycle/index.ts';
import { resolveNodeIPAMOptions, type NodeIPAMOptions } from '../controllers/nodeipam/index.ts';
import { NODE_IPAM_CONTROLLER, NODE_ROUTE_CONTROLLER } from '../names.ts';
import type { Logger } from '../log.ts';
import { parsePrefix, type Prefix } from '../net/ip.ts';
import { gateEnabled } from '../options/feature-gates.ts';
import { parseClusterCIDRs, type Options } from '../options/index.ts';
import type { DelegatingAuthOptions } from '../server/auth/delegating.ts';
import type { ServerOptions } from '../server/server.ts';
import { errorMessage } from '../util/errors.ts';
import { nodeStatusWorkers } from './configz.ts';
import { runnableControllers, type ControllerSettings } from './controllers.ts';
import { loadKubeConfig, missingKubeconfigFiles } from './kubeconfig.ts';
import { nodeOwnershipPredicate } from './node-ownership.ts';
import { clientCertificatesFromFlags, reviewCacheTtls, servingTlsFromFlags } from './serving-flags.ts';

/**
 * The flags turned into what the process runs with, once: typed values (no empty-string
 * sentinels past this file), files named by flags read and checked, and every problem found
 * reported at once. The app (app.ts) reads only these settings, never the flags.
 */

/** A problem with the command line or its files: the process exits 2, as upstream. */
export class ConfigurationError extends Error {}

export interface LeaderElectionSettings {
  /** --leader-elect; without it the Lease is still named (replica guard, event subject). */
  enabled: boolean;
  namespace: string;
  name: string;
  leaseDurationMs: number;
  renewDeadlineMs: number;
  retryPeriodMs: number;
  /** --exit-on-lease-loss: upstream's exit instead of ending the term and campaigning again. */
  exitOnLeaseLoss: boolean;
}

export interface Settings {
  log: { format: Options['loggingFormat']; verbosity: number };
  /** Our client configuration (--kubeconfig, --master, or in-cluster), loaded. */
  kubeConfig: KubeConfig;
  /** --kube-api-qps / --kube-api-burst: each component's own client budget. */
  clientBudget: { qps: number; burst: number };
  /** --authentication-kubeconfig / --authorization-kubeconfig, loaded; absent: ours. */
  delegatedAuth: { authentication?: KubeConfig; authorization?: KubeConfig };
  /** How long TokenReviews and SubjectAccessReviews are cached. */
  reviewCache: Pick<DelegatingAuthOptions, 'tokenSuccessTtlMs' | 'allowTtlMs' | 'denyTtlMs'>;
  server: Pick<ServerOptions, 'bindAddress' | 'securePort' | 'tlsCertFile' | 'tlsKeyFile' | 'alwaysAllowPaths' | 'certDir' | 'sniCertKeys' | 'cipherSuites' | 'minVersion' | 'permitPortSharing' | 'clientCertificates'>;
  leaderElection: LeaderElectionSettings;
  shutdownGracePeriodMs: number;
  useServiceAccountCredentials: boolean;
  /** --managed-node-provider-id-prefixes and --managed-node-selector: which nodes are ours. */
  isManagedNode: (node: V1Node) => boolean;
  controllers: ControllerSettings;
}

/**
 * The settings and the provider --cloud-provider and --cloud-config name: every problem with the
 * flags, their files and the provider's config in one ConfigurationError.
 */
export async function loadSettings(options: Options, providers: ProviderRegistry, logger: Logger): Promise<{ settings: Settings; cloud: CloudProvider }> {
  const problems: string[] = [];
  const settings = collect(problems, () => resolveSettings(options));
  const cloud = await collectAsync(problems, () => createProvider(options, providers, logger));
  if (cloud) collect(problems, () => requireClusterCIDRs(options, cloud));
  if (!settings || !cloud || problems.length > 0) {
    await cloud?.close?.();
    throw new ConfigurationError(problems.join('\n'));
  }
  // Several providers: a node of a platform none of them serves is never ours, whatever the ownership flags say.
  const servesNode = cloud.servesNode?.bind(cloud);
  const byFlags = settings.isManagedNode;
  if (servesNode) settings.isManagedNode = (node) => servesNode(node) && byFlags(node);
  return { settings, cloud };
}

/** The flags' settings, without the provider; every problem thrown at once. */
export function resolveSettings(options: Options): Settings {
  const problems: string[] = [];
  const isManagedNode = collect(problems, () => nodeOwnershipPredicate({
    providerIDPrefixes: options.managedNodeProviderIDPrefixes,
    labelSelector: given(options.managedNodeSelector),
  }), '--managed-node-selector: ');
  const kubeConfig = collect(problems, () => kubeConfigFromFlags(options));
  // Loaded here, once (a missing one is already reported by kubeConfigFromFlags).
  const delegatedConfig = (flag: string, path: string) =>
    path && !missingKubeconfigFiles({ [flag]: path }).length ? collect(problems, () => loadKubeConfig({ kubeconfig: path, flag })) : undefined;
  const delegatedAuth = {
    authentication: delegatedConfig('--authentication-kubeconfig', options.authenticationKubeconfig),
    authorization: delegatedConfig('--authorization-kubeconfig', options.authorizationKubeconfig),
  };
  const lifecycle = collect(problems, () => resolveLifecycleOptions({
    monitorPeriodMs: options.nodeMonitorPeriodMs,
    deletionPolicy: options.nodeDeletionPolicy,
    gracePeriodMs: options.nodeDeletionGracePeriodMs,
    notFoundThreshold: options.nodeDeletionNotFoundThreshold,
    breaker: {
      maxShare: options.nodeDeletionBreakerMaxShare,
      maxCount: options.nodeDeletionBreakerMaxCount,
      windowMs: options.nodeDeletionBreakerWindowMs,
    },
    breakerAcknowledged: options.nodeDeletionBreakerAcknowledged,
    providerTimeoutMs: options.nodeLifecycleProviderTimeoutMs,
    shrinkMaxShare: options.nodeDeletionShrinkMaxShare,
  }));
  const clusterCIDRs = collect(problems, () => clusterCIDRsFromFlag(options.clusterCIDR));
  const nodeIPAM = clusterCIDRs ? collect(problems, () => nodeIPAMFromFlags(options, clusterCIDRs)) : undefined;
  const clientCertificates = collect(problems, () => clientCertificatesFromFlags(options));
  if (problems.length > 0 || !isManagedNode || !kubeConfig || !lifecycle || !clusterCIDRs) throw new ConfigurationError(problems.join('\n'));
  return {
    log: { format: options.loggingFormat, verbosity: options.verbosity },
    kubeConfig,
    clientBudget: { qps: options.kubeApiQps, burst: options.kubeApiBurst },
    delegatedAuth,
    reviewCache: reviewCacheTtls(options),
    server: {
      bindAddress: options.bindAddress,
      securePort: options.securePort,
      tlsCertFile: given(options.tlsCertFile),
      tlsKeyFile: given(options.tlsPrivateKeyFile),
      alwaysAllowPaths: options.authorizationAlwaysAllowPaths,
      ...servingTlsFromFlags(options),
      clientCertificates,
    },
    leaderElection: {
      enabled: options.leaderElect,
      namespace: options.leaderElectResourceNamespace,
      name: options.leaderElectResourceName,
      leaseDurationMs: options.leaderElectLeaseDurationMs,
      renewDeadlineMs: options.leaderElectRenewDeadlineMs,
      retryPeriodMs: options.leaderElectRetryPeriodMs,
      exitOnLeaseLoss: options.exitOnLeaseLoss,
    },
    shutdownGracePeriodMs: options.shutdownGracePeriodMs,
    useServiceAccountCredentials: options.useServiceAccountCredentials,
    isManagedNode,
    controllers: {
      enabled: options.enabledControllers,
      clusterName: options.clusterName,
      concurrentNodeSyncs: options.concurrentNodeSyncs,
      concurrentNodeStatusUpdates: nodeStatusWorkers(options),
      concurrentServiceSyncs: options.concurrentServiceSyncs,
      nodeStatusUpdateFrequencyMs: options.nodeStatusUpdateFrequencyMs,
      nodeLabelResync: options.nodeLabelResync,
      kubeVipAnnotation: options.kubeVipAnnotation,
      configureCloudRoutes: options.configureCloudRoutes,
      clusterCIDRs,
      nodeIPAM,
      routeReconciliationPeriodMs: options.routeReconciliationPeriodMs,
      watchBasedRoutes: gateEnabled(options.featureGates, 'CloudControllerManagerWatchBasedRoutesReconciliation'),
      lifecycle,
      statusObject: options.leaderElectResourceName,
    },
  };
}

/**
 * The provider --cloud-provider names, built from the --cloud-config file (read bounded); with
 * several names (beyond upstream), each built from its own file and put behind one
 * CompositeProvider that hands each node to the provider of its platform.
 */
async function createProvider(options: Options, providers: ProviderRegistry, logger: Logger): Promise<CloudProvider> {
  let files: Map<string, string | undefined>;
  try {
    const names = parseProviderNames(options.cloudProvider, providers.names());
    files = parseCloudConfigs(options.cloudConfig, names);
  } catch (e) {
    throw new ConfigurationError(errorMessage(e));
  }
  const several = files.size > 1;
  const problems: string[] = [];
  const members: CompositeMember[] = [];
  for (const [name, configPath] of files) {
    let config: string | undefined;
    if (configPath !== undefined) {
      try {
        config = readCloudConfigFile(configPath);
      } catch (e) {
        problems.push(`--cloud-config: cannot read ${configPath}: ${errorMessage(e)}`);
        continue;
      }
    }
    try {
      members.push({ name, provider: await providers.create(name, { config, configPath, logger: logger.with({ provider: name }) }) });
    } catch (e) {
      problems.push(`--cloud-config: ${several ? `${name}: ` : ''}${errorMessage(e)}`);
    }
  }
  if (problems.length === 0 && !several) return members[0]!.provider;
  try {
    if (problems.length === 0) return new CompositeProvider(members);
  } catch (e) {
    problems.push(`--cloud-provider: ${errorMessage(e)}`);
  }
  await Promise.all(members.map((m) => m.provider.close?.()));
  throw new ConfigurationError(problems.join('\n'));
}

/** Routes run (the controller table decides, once): then the pod CIDRs are required. */
function requireClusterCIDRs(options: Options, cloud: CloudProvider): void {
  const selection = { enabled: options.enabledControllers, configureCloudRoutes: options.configureCloudRoutes };
  const routesRun = runnableControllers(cloud, selection).run.some((c) => c.name === NODE_ROUTE_CONTROLLER);
  if (routesRun && !options.clusterCIDR.trim()) {
    throw new ConfigurationError('--cluster-cidr: required when routes are configured (give the pod CIDRs, or pass --configure-cloud-routes=false)');
  }
}

/** --cluster-cidr as prefixes, in the flag's order (node IPAM gives each node's CIDRs in it); none when empty. */
function clusterCIDRsFromFlag(text: string): Prefix[] {
  return cidrListFromFlag('--cluster-cidr', text);
}

/** A flag's one- or two-family CIDR list; its own check already refused a bad one. */
function cidrListFromFlag(flag: string, text: string): Prefix[] {
  if (!text.trim()) return [];
  const parsed = parseClusterCIDRs(text);
  if (!parsed.ok) throw new ConfigurationError(parsed.errors.map((e) => `${flag}: ${e}`).join('\n'));
  return text.split(',').map((c) => parsePrefix(c.trim(), true)!);
}

/**
 * The node IPAM settings when it runs (named in --controllers, and --allocate-node-cidrs): only
 * then are the nodeipam flags required to fit together, so a manifest that passed
 * --allocate-node-cidrs while edge-ccm ignored it still starts.
 */
function nodeIPAMFromFlags(options: Options, clusterCIDRs: Prefix[]): NodeIPAMOptions | undefined {
  if (!options.allocateNodeCIDRs || !options.enabledControllers.has(NODE_IPAM_CONTROLLER)) return undefined;
  try {
    return resolveNodeIPAMOptions({
      allocatorType: options.cidrAllocatorType,
      clusterCIDRs,
      serviceCIDRs: cidrListFromFlag('--service-cluster-ip-range', options.serviceClusterIPRange),
      maskSize: options.nodeCIDRMaskSize,
      maskSizeIPv4: options.nodeCIDRMaskSizeIPv4,
      maskSizeIPv6: options.nodeCIDRMaskSizeIPv6,
      namespace: options.leaderElectResourceNamespace,
      leaseName: options.leaderElectResourceName,
    });
  } catch (e) {
    throw new ConfigurationError(errorMessage(e));
  }
}

/** Our client configuration; a kubeconfig a flag names that is missing or broken is named by its flag. */
function kubeConfigFromFlags(options: Options): KubeConfig {
  const missing = missingKubeconfigFiles({
    '--kubeconfig': options.kubeconfig,
    '--authentication-kubeconfig': options.authenticationKubeconfig,
    '--authorization-kubeconfig': options.authorizationKubeconfig,
  });
  if (missing.length) throw new ConfigurationError(missing.join('\n'));
  return loadKubeConfig({ kubeconfig: given(options.kubeconfig), master: given(options.master) });
}

/** A string flag whose empty default means "not given". */
function given(text: string): string | undefined {
  return text === '' ? undefined : text;
}

/** Runs `f`; a failure becomes one more problem (its message, after `prefix`) instead of an exception. */
function collect<T>(problems: string[], f: () => T, prefix = ''): T | undefined {
  try {
    return f();
  } catch (e) {
    problems.push(e instanceof ConfigurationError ? e.message : prefix + errorMessage(e));
    return undefined;
  }
}

async function collectAsync<T>(problems: string[], f: () => Promise<T>): Promise<T | undefined> {
  try {
    return await f();
  } catch (e) {
    problems.push(e instanceof ConfigurationError ? e.message : errorMessage(e));
    return undefined;
  }
}
