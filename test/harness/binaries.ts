import { existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

/**
 * Where scripts/build-control-plane.sh leaves kube-apiserver and etcd. The versions are read from
 * the script's own default lines (honouring the same environment overrides), so they are defined
 * in one place and the tests never build anything themselves.
 */

const BUILD_SCRIPT = join(import.meta.dir, '../../scripts/build-control-plane.sh');

export const CONTROL_PLANE_BINARIES = ['etcd', 'kube-apiserver'] as const;
export type ControlPlaneBinary = (typeof CONTROL_PLANE_BINARIES)[number];

/** Reads `NAME="${ENV_VAR:-default}"` from the build script and applies the override the script would. */
function scriptVersion(name: 'K8S_VERSION' | 'ETCD_VERSION', script: string): string {
  const match = new RegExp(`^${name}="\\$\\{(\\w+):-([^}]+)\\}"`, 'm').exec(script);
  if (!match?.[1] || !match[2]) throw new Error(`${BUILD_SCRIPT} has no ${name}="\${VAR:-default}" line`);
  return process.env[match[1]] || match[2];
}

export function controlPlaneVersions(): { k8s: string; etcd: string } {
  const script = readFileSync(BUILD_SCRIPT, 'utf8');
  return { k8s: scriptVersion('K8S_VERSION', script), etcd: scriptVersion('ETCD_VERSION', script) };
}

/** Same resolution as the script: EDGE_CCM_CACHE, else $XDG_CACHE_HOME/edge-ccm, else ~/.cache/edge-ccm. */
export function controlPlaneBinDir(): string {
  const cacheRoot = process.env.EDGE_CCM_CACHE || join(process.env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'edge-ccm');
  const { k8s, etcd } = controlPlaneVersions();
  return join(cacheRoot, 'control-plane', `k8s-${k8s}-etcd-${etcd}`);
}

/** APISERVER_RECIPE="..." from the build script: how the cached kube-apiserver must have been built. */
function apiServerRecipe(): string {
  const match = /^APISERVER_RECIPE="([^"]+)"/m.exec(readFileSync(BUILD_SCRIPT, 'utf8'));
  if (!match?.[1]) throw new Error(`${BUILD_SCRIPT} has no APISERVER_RECIPE="..." line`);
  return match[1];
}

/** The one-line install hint when a binary is missing or outdated, or undefined when both are good. */
export function missingBinaryMessage(dir = controlPlaneBinDir()): string | undefined {
  const install = 'run `bash scripts/install.sh` (builds it from its Go module)';
  // kube-apiserver first: it is the one that takes long to build, so the one users miss.
  for (const name of [...CONTROL_PLANE_BINARIES].reverse()) {
    if (!existsSync(join(dir, name))) return `${name} not found in ${dir}: ${install}`;
  }
  const recipe = join(dir, 'kube-apiserver.recipe');
  if (!existsSync(recipe) || readFileSync(recipe, 'utf8').trim() !== apiServerRecipe()) {
    return `kube-apiserver in ${dir} was built by an older recipe of scripts/build-control-plane.sh: ${install}`;
  }
  return undefined;
}

/** Paths of both binaries; throws the install hint when one is missing. */
export function controlPlaneBinaries(): Record<ControlPlaneBinary, string> {
  const dir = controlPlaneBinDir();
  const missing = missingBinaryMessage(dir);
  if (missing) throw new Error(missing);
  return { etcd: join(dir, 'etcd'), 'kube-apiserver': join(dir, 'kube-apiserver') };
}

/** What a cluster of real nodes runs besides etcd and kube-apiserver (`build-control-plane.sh cluster`). */
export const CLUSTER_BINARIES = ['kubelet', 'kube-proxy', 'kube-scheduler', 'kube-controller-manager', 'kubectl'] as const;
export type ClusterBinary = ControlPlaneBinary | (typeof CLUSTER_BINARIES)[number];

/** Paths of every binary a real cluster runs; throws the build command when one is missing. */
export function clusterBinaries(): Record<ClusterBinary, string> {
  const base = controlPlaneBinaries();
  const dir = controlPlaneBinDir();
  const missing = CLUSTER_BINARIES.filter((name) => !existsSync(join(dir, name)));
  if (missing.length > 0) {
    throw new Error(`${missing.join(', ')} not found in ${dir}: run \`bash scripts/install.sh\` (or \`bash scripts/build-control-plane.sh cluster\`: builds them from the same Go module, about 11 minutes once on 2 cores)`);
  }
  return { ...base, ...Object.fromEntries(CLUSTER_BINARIES.map((name) => [name, join(dir, name)])) } as Record<ClusterBinary, string>;
}
