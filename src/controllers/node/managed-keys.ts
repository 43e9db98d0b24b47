import type { V1Node } from '@kubernetes/client-node';

/**
 * How the node controller remembers what it set on a node, so it later changes or removes only
 * that and never a key someone else set: an annotation listing the keys, sorted and comma
 * separated (label, annotation and taint keys hold no commas; a taint is listed as KEY:EFFECT).
 * One mechanism for the provider's additional labels (label-resync.ts) and for what node rules
 * set (rules-sync.ts), each kind under its own annotation.
 */

/** The keys `annotation` lists; undefined when the node does not have it. */
export function managedKeys(node: V1Node, annotation: string): Set<string> | undefined {
  const value = node.metadata?.annotations?.[annotation];
  if (value === undefined) return undefined;
  return new Set(value.split(',').map((k) => k.trim()).filter(Boolean));
}

/** The annotation value for a set of keys. */
export function formatManagedKeys(keys: Iterable<string>): string {
  return [...keys].sort().join(',');
}

/**
 * The annotation write that records `owned` under `annotation`: nothing when the node already
 * says so; a removal (null) when nothing is owned any more, so a node that never had rules keeps
 * no empty annotation.
 */
export function managedKeysUpdate(node: V1Node, annotation: string, owned: Iterable<string>): Record<string, string | null> {
  const value = formatManagedKeys(owned);
  const current = node.metadata?.annotations?.[annotation];
  if (value === '') return current === undefined ? {} : { [annotation]: null };
  return current === value ? {} : { [annotation]: value };
}
