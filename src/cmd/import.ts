import { writeFileSync } from 'node:fs';
import { parseAllDocuments } from 'yaml';
import { COMPATIBILITY_SOURCES, type Compatibility } from '../lb/compatibility.ts';
import { loadKubeConfig } from '../app/kubeconfig.ts';
import { isNotFound } from '../kube/errors.ts';
import { BunKubeTransport, type KubeTransport } from '../kube/transport.ts';
import { EXIT_FAILURE, EXIT_INVALID_INPUT, EXIT_OK } from '../options/exit-codes.ts';
import { readBoundedFileSync } from '../util/bounded-file.ts';
import { errorMessage } from '../util/errors.ts';
import { version } from '../version.ts';
import { importCilium } from '../migrate/cilium.ts';
import { checkImported, renderImported, type ImportResult, type ManifestObject } from '../migrate/imported.ts';
import { importKubeVip } from '../migrate/kube-vip.ts';
import { importMetalLB } from '../migrate/metallb.ts';

/**
 * `edge-ccm import metallb|kube-vip|cilium [-f FILE]... [--kubeconfig FILE] [--namespace NS] [-o FILE]`:
 * reads another address manager's pools (from the cluster, or from manifest files with -f) and
 * writes the equivalent `loadBalancer` section, with `compatibility` on and a comment listing
 * every feature that was not converted (also told on stderr). Exit 0; 2 on bad usage, unreadable
 * files, or pools our validator refuses (the section is still written, to be fixed by hand);
 * 1 when the cluster cannot be read.
 */

export const IMPORT_USAGE = 'usage: edge-ccm import metallb|kube-vip|cilium [-f FILE]... [--kubeconfig FILE] [--namespace NS] [-o FILE]';

/** Manifests read with -f: as large as a config file may be. */
const MAX_MANIFEST_BYTES = 4 * 1024 * 1024;

interface Listing {
  /** GET path of a list, or of one object (`one`). */
  path: string;
  kind: string;
  one?: boolean;
}

/** What each source keeps its pools in (and the objects listed as not converted). */
function listings(source: Compatibility, namespace: string | undefined): Listing[][] {
  switch (source) {
    case 'metallb':
      return [
        [{ path: '/apis/metallb.io/v1beta1/ipaddresspools', kind: 'IPAddressPool' }],
        [{ path: '/apis/metallb.io/v1beta1/l2advertisements', kind: 'L2Advertisement' }],
        [{ path: '/apis/metallb.io/v1beta1/bgpadvertisements', kind: 'BGPAdvertisement' }],
        [{ path: '/apis/metallb.io/v1beta2/bgppeers', kind: 'BGPPeer' }, { path: '/apis/metallb.io/v1beta1/bgppeers', kind: 'BGPPeer' }],
        [{ path: '/apis/metallb.io/v1beta1/bfdprofiles', kind: 'BFDProfile' }],
        [{ path: '/apis/metallb.io/v1beta1/communities', kind: 'Community' }],
        // MetalLB before 0.13.
        [{ path: `/api/v1/namespaces/${namespace ?? 'metallb-system'}/configmaps/config`, kind: 'ConfigMap', one: true }],
      ];
    case 'kube-vip':
      return [[{ path: `/api/v1/namespaces/${namespace ?? 'kube-system'}/configmaps/kubevip`, kind: 'ConfigMap', one: true }]];
    case 'cilium':
      // The first version the API server serves (v2 since Cilium 1.18).
      return [[
        { path: '/apis/cilium.io/v2/ciliumloadbalancerippools', kind: 'CiliumLoadBalancerIPPool' },
        { path: '/apis/cilium.io/v2alpha1/ciliumloadbalancerippools', kind: 'CiliumLoadBalancerIPPool' },
      ]];
  }
}

export function convert(source: Compatibility, objects: readonly ManifestObject[]): ImportResult {
  switch (source) {
    case 'metallb': return importMetalLB(objects);
    case 'kube-vip': return importKubeVip(objects);
    case 'cilium': return importCilium(objects);
  }
}

