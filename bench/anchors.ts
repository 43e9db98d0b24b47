import { resolve } from 'node:path';

/**
 * The anchors of issue 38's benches, MetalLB's speaker and kube-vip: built from their Go modules
 * by scripts/install-anchors.sh the first time (about 10 minutes on 2 cores), found in its cache
 * after. The script holds the versions; a bench's --metallb=/--kube-vip= option wins over this.
 */
export interface Anchors {
  metallbSpeaker: string;
  metallbCrds: string;
  metallbSrc: string;
  kubeVip: string;
  kubeVipSrc: string;
  versions: { metallb: string; kubeVip: string };
}

const SCRIPT = resolve(import.meta.dir, '../scripts/install-anchors.sh');
let built: Anchors | undefined;

export function anchors(): Anchors {
  if (built) return built;
  const run = Bun.spawnSync(['bash', SCRIPT], { stdout: 'pipe', stderr: 'inherit' });
  const last = run.stdout.toString().trim().split('\n').at(-1) ?? '';
  if (run.exitCode !== 0) throw new Error(`bash ${SCRIPT} failed (exit ${run.exitCode}): the anchors could not be built; its messages are above`);
  built = JSON.parse(last) as Anchors;
  return built;
}
