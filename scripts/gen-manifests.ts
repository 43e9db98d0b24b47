/**
 * Writes the raw manifests in deploy/kubernetes from the Helm chart (deploy/helm/edge-ccm), so
 * the two are never kept by hand twice: each file is `helm template` of some of the chart's
 * templates with the default values (an opt-in file with its own switch on), release edge-ccm in
 * kube-system. Also copies the alert rules (docs/observability/edge-ccm.rules.yaml) into the
 * chart, whose PrometheusRule template reads them from there (a chart sees only its own files).
 * Usage: scripts/gen-manifests. test/integration/helm-chart.test.ts fails while a committed file
 * differs from what this would write.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { CHART_DIR, helm } from './helm.ts';

const ROOT = resolve(import.meta.dir, '..');
export const MANIFESTS_DIR = join(ROOT, 'deploy/kubernetes');
const RULES_SOURCE = join(ROOT, 'docs/observability/edge-ccm.rules.yaml');
const RULES_IN_CHART = join(CHART_DIR, 'files/edge-ccm.rules.yaml');

interface Manifest {
  file: string;
  templates: string[];
  /** --set flags on top of the defaults: the opt-in file's own switch. */
  set?: string[];
  /** What the file is and how to use it, below the generated-file note (the templates say the rest); a function when it renders the chart. */
  about?: string | (() => string);
  /** A file of the chart copied as it is (its crds/ folder, which helm template leaves out), instead of templates. */
  chartFile?: string;
}

/** The key speaker.yaml's patch example names: the peer passwordFile of docs/networking/bgp.md's example. */
export const SPEAKER_CREDENTIAL_EXAMPLE = 'bgp-router-1';

interface Named { name: string }
interface SpeakerDaemonSet { spec: { template: { spec: { containers: (Named & { env?: Named[]; volumeMounts?: Named[] })[]; volumes?: Named[] } } } }

/**
 * What the chart's speaker.credentials adds to the speaker DaemonSet (volume, mount, env), as a
 * strategic merge patch of the plain speaker.yaml: taken from two renders of the chart, with and
 * without the keys, so the patch the header shows cannot drift from what the chart does.
 */
export function speakerCredentialsPatch(keys: string[]): object {
  const render = (set: string[]): SpeakerDaemonSet => parseYaml(helm([
    'template', RELEASE, CHART_DIR, '--namespace', NAMESPACE, '--show-only', 'templates/speaker-daemonset.yaml', '--set', 'speaker.enabled=true', ...set.flatMap((x) => ['--set', x]),
  ])) as SpeakerDaemonSet;
  const before = render([]).spec.template.spec;
  const after = render([`speaker.credentials={${keys.join(',')}}`]).spec.template.spec;
  const added = <T extends Named>(was: T[] = [], is: T[] = []) => is.filter((x) => !was.some((y) => y.name === x.name));
  return {
    spec: {
      template: {
        spec: {
          containers: after.containers.map((c) => {
            const old = before.containers.find((x) => x.name === c.name);
            return { name: c.name, env: added(old?.env, c.env), volumeMounts: added(old?.volumeMounts, c.volumeMounts) };
          }),
          volumes: added(before.volumes, after.volumes),
        },
      },
    },
  };
}

