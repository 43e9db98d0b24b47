// The module, not the package index: the index also loads client-node's watch, informer, cp
// (tar), attach/exec (websockets) and metrics, which nothing here uses (BENCHMARKS.md run 8).
// Other modules take KubeConfig from here.
import { KubeConfig } from '@kubernetes/client-node/dist/config.js';
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { delimiter, join } from 'node:path';

export { KubeConfig };

/**
 * The client configuration as upstream's clientcmd.BuildConfigFromFlags: --kubeconfig (and
 * --master overriding its server), else the in-cluster service account, else the default
 * kubeconfig locations. The service-account token is re-read as it rotates (client-node's
 * token-file authenticator, refreshed by the transport).
 */
export function loadKubeConfig(opts: { kubeconfig?: string; master?: string; /** The flag that named the file, for messages. */ flag?: string }): KubeConfig {
  const kc = new KubeConfig();
  if (opts.kubeconfig) {
    const flag = opts.flag ?? '--kubeconfig';
    const missing = missingKubeconfigFiles({ [flag]: opts.kubeconfig });
    if (missing.length) throw new Error(missing[0]);
    try {
      kc.loadFromFile(opts.kubeconfig);
    } catch (e) {
      throw new Error(`${flag}: cannot load ${opts.kubeconfig}: ${e instanceof Error ? e.message : String(e)}`);
    }
  } else if (process.env.KUBERNETES_SERVICE_HOST && process.env.KUBERNETES_SERVICE_PORT) {
    kc.loadFromCluster();
  } else if (opts.master) {
    kc.loadFromClusterAndUser({ name: 'master', server: opts.master, skipTLSVerify: false }, { name: 'anonymous' });
  } else {
    // client-node's loadFromDefault falls back to http://localhost:8080, which is never what a
    // controller manager wants: say what was looked for instead, as upstream refuses an empty config.
    const missing = defaultKubeconfigMissing();
    if (missing) throw new Error(missing);
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

/** Why the default locations hold no kubeconfig (KUBECONFIG, then ~/.kube/config), or undefined when one is there. */
function defaultKubeconfigMissing(): string | undefined {
  const env = process.env.KUBECONFIG;
  if (env) {
    const files = env.split(delimiter).filter((p) => p !== '');
    return files.some((p) => existsSync(p)) ? undefined : `KUBECONFIG: none of its files exists (${env})`;
  }
  const home = join(process.env.HOME || homedir(), '.kube', 'config');
  if (existsSync(home)) return undefined;
  return (
    `no Kubernetes API server to talk to: --kubeconfig and --master not given, KUBECONFIG not set, ${home} not found, ` +
    'and not in a cluster (KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT not set)'
  );
}

/**
 * The kubeconfig files named by flags (flag -> path; empty: not given) that do not exist, one
 * "FLAG: file PATH does not exist" each, so every missing file is reported before anything starts.
 */
export function missingKubeconfigFiles(files: Record<string, string | undefined>): string[] {
  return Object.entries(files)
    .filter(([, path]) => path && !existsSync(path))
    .map(([flag, path]) => `${flag}: file ${path} does not exist`);
}
