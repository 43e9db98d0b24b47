/**
 * The one table of command-line flags. Parsing, validation, --help and docs/flags.md are all
 * driven from it. Names, defaults, groups and help texts follow the upstream
 * cloud-controller-manager (k8s.io/cloud-provider options, component-base, apiserver delegated
 * auth) so existing manifests keep working; the "edge-ccm" group holds our own additions.
 */
import * as v from 'valibot';
import { CONTROLLER_ALIASES, CONTROLLER_NAMES, CONTROLLERS_DISABLED_BY_DEFAULT, resolveControllers } from './controllers.ts';
import { formatGoDuration, parseGoDuration } from '../util/duration.ts';
import type { FlagKind } from './values.ts';
import { FLAG_GROUPS, flag, type FlagDef, type FlagGroup } from './flag-def.ts';
import { parseIP } from '../net/ip.ts';
import { alwaysAllowPathError } from '../server/auth/path-matcher.ts';
import { cidrListSchema } from './cluster-cidr.ts';
import { NODE_IPAM_FLAGS } from './flags-nodeipam.ts';
import { DEFAULT_LIFECYCLE_OPTIONS, DELETION_POLICIES } from '../controllers/nodelifecycle/options.ts';
import { AUTH_FLAGS } from './flags-auth.ts';
import { COMPAT_FLAGS } from './flags-compat.ts';
import { LOGGING_FLAGS } from './flags-logging.ts';
import { SERVING_FLAGS } from './flags-serving.ts';

export { FLAG_GROUPS, flag, type FlagDef, type FlagGroup } from './flag-def.ts';

const greaterThanZero = v.pipe(
  v.number(),
  v.check((ms: number) => ms > 0, (issue) => `must be greater than zero, got ${formatGoDuration(issue.input as number)}`),
);
const atLeastOne = v.pipe(
  v.number(),
  v.check((n: number) => n >= 1, (issue) => `must be a positive number, got ${issue.input}`),
);
const LOGGING_FORMATS = ['json', 'text'] as const;

