import type { V1Node, V1NodeAddress } from '@kubernetes/client-node';
import { ANNOTATION_PROVIDED_NODE_IP, isUninitialized, nodeAddresses } from '../../kube/node-helpers.ts';
import { parseIP, type IP } from '../../net/ip.ts';

/**
 * Which addresses a node should carry, from the provider's answer and the kubelet's node-IP
 * annotation (upstream: updateNodeAddress, updateNodeAddressesFromNodeIP,
 * GetNodeAddressesFromNodeIP, ParseNodeIPAnnotation, nodeAddressesChangeDetected).
 */

/**
 * An address as Go's ParseIPSloppy + net.IP compare it: no surrounding spaces, and an
 * IPv4-mapped IPv6 address is the IPv4 address (same family, equal).
 */
function parseNodeIP(text: string): IP | undefined {
  const ip = text === text.trim() ? parseIP(text) : undefined;
  if (ip?.family === 6 && ip.value >> 32n === 0xffffn) return { family: 4, value: ip.value & 0xffffffffn };
  return ip;
}

export class ProvidedNodeIPError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ProvidedNodeIPError';
  }
}

/** The kubelet's annotation: one IP or a dual-stack pair; anything else is an error. */
export function parseProvidedNodeIP(annotation: string): { text: string; ip: IP }[] {
  const parsed: { text: string; ip: IP }[] = [];
  for (const text of annotation.split(',')) {
    const ip = parseNodeIP(text);
    if (!ip) throw new ProvidedNodeIPError(`failed to parse node IP "${annotation}": could not parse "${text}"`);
    parsed.push({ text, ip });
  }
  const [first, second] = parsed.map((p) => p.ip);
  if (parsed.length > 2 || (first && second && first.family === second.family)) {
    throw new ProvidedNodeIPError(`failed to parse node IP "${annotation}": must contain either a single IP or a dual-stack pair of IPs`);
  }
  if (first && second && (first.value === 0n || second.value === 0n)) {
    throw new ProvidedNodeIPError(`failed to parse node IP "${annotation}": dual-stack node IP cannot include '0.0.0.0' or '::'`);
  }
  return parsed;
}

/**
 * Orders and filters the provider's addresses by the node IPs: addresses matching a node IP come
 * first and are the only ones kept of their type; the other types follow. Every node IP must be
 * among the provider's addresses.
 */
export function addressesMatchingNodeIPs(annotation: string, cloudAddresses: readonly V1NodeAddress[]): V1NodeAddress[] {
  const enforced: V1NodeAddress[] = [];
  const enforcedTypes = new Set<string>();
  for (const { text, ip: nodeIP } of parseProvidedNodeIP(annotation)) {
    let matched = false;
    for (const address of cloudAddresses) {
      const ip = parseNodeIP(address.address);
      if (ip && ip.family === nodeIP.family && ip.value === nodeIP.value) {
        enforced.push({ type: address.type, address: address.address });
        enforcedTypes.add(address.type);
        matched = true;
      }
    }
    if (!matched) throw new ProvidedNodeIPError(`failed to get node address from cloud provider that matches ip: ${text}`);
  }
  for (const address of cloudAddresses) {
    if (!enforcedTypes.has(address.type)) enforced.push({ type: address.type, address: address.address });
  }
  return enforced;
}

/** Applies the node's provided-node-ip annotation when it has one; throws ProvidedNodeIPError when it cannot. */
export function applyProvidedNodeIP(node: V1Node, addresses: readonly V1NodeAddress[]): V1NodeAddress[] {
  const annotation = node.metadata?.annotations?.[ANNOTATION_PROVIDED_NODE_IP];
  return annotation === undefined ? [...addresses] : addressesMatchingNodeIPs(annotation, addresses);
}

/**
 * Upstream's change test, kept as is: same length, and every address of the new list equals the
 * last address of its type in the old list. (So a reordering alone is not a change.)
 */
export function nodeAddressesChangeDetected(current: readonly V1NodeAddress[], desired: readonly V1NodeAddress[]): boolean {
  if (current.length !== desired.length) return true;
  const byType = new Map<string, string>();
  for (const address of current) byType.set(address.type, address.address);
  return desired.some((address) => byType.get(address.type) !== address.address);
}

export type AddressDecision =
  | { action: 'write'; addresses: V1NodeAddress[] }
  | { action: 'skip'; reason: string }
  | { action: 'invalid-node-ip'; reason: string };

/**
 * What to do with the node's status.addresses given the provider's addresses (upstream
 * updateNodeAddress). Tainted nodes are never touched here: their addresses are written right
 * after initialisation removes the taint.
 */
export function decideNodeAddresses(node: V1Node, cloudAddresses: readonly V1NodeAddress[]): AddressDecision {
  if (isUninitialized(node)) return { action: 'skip', reason: 'node is still tainted' };
  if (cloudAddresses.length === 0) return { action: 'skip', reason: 'cloud provider returned no addresses' };

  let addresses = [...cloudAddresses];
  // The kubelet's Hostname address stays when the provider does not give one.
  if (!addresses.some((a) => a.type === 'Hostname')) {
    addresses.push(...nodeAddresses(node).filter((a) => a.type === 'Hostname'));
  }
  try {
    addresses = applyProvidedNodeIP(node, addresses);
  } catch (e) {
    if (e instanceof ProvidedNodeIPError) return { action: 'invalid-node-ip', reason: e.message };
    throw e;
  }
  if (!nodeAddressesChangeDetected(nodeAddresses(node), addresses)) return { action: 'skip', reason: 'addresses unchanged' };
  return { action: 'write', addresses };
}

