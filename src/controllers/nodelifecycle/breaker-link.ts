/**
 * What the node lifecycle controller and the status publisher tell each other about the
 * deletion breaker: the controller reports each pass's verdict (shown on the EdgeCCMStatus
 * object); the publisher reports an operator's acknowledgment on that object (the annotation
 * edge-ccm.io/acknowledge-node-deletions=true), which covers exactly the nodes the object listed
 * as held when it was read, so a node that became a candidate after the operator looked is not
 * let through with them. Once the controller has deleted acknowledged nodes, the publisher
 * removes the annotation: one acknowledgment, one batch (no flag to roll out and back).
 */

/** `"true"` on the EdgeCCMStatus object: the nodes it lists as held by the breaker may be deleted (once; edge-ccm then removes it). */
export const ACKNOWLEDGE_NODE_DELETIONS_ANNOTATION = 'edge-ccm.io/acknowledge-node-deletions';

export interface BreakerState {
  open: boolean;
  gone: number;
  allowed: number;
  /** Managed nodes the share applies to. */
  population: number;
  windowMs: number;
  /** Names of the nodes the breaker holds back now. */
  held: string[];
}

export class BreakerLink {
  private state?: BreakerState;
  private acknowledged = new Set<string>();
  private used = false;
  private listener?: () => void;

  /** The publisher: told when the state changed or an acknowledgment was used, to show it at once. */
  onChange(listener: () => void): void {
    this.listener = listener;
  }

  /** The lifecycle controller, after each pass. */
  report(state: BreakerState): void {
    const changed = JSON.stringify(state) !== JSON.stringify(this.state);
    this.state = state;
    if (changed) this.listener?.();
  }

  get current(): BreakerState | undefined {
    return this.state;
  }

  /** Whether an operator acknowledged this held node through the EdgeCCMStatus object. */
  acknowledges(node: string): boolean {
    return this.acknowledged.has(node);
  }

  /** The lifecycle controller deleted nodes on the strength of the acknowledgment: it is spent. */
  acknowledgmentUsed(): void {
    this.used = true;
    this.acknowledged = new Set();
    this.listener?.();
  }

  /** The publisher: the annotation is there (`listed`: the held nodes the object showed), or not (none). */
  setAcknowledgment(listed: readonly string[] | undefined): void {
    if (!this.used) this.acknowledged = new Set(listed ?? []);
  }

  /** The publisher: whether the annotation is to be removed now (once per use). */
  takeUsed(): boolean {
    const used = this.used;
    this.used = false;
    return used;
  }
}
