// The module, not the package index: the index also loads client-node's watch, informer, cp
// (tar), attach/exec (websockets) and metrics, which nothing here uses (BENCHMARKS.md run 8).
// Other modules take KubeConfig from here. The per-node processes (speaker) read theirs with
// src/app/kubeconfig-reader.ts instead: this module's import alone loads client-node's generated
// API (765 modules, 0.5 MB of code); the source (flag, in-cluster, default) is chosen by
// src/app/kubeconfig-source.ts for both.
import { KubeConfig } from '@kubernetes/client-node/dist/config.js';
import { kubeconfigSource } from './kubeconfig-source.ts';

export { KubeConfig };
export { missingKubeconfigFiles } from './kubeconfig-source.ts';

/**
 * The client configuration as upstream's clientcmd.BuildConfigFromFlags: --kubeconfig (and
 * --master overriding its server), else the in-cluster service account, else the default
 * kubeconfig locations. The service-account token is re-read as it rotates (client-node's
 * token-file authenticator, refreshed by the transport).
 */
export function loadKubeConfig(opts: { kubeconfig?: string; master?: string; /** The flag that named the file, for messages. */ flag?: string }): KubeConfig {
  const kc = new KubeConfig();
  const source = kubeconfigSource(opts);
  switch (source.kind) {
    case 'file':
      try {
        kc.loadFromFile(source.path);
      } catch (e) {
        throw new Error(`${source.flag}: cannot load ${source.path}: ${e instanceof Error ? e.message : String(e)}`);
      }
      break;
    case 'in-cluster':
      kc.loadFromCluster();
      break;
    case 'master':
      kc.loadFromClusterAndUser({ name: 'master', server: opts.master!, skipTLSVerify: false }, { name: 'anonymous' });
      break;
    case 'default':
      kc.loadFromDefault();
  }
  if (opts.master) {
    const current = kc.getCurrentCluster();
    if (!current) throw new Error('kubeconfig has no current cluster to apply --master to');
    // Clusters are plain objects in client-node: replace the server of the current one.
    const clusters = kc.getClusters().map((c) => (c.name === current.name ? { ...c, server: opts.master! } : c));
    kc.clusters = clusters;
  }
  if (!kc.getCurrentCluster()) throw new Error('no Kubernetes API server configured: give --kubeconfig or --master, or run in a cluster');
  return kc;
}
