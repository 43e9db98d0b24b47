/**
 * Orders two strings by their UTF-16 code units, as `Array.prototype.sort()` does without a
 * comparator: the order every sort of edge-ccm needs (the same on every node and every version,
 * for tables, keys and logs), never a language's.
 *
 * Why not `localeCompare`: it collates with ICU, whose tables and code a process then maps from
 * the executable: sorting 200 addresses every 100 ms in a compiled program costs 1.6 MiB more
 * resident with it than by code units (bench/runtime-modules.ts: +0.3 + 2.2 MiB anonymous and
 * file-backed against +0.2 + 0.7), on every node for the speaker. For the
 * strings sorted here (Kubernetes names and keys, addresses, timestamps of one format) both orders
 * agree but on IPv6's ':' against a digit and on upper against lower case.
 */
export function compareCodeUnits(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
