import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { delimiter, join } from 'node:path';

/**
 * Where the API client's configuration comes from, as upstream's clientcmd.BuildConfigFromFlags:
 * the file a flag names, else the in-cluster service account, else --master alone, else the
 * default locations (every existing file of KUBECONFIG, else ~/.kube/config). Shared by both
 * readers: client-node's KubeConfig (src/app/kubeconfig.ts, the controller manager) and the
 * small one of the per-node processes (src/app/kubeconfig-reader.ts).
 */
export type KubeconfigSource =
  | { kind: 'file'; path: string; flag: string }
  | { kind: 'in-cluster'; host: string; port: string }
  | { kind: 'master' }
  | { kind: 'default'; paths: string[] };

export function kubeconfigSource(opts: { kubeconfig?: string; master?: string; flag?: string }, env: NodeJS.ProcessEnv = process.env): KubeconfigSource {
  if (opts.kubeconfig) {
    const flag = opts.flag ?? '--kubeconfig';
    const missing = missingKubeconfigFiles({ [flag]: opts.kubeconfig });
    if (missing.length) throw new Error(missing[0]);
    return { kind: 'file', path: opts.kubeconfig, flag };
  }
  if (env.KUBERNETES_SERVICE_HOST && env.KUBERNETES_SERVICE_PORT) return { kind: 'in-cluster', host: env.KUBERNETES_SERVICE_HOST, port: env.KUBERNETES_SERVICE_PORT };
  if (opts.master) return { kind: 'master' };
  // client-node's loadFromDefault falls back to http://localhost:8080, which is never what a
  // controller manager wants: say what was looked for instead, as upstream refuses an empty config.
  if (env.KUBECONFIG) {
    const paths = env.KUBECONFIG.split(delimiter).filter((p) => p !== '' && existsSync(p));
    if (!paths.length) throw new Error(`KUBECONFIG: none of its files exists (${env.KUBECONFIG})`);
    return { kind: 'default', paths };
  }
  const home = join(env.HOME || homedir(), '.kube', 'config');
  if (existsSync(home)) return { kind: 'default', paths: [home] };
  throw new Error(
    `no Kubernetes API server to talk to: --kubeconfig and --master not given, KUBECONFIG not set, ${home} not found, ` +
      'and not in a cluster (KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT not set)',
  );
}

/** The in-cluster server URL as client-go's rest.InClusterConfig (and client-node): https, IPv6 bracketed; client-node's http for ports 80, 8080, 8001. */
export function inClusterServer(host: string, port: string): string {
  const scheme = port === '80' || port === '8080' || port === '8001' ? 'http' : 'https';
  return `${scheme}://${host.includes(':') && !host.startsWith('[') ? `[${host}]` : host}:${port}`;
}

/** The service account's files in a pod. */
export const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

/**
 * The kubeconfig files named by flags (flag -> path; empty: not given) that do not exist, one
 * "FLAG: file PATH does not exist" each, so every missing file is reported before anything starts.
 */
export function missingKubeconfigFiles(files: Record<string, string | undefined>): string[] {
  return Object.entries(files)
    .filter(([, path]) => path && !existsSync(path))
    .map(([flag, path]) => `${flag}: file ${path} does not exist`);
}
