import { didYouMean } from '../util/did-you-mean.ts';

/**
 * Beyond upstream, whose --cloud-provider takes one name: several providers in one process
 * (`--cloud-provider=static,proxmox`), each with its own file (`--cloud-config` as
 * `static=/etc/edge-ccm/static.yaml,proxmox=/etc/edge-ccm/proxmox.yaml`). One name with one
 * path is read as ever. Both the daemon and `edge-ccm validate` read the flags through here.
 */

/** The names of --cloud-provider, in order; throws one message listing every problem. */
export function parseProviderNames(text: string, known: readonly string[]): string[] {
  const names = text.split(',').map((n) => n.trim());
  const problems: string[] = [];
  const seen = new Set<string>();
  names.forEach((name, i) => {
    if (name === '') problems.push(`name ${i + 1} of "${text}" is empty`);
    else if (!known.includes(name)) problems.push(`unknown cloud provider "${name}"${didYouMean(name, known)} (known: ${known.join(', ')})`);
    else if (seen.has(name)) problems.push(`"${name}" is named twice`);
    seen.add(name);
  });
  if (problems.length > 0) throw new Error(problems.map((p) => `--cloud-provider: ${p}`).join('\n'));
  return names;
}

/**
 * Each provider's file from --cloud-config: for one provider the flag is its path (or
 * `NAME=PATH`); for several, `NAME=PATH` pairs joined by commas, a provider without a pair having
 * no file. Throws one message listing every problem.
 */
export function parseCloudConfigs(text: string, names: readonly string[]): Map<string, string | undefined> {
  const files = new Map<string, string | undefined>(names.map((n) => [n, undefined]));
  if (text.trim() === '') return files;
  const pairs = text.split(',').map((p) => p.trim());
  const named = pairs.map((p) => /^([a-z][a-z0-9-]*)=(.+)$/.exec(p));
  if (names.length === 1 && (pairs.length > 1 || !named[0] || named[0][1] !== names[0])) {
    files.set(names[0]!, text);
    return files;
  }
  const problems: string[] = [];
  const given = new Set<string>();
  pairs.forEach((pair, i) => {
    const m = named[i];
    if (!m) {
      problems.push(`"${pair}" is not NAME=PATH: with several providers each file names its provider (e.g. ${names.map((n) => `${n}=/etc/edge-ccm/${n}.yaml`).join(',')})`);
    } else if (!names.includes(m[1]!)) {
      problems.push(`"${m[1]}" is not among the providers of --cloud-provider (${names.join(', ')})`);
    } else if (given.has(m[1]!)) {
      problems.push(`"${m[1]}" is given two files`);
    } else {
      given.add(m[1]!);
      files.set(m[1]!, m[2]!);
    }
  });
  if (problems.length > 0) throw new Error(problems.map((p) => `--cloud-config: ${p}`).join('\n'));
  return files;
}
