/**
 * Orders two strings by their UTF-16 code units, as `Array.prototype.sort()` does without a
 * comparator: the order every sort of edge-ccm needs (the same on every node and every version,
 * for tables, keys and logs), never a language's.
 *
 * Why not `localeCompare`: it collates with ICU, whose tables and code a process then maps from
 * the executable: +1.6 MiB resident (file-backed) in a compiled program that sorts 200 addresses
 * once with it (session 16, bench/footprint's probe), on every node for the speaker. For the
 * strings sorted here (Kubernetes names and keys, addresses, timestamps of one format) both orders
 * agree but on IPv6's ':' against a digit and on upper against lower case.
 */
export function compareCodeUnits(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
