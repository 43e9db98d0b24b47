import type { V1Node, V1Taint } from '@kubernetes/client-node';
import { isConflict, isNotFound } from '../../kube/errors.ts';
import { isNodeReady, nodeName, taintsWith } from '../../kube/node-helpers.ts';
import { NODES, ResourceClient } from '../../kube/resources.ts';
import { DEFAULT_RETRY, retryOnConflict, type RetryOptions } from '../../kube/retry-on-conflict.ts';
import type { KubeTransport } from '../../kube/transport.ts';

/** The lifecycle controller's only writes to the API: taints on, taints off, delete. */
export interface LifecycleWriter {
  /** Adds the taint unless already there; false when nothing was written (present, or node gone). */
  addTaint(node: V1Node, taint: V1Taint, signal?: AbortSignal): Promise<boolean>;
  /** Removes every taint with one of these keys; false when nothing was written. */
  removeTaints(node: V1Node, keys: readonly string[], signal?: AbortSignal): Promise<boolean>;
  /**
   * Deletes the Node exactly as it was judged: only if the API still has this object (UID),
   * unchanged since (resourceVersion) and NotReady; never a newer one of the same name.
   */
  deleteNode(node: V1Node, signal?: AbortSignal): Promise<DeleteOutcome>;
}

/**
 * `replaced`: a Node of that name exists but with another UID (re-registered), so it was kept.
 * `changed`: the node is Ready again, or changed since it was judged: kept, and judged afresh
 * next period from the new copy.
 */
export type DeleteOutcome = 'deleted' | 'already-gone' | 'replaced' | 'changed';

/** Upstream retries taint updates 5 times on conflict (updateTaintBackoff). */
export const TAINT_UPDATE_ATTEMPTS = 5;
const TAINT_UPDATE_RETRY: RetryOptions = { ...DEFAULT_RETRY, attempts: TAINT_UPDATE_ATTEMPTS };

export class ApiLifecycleWriter implements LifecycleWriter {
  private readonly nodes: ResourceClient<V1Node>;

  constructor(transport: KubeTransport) {
    this.nodes = new ResourceClient<V1Node>(transport, NODES);
  }

  addTaint(node: V1Node, taint: V1Taint, signal?: AbortSignal): Promise<boolean> {
    return this.updateTaints(node, (n) => {
      const taints = taintsWith(n, taint);
      return taints === (n.spec?.taints ?? []) ? undefined : taints;
    }, signal);
  }

  removeTaints(node: V1Node, keys: readonly string[], signal?: AbortSignal): Promise<boolean> {
    return this.updateTaints(node, (n) => {
      const current = n.spec?.taints ?? [];
      const taints = current.filter((t) => !keys.includes(t.key));
      return taints.length === current.length ? undefined : taints;
    }, signal);
  }

  async deleteNode(node: V1Node, signal?: AbortSignal): Promise<DeleteOutcome> {
    // The judgement was made on the informer's copy, maybe seconds old: a kubelet that came
    // back meanwhile has posted Ready, so the node is read afresh and left alone unless it is
    // still the very object judged (UID and resourceVersion) and NotReady.
    let current: V1Node;
    try {
      current = await this.nodes.get(nodeName(node), { signal });
    } catch (e) {
      if (isNotFound(e)) return 'already-gone';
      throw e;
    }
    if (current.metadata?.uid !== node.metadata?.uid) return 'replaced';
    if (isNodeReady(current) || current.metadata?.resourceVersion !== node.metadata?.resourceVersion) return 'changed';
    try {
      // Both preconditions: a node re-registered (new UID) or changed (Ready posted) between the
      // read and the delete answers 409 and is kept.
      await this.nodes.delete(nodeName(node), { uid: node.metadata?.uid, resourceVersion: node.metadata?.resourceVersion, signal });
      return 'deleted';
    } catch (e) {
      if (isNotFound(e)) return 'already-gone';
      if (isConflict(e)) return 'changed';
      throw e;
    }
  }

  /**
   * Starts from the cached node (no extra GET in the common case); on conflict re-reads it and
   * recomputes, like upstream's RetryOnConflict around AddOrUpdateTaintOnNode.
   */
  private async updateTaints(cached: V1Node, compute: (node: V1Node) => V1Taint[] | undefined, signal?: AbortSignal): Promise<boolean> {
    try {
      return await retryOnConflict(async (attempt) => {
        const node = attempt === 1 ? cached : await this.nodes.get(nodeName(cached), { signal });
        if (node.metadata?.uid !== cached.metadata?.uid) return false;
        const taints = compute(node);
        if (taints === undefined) return false;
        // A merge patch replaces spec.taints whole (taints have no merge key); the resourceVersion
        // in the patch makes it conditional, so a taint someone else added meanwhile is never
        // overwritten: we get 409, re-read and recompute. A re-registered node (same name, new
        // UID) never has our copy's resourceVersion either, so it too answers 409 and is left alone.
        await this.nodes.patch(nodeName(node), 'merge', {
          metadata: { resourceVersion: node.metadata?.resourceVersion },
          spec: { taints },
        }, { signal });
        return true;
      }, TAINT_UPDATE_RETRY, signal);
    } catch (e) {
      if (isNotFound(e)) return false;
      throw e;
    }
  }
}
