import type { Existence, Instances } from '../src/cloud/types.ts';
import { FULFILLED_FALSE } from '../src/util/settled.ts';

/**
 * The bench fake's answers about machines, shared by the compiled fake (edge-fake-main.ts) and
 * the in-process pass bench: every node exists (one bulk call per lifecycle pass, as the static
 * and Proxmox providers give), none is shut down (one shared settled answer, as the static
 * provider answers from its inventory).
 */
export const FAKE_EXISTENCE: Pick<Instances, 'instanceExists' | 'instancesExist' | 'instanceShutdown'> = {
  instanceExists: async () => 'exists',
  instancesExist: async (nodes) => new Array<Existence>(nodes.length).fill('exists'),
  instanceShutdown: () => FULFILLED_FALSE,
};
