/**
 * The rest of upstream's controller-manager flags (k8s.io/controller-manager's generic, debugging
 * and leader-migration options; k8s.io/cloud-provider's shared and node controller options):
 * the ones edge-ccm acts on, and the ones accepted so that upstream manifests start, each with why
 * it changes nothing here (`inert`).
 */
import * as v from 'valibot';
import { resolveFeatureGates } from './feature-gates.ts';
import { flag } from './flag-def.ts';
import { formatGoDuration } from '../util/duration.ts';
import { UPSTREAM_FEATURE_GATES } from './upstream-flags.ts';

const notNegative = v.pipe(
  v.number(),
  v.check((n: number) => n >= 0, (issue) => `cannot be a negative number, got ${issue.input}`),
);

const gateList = UPSTREAM_FEATURE_GATES.filter((g) => !g.locked)
  .map((g) => `${g.name}=true|false (${g.preRelease || 'GA'} - default=${g.default})`)
  .join('\n');

export const COMPAT_FLAGS = [
  // debugging
  flag({
    name: 'profiling',
    key: 'profiling',
    kind: 'bool',
    default: true,
    group: 'debugging',
    help:
      'Enable profiling via web interface host:port/debug/pprof/ (behind authentication and authorization): a V8 ' +
      'heap snapshot, and a CPU profile for ?seconds=N. See docs/flags.md.',
  }),
  flag({
    name: 'contention-profiling',
    key: 'contentionProfiling',
    kind: 'bool',
    default: false,
    group: 'debugging',
    help:
      'Enable block profiling, if profiling is enabled. Here: /debug/pprof/block reports how long the event loop was ' +
      'blocked (delay histogram since start), the one kind of contention a single-threaded runtime has.',
  }),
  // leader-migration
  flag({
    name: 'enable-leader-migration',
    key: 'enableLeaderMigration',
    kind: 'bool',
    default: false,
    group: 'leader-migration',
    help: 'Whether to enable controller leader migration.',
    inert:
      'leader migration hands cloud controllers over from kube-controller-manager, which has no edge-ccm provider: there is nothing to migrate',
  }),
  flag({
    name: 'leader-migration-config',
    key: 'leaderMigrationConfig',
    kind: 'string',
    default: '',
    group: 'leader-migration',
    help:
      'Path to the config file for controller leader migration, or empty to use the value that reflects default ' +
      'configuration of the controller manager. The config file should be of type LeaderMigrationConfiguration, ' +
      'group controllermanager.config.k8s.io, version v1alpha1.',
    inert:
      'leader migration hands cloud controllers over from kube-controller-manager, which has no edge-ccm provider: there is nothing to migrate',
  }),
  // generic
  flag({
    name: 'feature-gates',
    key: 'featureGates',
    kind: 'list',
    default: [],
    group: 'generic',
    typeName: 'mapStringBool',
    help:
      'A set of key=value pairs that describe feature gates for alpha/experimental features, checked against the gates ' +
      'the upstream cloud-controller-manager knows. Only CloudControllerManagerWatchBasedRoutesReconciliation and ' +
      'LoggingAlphaOptions change what edge-ccm does; see docs/flags.md. Options are:\n' + gateList,
    schema: v.pipe(
      v.array(v.string()),
      v.rawCheck(({ dataset, addIssue }) => {
        if (!dataset.typed) return;
        const result = resolveFeatureGates(dataset.value);
        if (!result.ok) for (const message of result.errors) addIssue({ message });
      }),
    ),
  }),
  flag({
    name: 'controller-start-interval',
    key: 'controllerStartIntervalMs',
    kind: 'duration',
    default: 0,
    group: 'generic',
    help: 'Interval between starting controller managers.',
    inert: 'the controllers start together once the lease is won; the interval only spread the start-up load of upstream\'s many controllers',
    schema: v.pipe(v.number(), v.check((ms: number) => ms >= 0, (issue) => `must not be negative, got ${formatGoDuration(issue.input as number)}`)),
  }),
  flag({
    name: 'cidr-allocator-type',
    key: 'cidrAllocatorType',
    kind: 'string',
    default: 'RangeAllocator',
    group: 'generic',
    help:
      'Type of CIDR allocator to use: RangeAllocator (upstream\'s: the next free CIDR, released when the Node is ' +
      'deleted) or CloudAllocator (the machine\'s CIDRs from the provider\'s inventory, else the ones it got first, ' +
      'kept across Node deletions).',
    schema: v.picklist(['RangeAllocator', 'CloudAllocator'], (issue) => `unknown CIDR allocator type ${issue.received} (known: RangeAllocator, CloudAllocator)`),
  }),
  flag({
    name: 'external-cloud-volume-plugin',
    key: 'externalCloudVolumePlugin',
    kind: 'string',
    default: '',
    group: 'generic',
    help:
      'The plugin to use when cloud provider is set to external. Can be empty, should only be set when cloud-provider ' +
      'is external. Currently used to allow node-ipam-controller, persistentvolume-binder-controller, ' +
      'persistentvolume-expander-controller and attach-detach-controller to work for in tree cloud providers.',
    inert: 'it configures kube-controller-manager\'s in-tree volume controllers, none of which run here',
  }),
  flag({
    name: 'allow-untagged-cloud',
    key: 'allowUntaggedCloud',
    kind: 'bool',
    default: false,
    group: 'generic',
    help:
      'Allow the cluster to run without the cluster-id on cloud instances. This is a legacy mode of operation and a ' +
      'cluster-id will be required in the future. (Deprecated upstream.)',
    inert: 'edge-ccm\'s providers do not tag instances with a cluster id',
  }),
  flag({
    name: 'node-sync-period',
    key: 'nodeSyncPeriodMs',
    kind: 'duration',
    default: 0,
    group: 'generic',
    help:
      'This flag is deprecated and will be removed in future releases. See node-monitor-period for Node health ' +
      'checking or route-reconciliation-period for cloud provider\'s route configuration settings.',
    inert: 'a no-op upstream too (deprecated)',
  }),
  // cloud-node-controller
  flag({
    name: 'concurrent-node-status-updates',
    key: 'concurrentNodeStatusUpdates',
    kind: 'int',
    default: 0,
    group: 'cloud-node-controller',
    typeName: 'int32',
    help: 'Number of workers concurrently updating node statuses. If unspecified or 0, --concurrent-node-syncs is used instead',
    schema: notNegative,
  }),
] as const;