/** Every object of the listings; a type the API server does not serve (CRD not installed) is none. */
export async function readFromCluster(transport: KubeTransport, source: Compatibility, namespace?: string): Promise<ManifestObject[]> {
  const out: ManifestObject[] = [];
  for (const alternatives of listings(source, namespace)) {
    for (const l of alternatives) {
      try {
        const body = await transport.request<ManifestObject & { items?: ManifestObject[] }>({ method: 'GET', path: l.path });
        const items = l.one ? [body] : body.items ?? [];
        out.push(...items.map((o) => ({ ...o, kind: o.kind ?? l.kind })));
        break;
      } catch (e) {
        if (!isNotFound(e)) throw e;
      }
    }
  }
  return out;
}

/** The objects of manifest files: YAML documents, `kind: List` items unpacked. */
export function readManifests(texts: { name: string; text: string }[]): ManifestObject[] {
  const out: ManifestObject[] = [];
  for (const { name, text } of texts) {
    for (const doc of parseAllDocuments(text)) {
      if (doc.errors.length) throw new Error(`${name}: ${doc.errors[0]!.message}`);
      const o = doc.toJS() as (ManifestObject & { items?: ManifestObject[] }) | null;
      if (!o) continue;
      out.push(...(o.kind === 'List' || o.kind?.endsWith('List') ? o.items ?? [] : [o]));
    }
  }
  return out;
}

export async function runImport(argv: string[]): Promise<number> {
  const files: string[] = [];
  let kubeconfig: string | undefined;
  let namespace: string | undefined;
  let output: string | undefined;
  const positional: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const [flag, inline] = a.startsWith('--') && a.includes('=') ? [a.slice(0, a.indexOf('=')), a.slice(a.indexOf('=') + 1)] : [a, undefined];
    const value = () => inline ?? argv[++i];
    if (flag === '-f' || flag === '--filename') files.push(value() ?? '');
    else if (flag === '--kubeconfig') kubeconfig = value();
    else if (flag === '-n' || flag === '--namespace') namespace = value();
    else if (flag === '-o' || flag === '--output') output = value();
    else if (flag === '-h' || flag === '--help') {
      console.log(IMPORT_USAGE);
      return EXIT_OK;
    } else if (flag.startsWith('-')) {
      console.error(`error: import: unknown flag ${flag}\n${IMPORT_USAGE}`);
      return EXIT_INVALID_INPUT;
    } else positional.push(a);
  }
  const source = positional[0] as Compatibility | undefined;
  if (positional.length !== 1 || !COMPATIBILITY_SOURCES.includes(source!)) {
    console.error(`error: import: name one source: ${COMPATIBILITY_SOURCES.join(', ')}${positional.length ? ` (got ${positional.join(' ')})` : ''}\n${IMPORT_USAGE}`);
    return EXIT_INVALID_INPUT;
  }
  if (files.some((f) => !f)) {
    console.error(`error: import: -f needs a file name\n${IMPORT_USAGE}`);
    return EXIT_INVALID_INPUT;
  }

  let objects: ManifestObject[];
  let from: string;
  if (files.length) {
    try {
      objects = readManifests(files.map((name) => ({ name, text: readBoundedFileSync(name, MAX_MANIFEST_BYTES) })));
    } catch (e) {
      console.error(`error: import: -f: ${errorMessage(e)}`);
      return EXIT_INVALID_INPUT;
    }
    from = files.join(', ');
  } else {
    let transport: BunKubeTransport;
    try {
      transport = new BunKubeTransport(loadKubeConfig({ kubeconfig }), { userAgent: `edge-ccm/${version}/import` });
    } catch (e) {
      console.error(`error: import: ${errorMessage(e)}`);
      return EXIT_INVALID_INPUT;
    }
    try {
      objects = await readFromCluster(transport, source!, namespace);
    } catch (e) {
      console.error(`error: import: cannot read ${source}'s objects from ${transport.server}: ${errorMessage(e)}`);
      return EXIT_FAILURE;
    }
    from = `the cluster at ${transport.server}`;
  }

  const result = convert(source!, objects);
  const text = renderImported(result, from);
  if (output) {
    try {
      writeFileSync(output, text);
    } catch (e) {
      console.error(`error: import: -o: cannot write ${output}: ${errorMessage(e)}`);
      return EXIT_INVALID_INPUT;
    }
  } else process.stdout.write(text);
  for (const u of result.unmapped) console.error(`not converted: ${u}`);
  if (!result.pools.length) console.error(`warning: no ${source} pools found in ${from}`);
  const problems = checkImported(result);
  for (const p of problems) console.error(`error: the converted pools would be refused: ${p}`);
  return problems.length ? EXIT_INVALID_INPUT : EXIT_OK;
}
