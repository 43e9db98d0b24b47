/**
 * The bounds on what a provider's config file may make edge-ccm read and hold, in one place
 * (docs/providers/static.md, "Input limits", says them to operators).
 */

/** The --cloud-config file (the app reads it at start, the providers on each change). */
export { MAX_CONFIG_FILE_BYTES } from '../cloud/config-file.ts';

/** Each file the config names: passwordFile, tokenSecretFile, caFile (a CA bundle is ~200 KiB). */
export const MAX_REFERENCED_FILE_BYTES = 1024 * 1024;

/**
 * Any string in the file, key or value (file paths may be this long). Narrower Kubernetes
 * limits apply where a value becomes a name or label (the schemas').
 */
export const MAX_CONFIG_STRING_LENGTH = 4096;

/**
 * yaml's maxAliasCount (its default, said explicitly): alias uses weighted by the aliases inside
 * what they point at, so a 10-level alias bomb fails before it expands. Settings shared by many
 * machines belong in inventory.defaults, a site or a rack, not in anchors.
 */
export const MAX_YAML_ALIAS_COUNT = 100;

/** A Kubernetes object name (a DNS subdomain): node names. */
export const KUBERNETES_NAME_MAX_LENGTH = 253;

/** A namespace name (a DNS label). */
export const NAMESPACE_MAX_LENGTH = 63;

/** A string over MAX_CONFIG_STRING_LENGTH, in place of its text: the schema refuses it, nobody prints it. */
export class OversizedString {
  constructor(readonly length: number) {}
}

/** Where a string over the limit was: a value's path, or the mapping holding a key over the limit. */
export interface OversizedAt {
  path: (string | number)[];
  /** A key, not a value. */
  key: boolean;
  length: number;
}

/**
 * Replaces, in place, every string value over MAX_CONFIG_STRING_LENGTH in a parsed document by
 * an OversizedString, and drops every entry whose key is over it; returns where they were. So
 * a 50 MB value is reported once by its length, and never copied into messages.
 */
export function capStrings(input: unknown): OversizedAt[] {
  const found: OversizedAt[] = [];
  const visit = (node: unknown, path: (string | number)[]): unknown => {
    if (typeof node === 'string' && node.length > MAX_CONFIG_STRING_LENGTH) {
      found.push({ path, key: false, length: node.length });
      return new OversizedString(node.length);
    }
    // An alias makes a second path to an object already capped.
    if (node instanceof OversizedString) found.push({ path, key: false, length: node.length });
    else if (Array.isArray(node)) node.forEach((item, i) => (node[i] = visit(item, [...path, i])));
    else if (node !== null && typeof node === 'object') {
      const record = node as Record<string, unknown>;
      for (const key of Object.keys(record)) {
        if (key.length > MAX_CONFIG_STRING_LENGTH) {
          found.push({ path, key: true, length: key.length });
          delete record[key];
        } else record[key] = visit(record[key], [...path, key]);
      }
    }
    return node;
  };
  visit(input, []);
  return found;
}
