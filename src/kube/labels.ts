/**
 * Kubernetes label keys and values as the API server checks them (apimachinery's
 * IsQualifiedName and IsValidLabelValue), and the key namespaces Kubernetes reserves. One place
 * for these rules: config validation refuses what the controllers would fail on or drop.
 */

const NAME = /^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
export const LABEL_VALUE_MAX_LENGTH = 63;
const PREFIX_MAX_LENGTH = 253;

/** Why `value` is not a label value (the empty string is one); undefined when it is. */
export function labelValueError(value: string): string | undefined {
  // A file read as UTF-8 turns bytes that are not UTF-8 into U+FFFD: name the real cause.
  if (value.includes('\uFFFD')) return 'is not valid UTF-8';
  if (value.length > LABEL_VALUE_MAX_LENGTH) return `must be at most ${LABEL_VALUE_MAX_LENGTH} characters (it is a label value; got ${value.length})`;
  if (value !== '' && !NAME.test(value)) {
    return 'must be empty or letters, digits, "-", "_" or ".", starting and ending with a letter or digit (it is a label value)';
  }
  return undefined;
}

/** Why `key` is not a label key (`[prefix/]name`); undefined when it is. */
export function labelKeyError(key: string): string | undefined {
  if (key.includes('\uFFFD')) return 'is not valid UTF-8';
  const slash = key.indexOf('/');
  const prefix = slash < 0 ? undefined : key.slice(0, slash);
  const name = slash < 0 ? key : key.slice(slash + 1);
  if (prefix !== undefined) {
    if (prefix.length > PREFIX_MAX_LENGTH || !DNS_SUBDOMAIN.test(prefix)) {
      return `prefix ${JSON.stringify(prefix)} must be a DNS subdomain (lower-case letters, digits, "-" and ".", at most ${PREFIX_MAX_LENGTH} characters)`;
    }
  }
  if (name.length > LABEL_VALUE_MAX_LENGTH) return `name part must be at most ${LABEL_VALUE_MAX_LENGTH} characters`;
  if (!NAME.test(name)) return 'name part must be letters, digits, "-", "_" or ".", starting and ending with a letter or digit';
  return undefined;
}

/** Kubernetes reserves the kubernetes.io and k8s.io namespaces, subdomains included. */
const KUBERNETES_NAMESPACED = /(^|\.)(kubernetes|k8s)\.io\//;

/**
 * Whether a key is in a namespace Kubernetes reserves (`kubernetes.io/`, `k8s.io/`,
 * `node-role.kubernetes.io/`, ...): a provider's additional labels there are never set.
 */
export function isKubernetesNamespacedLabel(key: string): boolean {
  return KUBERNETES_NAMESPACED.test(key);
}

/**
 * The role labels (`node-role.kubernetes.io/worker`): in a reserved namespace, yet meant to be
 * set by a controller, since the NodeRestriction admission plugin refuses them from a kubelet.
 * The one reserved namespace node rules may write.
 */
export const NODE_ROLE_PREFIX = 'node-role.kubernetes.io/';

export function isNodeRoleKey(key: string): boolean {
  return key.startsWith(NODE_ROLE_PREFIX);
}

/** Whether node rules may not write `key` (label, annotation or taint key): reserved, and not a role. */
export function isReservedForRules(key: string): boolean {
  return isKubernetesNamespacedLabel(key) && !isNodeRoleKey(key);
}
