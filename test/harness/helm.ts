import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CHART_DIR, helm } from '../../scripts/helm.ts';
import { tempDir } from './ccm-process.ts';

/** The chart under deploy/helm, rendered or installed by the helm that scripts/install-test-deps.sh builds. */
export { CHART_DIR, helm, runHelm } from '../../scripts/helm.ts';

export interface ChartValues {
  release: string;
  namespace: string;
  /** Values on top of the chart's defaults (written as a values file, so types survive). */
  values?: Record<string, unknown>;
  /** Template file names under templates/ to render alone (helm template --show-only). */
  showOnly?: string[];
}

let valuesDir: string | undefined;
let valuesFiles = 0;

/** A values file holding `values` (JSON is YAML). */
export function valuesFile(values: Record<string, unknown>): string {
  valuesDir ??= tempDir('edge-ccm-helm-values-');
  const path = join(valuesDir, `values-${++valuesFiles}.json`);
  writeFileSync(path, JSON.stringify(values));
  return path;
}

/** `helm template` of the chart: the manifests as one YAML stream; throws with helm's message. */
export function helmTemplate(opts: ChartValues): string {
  return helm([
    'template', opts.release, CHART_DIR, '--namespace', opts.namespace,
    '--values', valuesFile(opts.values ?? {}),
    ...(opts.showOnly ?? []).flatMap((t) => ['--show-only', `templates/${t}`]),
  ]);
}