export const FLAGS = [
  // generic
  flag({
    name: 'cloud-provider',
    key: 'cloudProvider',
    kind: 'string',
    default: '',
    group: 'generic',
    help: 'The provider for cloud services: the name of a provider built into edge-ccm. Required. Beyond upstream (one name): ' +
      'several names separated by commas (e.g. static,proxmox) run those providers in one process, each serving the nodes of its ' +
      'platform (providerID scheme); a node of another platform is never touched. See docs/hybrid-clusters.md.',
  }),
  flag({
    name: 'cloud-config',
    key: 'cloudConfig',
    kind: 'string',
    default: '',
    group: 'generic',
    help: 'The path to the cloud provider configuration file. Empty string for no configuration file. Beyond upstream: ' +
      'with several providers, one file each, as NAME=PATH pairs separated by commas (e.g. static=/etc/edge-ccm/static.yaml,proxmox=/etc/edge-ccm/proxmox.yaml).',
  }),
  flag({
    name: 'controllers',
    key: 'controllers',
    kind: 'list',
    default: ['*'],
    group: 'generic',
    help:
      "A list of controllers to enable. '*' enables all on-by-default controllers, 'foo' enables the controller " +
      "named 'foo', '-foo' disables the controller named 'foo'.\n" +
      `All controllers: ${CONTROLLER_NAMES.join(', ')}\n` +
      `Aliases: ${Object.entries(CONTROLLER_ALIASES).map(([alias, name]) => `${alias} (${name})`).join(', ')}\n` +
      `Disabled-by-default controllers: ${[...CONTROLLERS_DISABLED_BY_DEFAULT].join(', ') || 'none'}`,
    schema: v.pipe(
      v.array(v.string()),
      v.rawCheck(({ dataset, addIssue }) => {
        if (!dataset.typed) return;
        const selection = resolveControllers(dataset.value);
        if (!selection.ok) for (const message of selection.errors) addIssue({ message });
      }),
    ),
  }),
  flag({
    name: 'leader-elect',
    key: 'leaderElect',
    kind: 'bool',
    default: true,
    group: 'generic',
    help:
      'Start a leader election client and gain leadership before executing the main loop. Enable this when ' +
      'running replicated components for high availability.',
  }),
  flag({
    name: 'leader-elect-lease-duration',
    key: 'leaderElectLeaseDurationMs',
    kind: 'duration',
    default: parseGoDuration('15s'),
    group: 'generic',
    help:
      'The duration that non-leader candidates will wait after observing a leadership renewal until attempting ' +
      'to acquire leadership of a led but unrenewed leader slot. This is effectively the maximum duration that a ' +
      'leader can be stopped before it is replaced by another candidate. This is only applicable if leader ' +
      'election is enabled.',
  }),
  flag({
    name: 'leader-elect-renew-deadline',
    key: 'leaderElectRenewDeadlineMs',
    kind: 'duration',
    default: parseGoDuration('10s'),
    group: 'generic',
    help:
      'The interval between attempts by the acting master to renew a leadership slot before it stops leading. ' +
      'This must be less than the lease duration. This is only applicable if leader election is enabled.',
  }),
  flag({
    name: 'leader-elect-retry-period',
    key: 'leaderElectRetryPeriodMs',
    kind: 'duration',
    default: parseGoDuration('2s'),
    group: 'generic',
    help:
      'The duration the clients should wait between attempting acquisition and renewal of a leadership. This ' +
      'is only applicable if leader election is enabled.',
  }),
  flag({
    name: 'leader-elect-resource-lock',
    key: 'leaderElectResourceLock',
    kind: 'string',
    default: 'leases',
    group: 'generic',
    help:
      "The type of resource object that is used for locking during leader election. Supported options are 'leases'.",
  }),
  flag({
    name: 'leader-elect-resource-name',
    key: 'leaderElectResourceName',
    kind: 'string',
    default: 'cloud-controller-manager',
    group: 'generic',
    help: 'The name of resource object that is used for locking during leader election.',
  }),
  flag({
    name: 'leader-elect-resource-namespace',
    key: 'leaderElectResourceNamespace',
    kind: 'string',
    default: 'kube-system',
    group: 'generic',
    help: 'The namespace of resource object that is used for locking during leader election.',
  }),
  flag({
    name: 'kube-api-qps',
    key: 'kubeApiQps',
    kind: 'float',
    default: 20,
    group: 'generic',
    typeName: 'float32',
    help: 'QPS to use while talking with kubernetes apiserver.',
    schema: v.pipe(
      v.number(),
      v.check((n: number) => n > 0, (issue) => `must be greater than 0, got ${issue.input}`),
    ),
  }),
  flag({
    name: 'kube-api-burst',
    key: 'kubeApiBurst',
    kind: 'int',
    default: 30,
    group: 'generic',
    typeName: 'int32',
    help: 'Burst to use while talking with kubernetes apiserver.',
    schema: v.pipe(
      v.number(),
      v.check((n: number) => n >= 1, (issue) => `must be at least 1, got ${issue.input}`),
    ),
  }),
  flag({
    name: 'kube-api-content-type',
    key: 'kubeApiContentType',
    kind: 'string',
    default: 'application/vnd.kubernetes.protobuf',
    group: 'generic',
    help: 'Content type of requests sent to apiserver.',
    inert: 'edge-ccm always sends and asks for JSON',
  }),
  flag({
    name: 'min-resync-period',
    key: 'minResyncPeriodMs',
    kind: 'duration',
    default: parseGoDuration('12h'),
    group: 'generic',
    help: 'The resync period in reflectors will be random between MinResyncPeriod and 2*MinResyncPeriod.',
    schema: greaterThanZero,
  }),
  flag({
    name: 'use-service-account-credentials',
    key: 'useServiceAccountCredentials',
    kind: 'bool',
    default: false,
    group: 'generic',
    help: 'If true, use individual service account credentials for each controller.',
  }),
  flag({
    name: 'node-monitor-period',
    key: 'nodeMonitorPeriodMs',
    kind: 'duration',
    default: DEFAULT_LIFECYCLE_OPTIONS.monitorPeriodMs,
    group: 'generic',
    help: 'The period for syncing NodeStatus in cloud-node-lifecycle-controller.',
    schema: greaterThanZero,
  }),
  flag({
    name: 'route-reconciliation-period',
    key: 'routeReconciliationPeriodMs',
    kind: 'duration',
    default: parseGoDuration('10s'),
    group: 'generic',
    help: "The period for reconciling routes created for Nodes by cloud provider.",
    schema: greaterThanZero,
  }),
  flag({
    name: 'configure-cloud-routes',
    key: 'configureCloudRoutes',
    kind: 'bool',
    default: true,
    group: 'generic',
    help: "Should CIDRs allocated to Nodes (their podCIDRs) be configured as routes on the cloud provider.",
  }),
  flag({
    name: 'cluster-cidr',
    key: 'clusterCIDR',
    kind: 'string',
    default: '',
    group: 'generic',
    help:
      'CIDR Range for Pods in cluster: comma separated, at most one IPv4 and one IPv6 CIDR. Required when ' +
      'routes are configured (--configure-cloud-routes and a provider with routes) and by --allocate-node-cidrs; ' +
      'checked whenever given.',
    // Checked whenever given, routes or not: a typo should not wait for the day routes are turned on.
    schema: cidrListSchema,
  }),
  flag({
    name: 'allocate-node-cidrs',
    key: 'allocateNodeCIDRs',
    kind: 'bool',
    default: false,
    group: 'generic',
    help:
      'Should CIDRs for Pods be allocated and set on the cloud provider. Requires --cluster-cidr. The ' +
      'node-ipam-controller (disabled by default: name it in --controllers) allocates them.',
  }),
  flag({
    name: 'cluster-name',
    key: 'clusterName',
    kind: 'string',
    default: 'kubernetes',
    group: 'generic',
    help: 'The instance prefix for the cluster.',
  }),
  // one section per controller, as upstream
  flag({
    name: 'concurrent-node-syncs',
    key: 'concurrentNodeSyncs',
    kind: 'int',
    default: 1,
    group: 'cloud-node-controller',
    typeName: 'int32',
    help: 'Number of workers concurrently synchronizing nodes.',
    schema: atLeastOne,
  }),
  flag({
    name: 'concurrent-service-syncs',
    key: 'concurrentServiceSyncs',
    kind: 'int',
    default: 1,
    group: 'service-lb-controller',
    typeName: 'int32',
    help:
      'The number of services that are allowed to sync concurrently. Larger number = more responsive service ' +
      'management, but more CPU (and network) load',
    schema: atLeastOne,
  }),
  // secure serving
  flag({
    name: 'bind-address',
    key: 'bindAddress',
    kind: 'string',
    default: '0.0.0.0',
    group: 'secure serving',
    typeName: 'ip',
    help:
      'The IP address on which to listen for the --secure-port port. The associated interface(s) must be ' +
      'reachable by the rest of the cluster, and by CLI/web clients. If an unspecified address (0.0.0.0 or ::), ' +
      'all interfaces will be used.',
    schema: v.pipe(
      v.string(),
      v.check((s: string) => parseIP(s) !== undefined, (issue) => `invalid IP address ${JSON.stringify(issue.input)}`),
    ),
  }),
  flag({
    name: 'secure-port',
    key: 'securePort',
    kind: 'int',
    default: 10258,
    group: 'secure serving',
    typeName: 'int',
    help: "The port on which to serve HTTPS with authentication and authorization. If 0, don't serve HTTPS at all.",
    schema: v.pipe(
      v.number(),
      v.check(
        (n: number) => n >= 0 && n <= 65535,
        (issue) => `${issue.input} must be between 0 and 65535, inclusive. 0 for turning off secure port`,
      ),
    ),
  }),
  flag({
    name: 'tls-cert-file',
    key: 'tlsCertFile',
    kind: 'string',
    default: '',
    group: 'secure serving',
    help:
      'File containing the default x509 Certificate for HTTPS. (CA cert, if any, concatenated after server ' +
      'cert). If HTTPS serving is enabled, and --tls-cert-file and --tls-private-key-file are not provided, a ' +
      'self-signed certificate and key are generated in memory.',
  }),
  flag({
    name: 'tls-private-key-file',
    key: 'tlsPrivateKeyFile',
    kind: 'string',
    default: '',
    group: 'secure serving',
    help: 'File containing the default x509 private key matching --tls-cert-file.',
  }),
  // delegated authentication and authorization
  flag({
    name: 'authentication-kubeconfig',
    key: 'authenticationKubeconfig',
    kind: 'string',
    default: '',
    group: 'authentication',
    help:
      "kubeconfig file pointing at the 'core' kubernetes server with enough rights to create " +
      'tokenreviews.authentication.k8s.io. This is optional. If empty, the in-cluster configuration or ' +
      '--kubeconfig is used.',
  }),
  flag({
    name: 'authentication-skip-lookup',
    key: 'authenticationSkipLookup',
    kind: 'bool',
    default: false,
    group: 'authentication',
    help:
      'If false, the authentication-kubeconfig will be used to lookup missing authentication configuration ' +
      'from the cluster.',
  }),
  flag({
    name: 'authorization-kubeconfig',
    key: 'authorizationKubeconfig',
    kind: 'string',
    default: '',
    group: 'authorization',
    help:
      "kubeconfig file pointing at the 'core' kubernetes server with enough rights to create " +
      'subjectaccessreviews.authorization.k8s.io. This is optional. If empty, the in-cluster configuration or ' +
      '--kubeconfig is used.',
  }),
  flag({
    name: 'authorization-always-allow-paths',
    key: 'authorizationAlwaysAllowPaths',
    kind: 'list',
    default: ['/healthz', '/readyz', '/livez'],
    group: 'authorization',
    help:
      "A list of HTTP paths to skip during authorization, i.e. these are authorized without contacting the " +
      "'core' kubernetes server.",
    schema: v.pipe(
      v.array(v.string()),
      v.rawCheck(({ dataset, addIssue }) => {
        if (!dataset.typed) return;
        for (const path of dataset.value) {
          const message = alwaysAllowPathError(path);
          if (message !== undefined) addIssue({ message });
        }
      }),
    ),
  }),
  // misc
  flag({
    name: 'kubeconfig',
    key: 'kubeconfig',
    kind: 'string',
    default: '',
    group: 'misc',
    help:
      'Path to kubeconfig file with authorization and master location information (the master location can ' +
      'be overridden by the master flag).',
  }),
  flag({
    name: 'master',
    key: 'master',
    kind: 'string',
    default: '',
    group: 'misc',
    help: 'The address of the Kubernetes API server (overrides any value in kubeconfig).',
  }),
  flag({
    name: 'node-status-update-frequency',
    key: 'nodeStatusUpdateFrequencyMs',
    kind: 'duration',
    default: parseGoDuration('5m'),
    group: 'misc',
    help: "Specifies how often the controller updates nodes' status.",
    schema: greaterThanZero,
  }),
  // global
  flag({
    name: 'help',
    shorthand: 'h',
    key: 'help',
    kind: 'bool',
    default: false,
    group: 'global',
    help: 'help for edge-ccm',
  }),
  flag({
    name: 'logging-format',
    key: 'loggingFormat',
    kind: 'string',
    default: 'text',
    group: 'global',
    help: 'Sets the log format. Permitted formats: "json", "text".',
    schema: v.picklist(
      LOGGING_FORMATS,
      (issue) => `unsupported log format ${JSON.stringify(issue.input)} (permitted: ${LOGGING_FORMATS.join(', ')})`,
    ),
  }),
  flag({
    name: 'v',
    shorthand: 'v',
    key: 'verbosity',
    kind: 'int',
    default: 0,
    group: 'global',
    typeName: 'Level',
    help: 'number for the log level verbosity',
    schema: v.pipe(
      v.number(),
      v.check((n: number) => n >= 0, (issue) => `must not be negative, got ${issue.input}`),
    ),
  }),
  flag({
    name: 'version',
    key: 'version',
    kind: 'bool',
    default: false,
    group: 'global',
    help: 'Print version information and quit.',
  }),
  // beyond upstream
  flag({
    name: 'shutdown-grace-period',
    key: 'shutdownGracePeriodMs',
    kind: 'duration',
    default: parseGoDuration('30s'),
    group: 'edge-ccm',
    help: 'How long in-flight syncs may take to finish after SIGTERM before the process exits.',
    schema: v.pipe(
      v.number(),
      v.check((ms: number) => ms >= 0, (issue) => `must not be negative, got ${formatGoDuration(issue.input as number)}`),
    ),
  }),
  flag({
    name: 'exit-on-lease-loss',
    key: 'exitOnLeaseLoss',
    kind: 'bool',
    default: false,
    group: 'edge-ccm',
    help:
      'Exit (code 1) when the leader lease is lost, as upstream does. By default the process ends that term instead ' +
      '(controllers stopped, its requests aborted, the provider\'s address memory dropped) and campaigns again, so a ' +
      'lone replica weathers an API server outage without a restart.',
  }),
  flag({
    name: 'managed-node-provider-id-prefixes',
    key: 'managedNodeProviderIDPrefixes',
    kind: 'list',
    default: [],
    group: 'edge-ccm',
    help:
      'Node ownership: comma separated providerID prefixes (e.g. static://). A node whose providerID is set and ' +
      'matches none, or that has no providerID and no uninitialized taint (joined without an external cloud provider), ' +
      'is left alone by every controller. Empty: every node is ours.',
  }),
  flag({
    name: 'managed-node-selector',
    key: 'managedNodeSelector',
    kind: 'string',
    default: '',
    group: 'edge-ccm',
    help: 'Node ownership: a label selector (e.g. edge-ccm.io/managed=true) that managed nodes must match. Empty: every node.',
  }),
  flag({
    name: 'node-deletion-policy',
    key: 'nodeDeletionPolicy',
    kind: 'string',
    default: DEFAULT_LIFECYCLE_OPTIONS.deletionPolicy,
    group: 'edge-ccm',
    help: 'What happens to a node whose machine is confirmed gone: delete (upstream), taint (quarantine taint, object kept) or never.',
    schema: v.picklist(DELETION_POLICIES, (issue) => `must be ${DELETION_POLICIES.slice(0, -1).join(', ')} or ${DELETION_POLICIES.at(-1)}, got ${JSON.stringify(issue.input)}`),
  }),
  flag({
    name: 'node-deletion-grace-period',
    key: 'nodeDeletionGracePeriodMs',
    kind: 'duration',
    default: DEFAULT_LIFECYCLE_OPTIONS.gracePeriodMs,
    group: 'edge-ccm',
    help: 'How long a node must keep being reported "not found" (from the first such answer) before it is deleted. 0 deletes at once, as upstream.',
    schema: v.pipe(v.number(), v.check((ms: number) => ms >= 0, (issue) => `must not be negative, got ${formatGoDuration(issue.input as number)}`)),
  }),
  flag({
    name: 'node-deletion-not-found-threshold',
    key: 'nodeDeletionNotFoundThreshold',
    kind: 'int',
    default: DEFAULT_LIFECYCLE_OPTIONS.notFoundThreshold,
    group: 'edge-ccm',
    help: 'Consecutive "not found" answers needed before a node is deleted (1 = upstream).',
    schema: atLeastOne,
  }),
  flag({
    name: 'node-deletion-breaker-max-share',
    key: 'nodeDeletionBreakerMaxShare',
    kind: 'float',
    default: DEFAULT_LIFECYCLE_OPTIONS.breaker.maxShare,
    group: 'edge-ccm',
    help: 'Circuit breaker: when more than this share of managed nodes is judged gone within the window, delete none (1 turns the share rule off).',
    schema: v.pipe(v.number(), v.check((n: number) => n > 0 && n <= 1, (issue) => `must be greater than 0 and at most 1, got ${issue.input}`)),
  }),
  flag({
    name: 'node-deletion-breaker-max-count',
    key: 'nodeDeletionBreakerMaxCount',
    kind: 'int',
    default: 0,
    group: 'edge-ccm',
    help: 'Circuit breaker: when more than this number of managed nodes is judged gone within the window, delete none. 0: no absolute cap.',
    schema: v.pipe(v.number(), v.check((n: number) => n >= 0, (issue) => `must not be negative, got ${issue.input}`)),
  }),
  flag({
    name: 'node-deletion-breaker-window',
    key: 'nodeDeletionBreakerWindowMs',
    kind: 'duration',
    default: DEFAULT_LIFECYCLE_OPTIONS.breaker.windowMs,
    group: 'edge-ccm',
    help: 'Circuit breaker: how long a node judged gone keeps counting against the breaker.',
    schema: v.pipe(v.number(), v.check((ms: number) => ms >= 0, (issue) => `must not be negative, got ${formatGoDuration(issue.input as number)}`)),
  }),
  flag({
    name: 'node-deletion-breaker-acknowledged',
    key: 'nodeDeletionBreakerAcknowledged',
    kind: 'bool',
    default: DEFAULT_LIFECYCLE_OPTIONS.breakerAcknowledged,
    group: 'edge-ccm',
    help: 'Let every confirmed deletion through an open breaker (set it for one rollout after checking the nodes are really gone, then remove it).',
  }),
  flag({
    name: 'node-deletion-shrink-max-share',
    key: 'nodeDeletionShrinkMaxShare',
    kind: 'float',
    default: DEFAULT_LIFECYCLE_OPTIONS.shrinkMaxShare,
    group: 'edge-ccm',
    help:
      'When the provider\'s answer for one providerID scheme lost more than this share of the machines it listed before, the missing ones ' +
      'count as "unknown" until consecutive answers (the not-found threshold, at least 2) confirm the smaller list over the grace period ' +
      '(1 turns this off). An answer listing none of the managed nodes is never believed, whatever this flag.',
    schema: v.pipe(v.number(), v.check((n: number) => n >= 0 && n <= 1, (issue) => `must be between 0 and 1, got ${issue.input}`)),
  }),
  flag({
    name: 'node-lifecycle-provider-timeout',
    key: 'nodeLifecycleProviderTimeoutMs',
    kind: 'duration',
    default: DEFAULT_LIFECYCLE_OPTIONS.providerTimeoutMs,
    group: 'edge-ccm',
    help: 'The provider\'s existence and shutdown answers of one lifecycle pass (a bulk call, or every per-node call) must come within this, ' +
      'counted from the start of the pass; a question not answered by then counts as "unknown" (never acted on).',
    schema: greaterThanZero,
  }),
  flag({
    name: 'node-label-resync',
    key: 'nodeLabelResync',
    kind: 'bool',
    default: false,
    group: 'edge-ccm',
    help:
      'Keep the cloud labels of initialised nodes (instance type, zone, region, and the provider\'s additional ' +
      'labels, tracked in the node.edge-ccm.io/cloud-labels annotation) in line with the provider, on every node ' +
      'status update and soon after the provider reports a change. Upstream labels a node only at initialisation. ' +
      'On regardless of this flag with providers that ask for it (static).',
  }),
  flag({
    name: 'kube-vip-annotation',
    key: 'kubeVipAnnotation',
    kind: 'bool',
    default: false,
    group: 'edge-ccm',
    help:
      'Also write each load balancer\'s ingress IPs (IPv4 first, comma separated) to the service\'s ' +
      'kube-vip.io/loadbalancerIPs annotation, so kube-vip announces them by ARP or BGP; removed with the load ' +
      'balancer. Only annotations edge-ccm wrote (marked edge-ccm.io/kube-vip-annotation) are ever removed. ' +
      'Needs patch on services: deploy/kubernetes/rbac-kube-vip.yaml.',
  }),
  // the rest of upstream's surface, by topic (src/options/upstream-flags.ts lists it all)
  ...COMPAT_FLAGS,
  ...NODE_IPAM_FLAGS,
  ...SERVING_FLAGS,
  ...AUTH_FLAGS,
  ...LOGGING_FLAGS,
] as const;

export type AnyFlagDef = (typeof FLAGS)[number];

type FlagValueOf<D> = D extends FlagDef<string, FlagKind, infer Value> ? Value : never;

/** One property per flag, typed after validation (durations in milliseconds). */
export type FlagValues = { -readonly [D in AnyFlagDef as D['key']]: FlagValueOf<D> };

export type FlagKey = keyof FlagValues;

export function flagByKey(key: string): AnyFlagDef | undefined {
  return FLAGS.find((def) => def.key === key);
}

export { flagLabel } from './flag-def.ts';

/** Flags of each group, sorted by name as pflag lists them; groups in FLAG_GROUPS order. */
export function flagsByGroup(): [FlagGroup, AnyFlagDef[]][] {
  return FLAG_GROUPS.map((group): [FlagGroup, AnyFlagDef[]] => [
    group,
    FLAGS.filter((def) => def.group === group).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)),
  ]).filter(([, defs]) => defs.length > 0);
}
