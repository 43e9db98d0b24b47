/**
 * /configz as the upstream cloud-controller-manager serves it: the versioned component config
 * (cloudcontrollermanager.config.k8s.io/v1alpha1 CloudControllerManagerConfiguration) the flags
 * produce, under its configz name, in Go's field order and spelling (most fields carry no json
 * tag upstream, so they keep their Go names). Compared with upstream's own output for the same
 * command lines by src/app/configz.test.ts.
 */
import { formatGoDuration } from '../util/duration.ts';
import { CONTROLLER_ALIASES, type Options } from '../options/index.ts';

export const CONFIGZ_NAME = 'cloudcontrollermanager.config.k8s.io';

/** controller-manager's DefaultLeaderMigrationConfiguration, what upstream shows with --enable-leader-migration. */
const DEFAULT_LEADER_MIGRATION = {
  leaderName: 'cloud-provider-extraction-migration',
  resourceLock: 'leases',
  controllerLeaders: [
    { name: 'route-controller', component: '*' },
    { name: 'service-controller', component: '*' },
    { name: 'cloud-node-lifecycle-controller', component: '*' },
  ],
};

/** --controllers as upstream stores it: aliases replaced by canonical names, '-' kept. */
function canonicalControllers(list: readonly string[]): string[] {
  return list.map((entry) => {
    const negated = entry.startsWith('-');
    const name = negated ? entry.slice(1) : entry;
    return `${negated ? '-' : ''}${CONTROLLER_ALIASES[name] ?? name}`;
  });
}

export function configz(o: Options): Record<string, unknown> {
  const d = formatGoDuration;
  return {
    [CONFIGZ_NAME]: {
      kind: 'CloudControllerManagerConfiguration',
      apiVersion: `${CONFIGZ_NAME}/v1alpha1`,
      Generic: {
        // Upstream leaves the insecure port fields at their zero defaults in a CCM.
        Port: 0,
        Address: '0.0.0.0',
        MinResyncPeriod: d(o.minResyncPeriodMs),
        ClientConnection: {
          kubeconfig: o.kubeconfig,
          acceptContentTypes: '',
          contentType: o.kubeApiContentType,
          qps: o.kubeApiQps,
          burst: o.kubeApiBurst,
        },
        ControllerStartInterval: d(o.controllerStartIntervalMs),
        LeaderElection: {
          leaderElect: o.leaderElect,
          leaseDuration: d(o.leaderElectLeaseDurationMs),
          renewDeadline: d(o.leaderElectRenewDeadlineMs),
          retryPeriod: d(o.leaderElectRetryPeriodMs),
          resourceLock: o.leaderElectResourceLock,
          resourceName: o.leaderElectResourceName,
          resourceNamespace: o.leaderElectResourceNamespace,
        },
        Controllers: canonicalControllers(o.controllers),
        Debugging: { enableProfiling: o.profiling, enableContentionProfiling: o.contentionProfiling },
        LeaderMigrationEnabled: o.enableLeaderMigration,
        LeaderMigration: o.enableLeaderMigration ? DEFAULT_LEADER_MIGRATION : { leaderName: '', resourceLock: '', controllerLeaders: null },
      },
      KubeCloudShared: {
        CloudProvider: { Name: o.cloudProvider, CloudConfigFile: o.cloudConfig },
        ExternalCloudVolumePlugin: o.externalCloudVolumePlugin,
        UseServiceAccountCredentials: o.useServiceAccountCredentials,
        AllowUntaggedCloud: o.allowUntaggedCloud,
        RouteReconciliationPeriod: d(o.routeReconciliationPeriodMs),
        NodeMonitorPeriod: d(o.nodeMonitorPeriodMs),
        ClusterName: o.clusterName,
        ClusterCIDR: o.clusterCIDR,
        AllocateNodeCIDRs: o.allocateNodeCIDRs,
        CIDRAllocatorType: o.cidrAllocatorType,
        ConfigureCloudRoutes: o.configureCloudRoutes,
        NodeSyncPeriod: d(o.nodeSyncPeriodMs),
      },
      NodeController: {
        ConcurrentNodeSyncs: o.concurrentNodeSyncs,
        ConcurrentNodeStatusUpdates: nodeStatusWorkers(o),
      },
      ServiceController: { ConcurrentServiceSyncs: o.concurrentServiceSyncs },
      NodeStatusUpdateFrequency: d(o.nodeStatusUpdateFrequencyMs),
      // A nil slice upstream when the flag is not given.
      Webhook: { Webhooks: o.givenFlags.has('webhooks') ? o.webhooks : null },
    },
  };
}

/** --concurrent-node-status-updates, or --concurrent-node-syncs when 0, as upstream's NodeControllerOptions.ApplyTo. */
export function nodeStatusWorkers(o: Pick<Options, 'concurrentNodeStatusUpdates' | 'concurrentNodeSyncs'>): number {
  return o.concurrentNodeStatusUpdates > 0 ? o.concurrentNodeStatusUpdates : o.concurrentNodeSyncs;
}
