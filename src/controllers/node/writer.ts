import type { V1Node, V1NodeAddress, V1Taint } from '@kubernetes/client-node';
import { NODES, ResourceClient } from '../../kube/resources.ts';
import type { KubeTransport } from '../../kube/transport.ts';
import type { InitializationPatch } from './initialize.ts';
import type { CloudLabelsPatch } from './label-resync.ts';
import type { NodeRulesPatch } from './rules-sync.ts';

/**
 * The cloud node controller's writes to the API, one method each, so the reason for each patch
 * type sits next to the request. All go out with field manager edge-ccm (ResourceClient).
 */
export interface CloudNodeWriter {
  /** Reads the node from the API (after a conflict, when the informer's copy may lag). */
  get(name: string, signal?: AbortSignal): Promise<V1Node>;
  initialize(name: string, patch: InitializationPatch, signal?: AbortSignal): Promise<V1Node>;
  setLabels(name: string, labels: Record<string, string>, signal?: AbortSignal): Promise<V1Node>;
  /** Replaces status.addresses if the node is still at `resourceVersion` (409 otherwise). */
  setAddresses(name: string, resourceVersion: string | undefined, addresses: V1NodeAddress[], signal?: AbortSignal): Promise<V1Node>;
}

/** The label re-sync's write (label-resync.ts), apart so CloudNodeWriter's test doubles need not know it. */
export interface NodeLabelWriter {
  get(name: string, signal?: AbortSignal): Promise<V1Node>;
  /** Applies the patch if the node is still at `resourceVersion` (409 otherwise). */
  patchCloudLabels(name: string, resourceVersion: string | undefined, patch: CloudLabelsPatch, signal?: AbortSignal): Promise<V1Node>;
}

/** The node rules' write (rules-sync.ts), apart for the same reason. */
export interface NodeRuleWriter {
  get(name: string, signal?: AbortSignal): Promise<V1Node>;
  /** Applies the patch if the node is still at `resourceVersion` (409 otherwise). */
  patchNodeRules(name: string, resourceVersion: string | undefined, patch: NodeRulesPatch, signal?: AbortSignal): Promise<V1Node>;
}

export class ApiCloudNodeWriter implements CloudNodeWriter, NodeLabelWriter, NodeRuleWriter {
  private readonly nodes: ResourceClient<V1Node>;

  constructor(transport: KubeTransport) {
    this.nodes = new ResourceClient<V1Node>(transport, NODES);
  }

  get(name: string, signal?: AbortSignal): Promise<V1Node> {
    return this.nodes.get(name, { signal });
  }

  /**
   * Upstream does a PUT of the whole node (Update in a retry-on-conflict loop). We send a JSON
   * merge patch instead: only the fields we change travel, and the patch carries
   * metadata.resourceVersion, so it has the PUT's optimistic concurrency (409 when the node
   * changed) without re-sending a node we may only partly know. Not strategic: removing one key
   * from the taint list with a strategic patch needs delete directives per taint, while the merge
   * patch's whole-list replacement is exact under the resourceVersion precondition.
   */
  initialize(name: string, patch: InitializationPatch, signal?: AbortSignal): Promise<V1Node> {
    return this.nodes.patch(name, 'merge', patch, { signal });
  }

  /**
   * Merge patch of metadata.labels: a map, so it only adds or sets the keys we name. No
   * resourceVersion precondition (upstream has none either): the values come from the node's own
   * beta labels, and a later change to those triggers another reconciliation.
   */
  setLabels(name: string, labels: Record<string, string>, signal?: AbortSignal): Promise<V1Node> {
    return this.nodes.patch(name, 'merge', { metadata: { labels } }, { signal });
  }

  /**
   * Merge patch of metadata.labels (null removes a label) and metadata.annotations, under a
   * resourceVersion precondition: the plan decided from the node as read which keys are ours, and
   * a label someone set meanwhile must not be taken over.
   */
  patchCloudLabels(name: string, resourceVersion: string | undefined, patch: CloudLabelsPatch, signal?: AbortSignal): Promise<V1Node> {
    const metadata: Record<string, unknown> = { resourceVersion, labels: patch.labels };
    if (Object.keys(patch.annotations).length > 0) metadata.annotations = patch.annotations;
    return this.nodes.patch(name, 'merge', { metadata }, { signal });
  }

  /**
   * Merge patch of metadata.labels and metadata.annotations (null removes a key) and, when the
   * rules changed a taint, of spec.taints (a merge patch replaces the list whole), under a
   * resourceVersion precondition: the list was computed from the node as read, and a taint
   * someone added meanwhile must not be replaced away (409, read again, plan again).
   */
  patchNodeRules(name: string, resourceVersion: string | undefined, patch: NodeRulesPatch, signal?: AbortSignal): Promise<V1Node> {
    const body: { metadata: Record<string, unknown>; spec?: { taints: V1Taint[] } } = { metadata: { resourceVersion } };
    if (Object.keys(patch.labels).length > 0) body.metadata.labels = patch.labels;
    if (Object.keys(patch.annotations).length > 0) body.metadata.annotations = patch.annotations;
    if (patch.taints) body.spec = { taints: patch.taints };
    return this.nodes.patch(name, 'merge', body, { signal });
  }

  /**
   * Merge patch on the status subresource: the address list is replaced whole, which is what we
   * want (a strategic patch merges addresses by type and cannot express two addresses of one type
   * or a new order). Beyond upstream (PatchNodeStatus, no precondition): the patch carries the
   * resourceVersion the list was computed from, so a Hostname the kubelet posted meanwhile is not
   * replaced away; the caller gets 409, reads the node again and recomputes.
   */
  setAddresses(name: string, resourceVersion: string | undefined, addresses: V1NodeAddress[], signal?: AbortSignal): Promise<V1Node> {
    return this.nodes.patch(name, 'merge', { metadata: { resourceVersion }, status: { addresses } }, { subresource: 'status', signal });
  }
}
