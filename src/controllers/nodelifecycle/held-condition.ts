import type { V1Node, V1NodeCondition } from '@kubernetes/client-node';
import { getCondition, nodeName } from '../../kube/node-helpers.ts';
import { NODES, ResourceClient } from '../../kube/resources.ts';
import type { KubeTransport } from '../../kube/transport.ts';

/**
 * Each node whose deletion the lifecycle controller holds back says why, in `kubectl describe
 * node` (beyond upstream): the condition edge-ccm.io/DeletionHeld, True with the reason
 * (GracePeriod, Protected, DeletionPolicy, Breaker, ProviderAnswerDistrusted) and what would let
 * it go; removed once the node is no longer held (Ready again, its machine found, deleted).
 * Written to nodes/status as a strategic merge patch on the conditions list (merge key `type`),
 * so the kubelet's conditions are untouched, and only when the condition changes.
 */

export const DELETION_HELD_CONDITION = 'edge-ccm.io/DeletionHeld';

export type HeldConditionReason = 'GracePeriod' | 'Protected' | 'DeletionPolicy' | 'Breaker' | 'ProviderAnswerDistrusted';

export interface HeldState {
  reason: HeldConditionReason;
  message: string;
}

/** The patch bringing the node's condition to `state` (undefined: not held, the condition removed); undefined when it already says so. */
export function heldConditionPatch(node: V1Node, state: HeldState | undefined, now: Date): Record<string, unknown> | undefined {
  const current = getCondition(node, DELETION_HELD_CONDITION); // every node, every period
  if (!state) return current ? { status: { conditions: [{ $patch: 'delete', type: DELETION_HELD_CONDITION }] } } : undefined;
  if (current && current.status === 'True' && current.reason === state.reason && current.message === state.message) return undefined;
  const time = now.toISOString().replace(/\.\d{3}Z$/, 'Z');
  const condition: V1NodeCondition = {
    type: DELETION_HELD_CONDITION,
    status: 'True',
    reason: state.reason,
    message: state.message,
    lastTransitionTime: (current?.status === 'True' ? current.lastTransitionTime : time) as unknown as Date,
    lastHeartbeatTime: time as unknown as Date,
  };
  return { status: { conditions: [condition] } };
}

/** Sends the patch; a node gone meanwhile has nothing left to say. */
export class HeldConditionWriter {
  private readonly nodes: ResourceClient<V1Node>;

  constructor(transport: KubeTransport) {
    this.nodes = new ResourceClient<V1Node>(transport, NODES);
  }

  async write(node: V1Node, patch: Record<string, unknown>, signal?: AbortSignal): Promise<void> {
    await this.nodes.patch(nodeName(node), 'strategic', patch, { subresource: 'status', signal });
  }
}
