import type { Instances } from './types.ts';

/**
 * The Instances of a provider that rebuilds its answers on every good reload: each call goes to
 * the generation in force at that moment, so a caller may hold this one object for the process's life.
 */
export function currentInstances(current: () => Required<Instances>): Required<Instances> {
  return {
    instanceExists: (node, signal) => current().instanceExists(node, signal),
    instancesExist: (nodes, signal) => current().instancesExist(nodes, signal),
    instanceShutdown: (node, signal) => current().instanceShutdown(node, signal),
    instanceMetadata: (node, signal) => current().instanceMetadata(node, signal),
  };
}
