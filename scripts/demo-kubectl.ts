/**
 * Which kubectl the demo can tell the user to run against the API server it started: one built
 * beside that API server (`bash scripts/build-control-plane.sh kubectl`), else the one on PATH if
 * it is within kubectl's supported skew (one minor version either way), else none, with how to
 * get one. The demo works without any.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { controlPlaneBinDir, controlPlaneVersions } from '../test/harness/binaries.ts';

export type KubectlChoice = { command: string; note: string } | { command: undefined; note: string };

/** The minor version of a kubectl's `version --client -o json` output ("32+" reads 32), or undefined. */
export function clientMinor(versionJson: string): number | undefined {
  try {
    const minor = (JSON.parse(versionJson) as { clientVersion?: { minor?: string } }).clientVersion?.minor;
    const n = Number.parseInt(minor ?? '', 10);
    return Number.isFinite(n) ? n : undefined;
  } catch {
    return undefined;
  }
}

/** The decision, given what is installed (separate from the lookups, so it is tested alone). */
export function chooseKubectl(k8sVersion: string, built: string | undefined, onPath: { minor: number | undefined } | undefined): KubectlChoice {
  const serverMinor = Number.parseInt(k8sVersion.split('.')[1] ?? '', 10);
  if (built) return { command: built, note: `kubectl ${k8sVersion}, built beside the API server` };
  const how = `bash scripts/build-control-plane.sh kubectl (builds kubectl ${k8sVersion} from the same Go module, about a minute once, cached beside the API server), or any kubectl v1.${serverMinor - 1} to v1.${serverMinor + 1}`;
  if (onPath?.minor !== undefined && Math.abs(onPath.minor - serverMinor) <= 1) return { command: 'kubectl', note: `the kubectl on PATH (v1.${onPath.minor}, within one minor version of the API server ${k8sVersion})` };
  const found = onPath ? `the kubectl on PATH is ${onPath.minor === undefined ? 'of an unknown version' : `v1.${onPath.minor}`}, outside the supported skew of the API server ${k8sVersion}` : `no kubectl on PATH`;
  return { command: undefined, note: `${found}; to get one: ${how}` };
}

/** Looks at the cache and PATH and decides. */
export function findKubectl(): KubectlChoice {
  const { k8s } = controlPlaneVersions();
  const builtPath = join(controlPlaneBinDir(), 'kubectl');
  const built = existsSync(builtPath) ? builtPath : undefined;
  let onPath: { minor: number | undefined } | undefined;
  if (!built && Bun.which('kubectl')) {
    const run = Bun.spawnSync(['kubectl', 'version', '--client', '-o', 'json'], { stdout: 'pipe', stderr: 'ignore' });
    onPath = { minor: clientMinor(run.stdout.toString()) };
  }
  return chooseKubectl(k8s, built, onPath);
}