export const MANIFESTS: Manifest[] = [
  {
    file: 'rbac.yaml',
    templates: ['rbac.yaml'],
  },
  {
    file: 'crds.yaml',
    templates: [],
    chartFile: 'crds/edge-ccm.io.yaml',
  },
  {
    file: 'deployment.yaml',
    templates: ['deployment.yaml', 'poddisruptionbudget.yaml'],
    about: [
      'Two replicas on control-plane nodes, one active at a time through the Lease',
      'kube-system/cloud-controller-manager, and their PodDisruptionBudget. Needs rbac.yaml, a',
      'ConfigMap holding the cloud config and, when the config names files (a Redfish passwordFile,',
      'a Proxmox tokenSecretFile or caFile, as ${CREDENTIALS_DIRECTORY}/NAME), a Secret holding them,',
      'one key per file:',
      '  kubectl -n kube-system create configmap edge-ccm-cloud-config \\',
      '    --from-file=cloud-config.yaml=examples/inventory.yaml',
      '  kubectl -n kube-system create secret generic edge-ccm-secrets \\',
      '    --from-file=bmc-password=./bmc-password',
      '  kubectl apply -k deploy/kubernetes        # rbac.yaml + this file',
      'test/integration/deploy-kubernetes.test.ts applies it to a real API server and checks it, and',
      'test/integration/deploy-scratch-image.test.ts runs the image with exactly these args in-cluster',
      'style (service-account token, KUBERNETES_SERVICE_HOST) under rbac.yaml.',
    ].join('\n'),
  },
  {
    file: 'rbac-service-account-credentials.yaml',
    templates: ['rbac-service-account-credentials.yaml'],
    set: ['useServiceAccountCredentials=true'],
  },
  {
    file: 'rbac-kube-vip.yaml',
    templates: ['rbac-kube-vip.yaml'],
    set: ['kubeVip.enabled=true'],
  },
  {
    file: 'rbac-node-ipam.yaml',
    templates: ['rbac-node-ipam.yaml'],
    set: ['nodeIPAM.enabled=true', 'nodeIPAM.cidrAllocatorType=CloudAllocator'],
  },
  {
    file: 'rbac-node-csr-approval.yaml',
    templates: ['rbac-node-csr-approval.yaml'],
    set: ['csrApproval.enabled=true'],
  },
  {
    file: 'speaker.yaml',
    templates: ['speaker-rbac.yaml', 'speaker-daemonset.yaml'],
    set: ['speaker.enabled=true'],
    about: () => [
      'The L2 speaker (docs/networking/l2.md): its service account and role, and the DaemonSet that',
      'answers ARP/NDP for the addresses of announce: l2 pools on every node. Needs the ConfigMap of',
      'deployment.yaml and a Secret holding the heartbeat key (at least 32 bytes):',
      '  kubectl -n kube-system create secret generic edge-ccm-speaker-key \\',
      '    --from-literal=key="$(head -c 48 /dev/urandom | base64 -w0)"',
      '  kubectl apply -f deploy/kubernetes/speaker.yaml',
      'With bgp.loadBalancers.announceFrom: nodes (docs/networking/bgp.md) every speaker opens its own',
      "BGP sessions and reads each peer's passwordFile: give it only those keys of edge-ccm-secrets",
      `(here ${SPEAKER_CREDENTIAL_EXAMPLE}; the chart's speaker.credentials), never the whole Secret:`,
      `  kubectl -n kube-system patch daemonset edge-ccm-speaker -p '${JSON.stringify(speakerCredentialsPatch([SPEAKER_CREDENTIAL_EXAMPLE]))}'`,
    ].join('\n'),
  },
];

export const RELEASE = 'edge-ccm';
export const NAMESPACE = 'kube-system';

/** The file's text as this script writes it. */
export function renderManifest(m: Manifest): string {
  if (m.chartFile) {
    const header = ['Generated by scripts/gen-manifests from the Helm chart deploy/helm/edge-ccm: do not edit, change', `the chart. A copy of its ${m.chartFile}.`, ''].map((l) => (l ? `# ${l}` : '#'));
    return `${header.join('\n')}\n${readFileSync(join(CHART_DIR, m.chartFile), 'utf8').trimEnd()}\n`;
  }
  const args = ['template', RELEASE, CHART_DIR, '--namespace', NAMESPACE, ...m.templates.flatMap((t) => ['--show-only', `templates/${t}`])];
  for (const s of m.set ?? []) args.push('--set', s);
  const body = helm(args)
    .split('\n')
    .filter((line) => !line.startsWith('# Source: '))
    .join('\n')
    .replace(/^---\n/, '')
    .trimEnd();
  const about = typeof m.about === 'function' ? m.about() : m.about;
  const header = [
    'Generated by scripts/gen-manifests from the Helm chart deploy/helm/edge-ccm: do not edit, change',
    `the chart. helm template, release ${RELEASE} in ${NAMESPACE}, default values${m.set ? ` and ${m.set.join(', ')}` : ''}.`,
    '',
    ...(about ? [...about.split('\n'), ''] : []),
  ].map((l) => (l ? `# ${l}` : '#'));
  return `${header.join('\n')}\n${body}\n`;
}

/** What the chart's copy of the alert rules must hold: the docs' file, when there is one. */
export function rulesForChart(): string | undefined {
  return existsSync(RULES_SOURCE) ? readFileSync(RULES_SOURCE, 'utf8') : undefined;
}

if (import.meta.main) {
  const rules = rulesForChart();
  if (rules !== undefined) {
    writeFileSync(RULES_IN_CHART, rules);
    console.log(`wrote ${RULES_IN_CHART}`);
  }
  for (const m of MANIFESTS) {
    const path = join(MANIFESTS_DIR, m.file);
    writeFileSync(path, renderManifest(m));
    console.log(`wrote ${path}`);
  }
}
