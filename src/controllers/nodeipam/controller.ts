import type { V1Node } from '@kubernetes/client-node';
import type { CloudProvider } from '../../cloud/types.ts';
import { KubeApiError, isNotFound } from '../../kube/errors.ts';
import { nodeEventSubject, nodeName, podCIDRs } from '../../kube/node-helpers.ts';
import { NODES, ResourceClient } from '../../kube/resources.ts';
import { WorkQueue, defaultControllerRateLimiter, processNextItem } from '../../kube/workqueue/index.ts';
import type { Logger } from '../../log.ts';
import { formatPrefix, type Prefix } from '../../net/ip.ts';
import { NODE_IPAM_CONTROLLER } from '../../names.ts';
import { Backoff } from '../../util/backoff.ts';
import { errorMessage } from '../../util/errors.ts';
import { forEachLimited } from '../../util/parallel.ts';
import { sleep } from '../../util/time.ts';
import type { Controller, ControllerContext } from '../types.ts';
import { nodeOwner, type Allocations } from './allocations.ts';
import { decide, type NodeRequest, type Problem } from './decide.ts';
import { nodeIPAMMetrics, type NodeIPAMMetrics } from './metrics.ts';
import type { NodeIPAMOptions } from './options.ts';
import { rebuildAllocations } from './rebuild.ts';
import { StickyRecord } from './sticky-record.ts';

export { NODE_IPAM_CONTROLLER };

/** Provider questions in flight while the start-of-term backlog is decided. */
const BACKLOG_PROVIDER_CALLS = 30;

export type NodeIPAMContext = Pick<ControllerContext, 'transport' | 'ownTransport' | 'recorder' | 'logger' | 'registry' | 'nodeInformer' | 'isManagedNode' | 'workQueueMetrics'> & {
  cloud: Pick<CloudProvider, 'instances' | 'onChange'>;
};

export interface NodeIPAMControllerOptions extends NodeIPAMOptions {
  /**
   * Nodes synced at once; default 30, upstream's cidrUpdateWorkers. Decisions are in memory, the
   * writes are what waits; the CloudAllocator's record writes group what the workers ask for meanwhile.
   */
  workers?: number;
}

/**
 * node-ipam-controller: gives each node its pod CIDRs (spec.podCIDR and spec.podCIDRs, written
 * once). Each term starts from a rebuild (rebuild.ts: the CloudAllocator's record, then the
 * Nodes), then syncs nodes from a work queue; the decision is decide.ts's. RangeAllocator:
 * upstream's, a node's CIDRs are released when it is deleted. CloudAllocator: the CIDRs are the
 * machine's (spec.providerID): the inventory's pin, else the ones it got first, kept in the
 * record (sticky-record.ts, written before the node) across Node deletions and leaders. A
 * problem is a Warning event on the node and a count, never a stop; the node waits until a
 * release, an inventory change or its own change may solve it.
 */
export class NodeIPAMController implements Controller {
  readonly name = NODE_IPAM_CONTROLLER;
  private readonly nodes: ResourceClient<V1Node>;
  private readonly queue: WorkQueue<string>;
  private readonly metrics: NodeIPAMMetrics;
  private readonly log: Logger;
  private readonly record?: StickyRecord;
  private state?: Allocations;
  /** Nodes refused for a problem another change may solve: queued again on the next release or inventory change. */
  private readonly waiting = new Set<string>();
  /** The problems last reported per node, so an unchanged one is not reported at every update. */
  private readonly reported = new Map<string, string>();
  /** Nodes whose record write (then node write) is in flight, and those writes, awaited at the end of the term. */
  private readonly recording = new Set<string>();
  /** The uid of each Node this term gave its CIDRs, until the Node is deleted: never written twice. */
  private readonly written = new Map<string, string>();
  private readonly completions = new Set<Promise<void>>();
  /** Node names per machine (CloudAllocator): a machine's CIDRs are on one Node at a time. */
  private readonly byMachine = new Map<string, Set<string>>();

  constructor(
    private readonly ctx: NodeIPAMContext,
    private readonly opts: NodeIPAMControllerOptions,
  ) {
    if (opts.allocatorType === 'CloudAllocator' && !ctx.cloud.instances) throw new Error('the CloudAllocator needs a provider with instances');
    this.nodes = new ResourceClient<V1Node>(ctx.transport, NODES);
    this.metrics = nodeIPAMMetrics(ctx.registry);
    this.log = ctx.logger.with({ controller: this.name });
    this.queue = new WorkQueue<string>('node_ipam_controller', { rateLimiter: defaultControllerRateLimiter<string>(), metrics: ctx.workQueueMetrics });
    if (opts.allocatorType === 'CloudAllocator') this.record = new StickyRecord(ctx.ownTransport ?? ctx.transport, opts.recordNamespace, opts.recordName);
  }

  private get cloudAllocator(): boolean {
    return this.record !== undefined;
  }

  async run(signal: AbortSignal): Promise<void> {
    const unsubscribeNodes = this.ctx.nodeInformer.addHandlers({
      onAdd: (node) => this.nodeChanged(undefined, node),
      onUpdate: (old, node) => this.nodeChanged(old, node),
      onDelete: (node) => this.nodeDeleted(node),
    });
    const unsubscribeCloud = this.ctx.cloud.onChange?.(() => this.requeueWaiting());
    try {
      if (!(await this.ctx.nodeInformer.waitForSync(signal))) return;
      if (!(await this.rebuild(signal))) return;
      await this.recordBacklog(signal);
      this.log.info('starting node IPAM', { allocator: this.opts.allocatorType, clusterCIDRs: this.opts.clusterCIDRs.map(formatPrefix).join(',') });
      for (const node of this.ctx.nodeInformer.store.list()) this.enqueue(node);
      const workers = Array.from({ length: Math.max(1, this.opts.workers ?? 30) }, () => this.runWorker(signal));
      await new Promise<void>((resolve) => (signal.aborted ? resolve() : signal.addEventListener('abort', () => resolve(), { once: true })));
      this.queue.shutDown();
      await Promise.all(workers);
      await Promise.all([...this.completions]);
    } finally {
      unsubscribeNodes();
      unsubscribeCloud?.();
      this.queue.shutDown();
    }
  }

  /** The term's allocations from the record and the Nodes, the record read until it answers. */
  private async rebuild(signal: AbortSignal): Promise<boolean> {
    let records = new Map<string, string[]>();
    if (this.record) {
      const backoff = Backoff.doubling({ initialMs: 500, maxMs: 30_000 });
      for (;;) {
        try {
          const loaded = await this.record.load(signal);
          records = loaded.entries;
          for (const key of loaded.unreadable) this.log.warn('ignoring an unreadable entry of the node IPAM record', { configmap: `${this.record.namespace}/${this.record.name}`, key });
          break;
        } catch (e) {
          if (signal.aborted) return false;
          this.log.error('cannot read the node IPAM record; trying again', { error: errorMessage(e) });
          await sleep(backoff.next(), signal).catch(() => {});
          if (signal.aborted) return false;
        }
      }
    }
    const nodes = this.ctx.nodeInformer.store.list().filter((n) => this.ctx.isManagedNode(n));
    const rebuilt = rebuildAllocations(this.opts, records, nodes.map((n) => this.request(n)));
    this.state = rebuilt.state;
    this.metrics.watch(() => rebuilt.state.clusterSets());
    for (const line of rebuilt.recordProblems) this.log.warn(line);
    for (const node of nodes) this.report(node, rebuilt.nodeProblems.get(nodeName(node)) ?? []);
    this.log.info('node IPAM state rebuilt', { nodes: nodes.length, machines: records.size, problems: rebuilt.nodeProblems.size });
    return true;
  }

  /**
   * CloudAllocator: the nodes waiting at the start of a term (a new leader's backlog, machines
   * registered while none led) decided at once and recorded in one write, instead of one write
   * per worker round; their syncs then find the record says it already and only patch the nodes.
   * A node refused here is refused and reported again by its sync.
   */
  private async recordBacklog(signal: AbortSignal): Promise<void> {
    const record = this.record;
    const state = this.state;
    if (!record || !state) return;
    const waiting = this.ctx.nodeInformer.store.list().filter((n) => this.ctx.isManagedNode(n) && podCIDRs(n).length === 0 && n.spec?.providerID);
    await forEachLimited(waiting, BACKLOG_PROVIDER_CALLS, async (node) => {
      const pin = await this.pinOf(node, signal).catch(() => undefined); // its sync asks again, and retries
      decide(state, this.request(node, pin));
    });
    // With them, the machines whose Nodes have CIDRs the record does not say yet (the first term
    // after kube-controller-manager's allocator, a lost record).
    const owners = state.owners().filter((owner) => this.needsRecord(owner, state));
    if (owners.length === 0 || signal.aborted) return;
    try {
      await Promise.all(owners.map((owner) => this.writeRecord(owner, state, signal)));
      this.log.info('recorded the machines\' pod CIDRs at the start of the term', { machines: owners.length });
    } catch (e) {
      this.log.info('could not record the waiting nodes\' pod CIDRs at once; each sync tries again', { error: errorMessage(e) });
    }
  }

  private pinOf(node: V1Node, signal?: AbortSignal): Promise<readonly string[] | undefined> {
    return this.ctx.cloud.instances!.instanceMetadata(node, signal).then((m) => m?.podCIDRs);
  }

  private request(node: V1Node, pin?: readonly string[]): NodeRequest {
    const name = nodeName(node);
    const machine = this.cloudAllocator ? node.spec?.providerID : undefined;
    const owner = machine || nodeOwner(name);
    let sharedWith: string | undefined;
    if (machine) {
      for (const other of this.byMachine.get(machine) ?? []) {
        if (other !== name && podCIDRs(this.ctx.nodeInformer.store.get(other) ?? {}).length > 0) sharedWith = other;
      }
    }
    return { node: name, podCIDRs: podCIDRs(node), owner, pin, sharedWith };
  }

  private nodeChanged(old: V1Node | undefined, node: V1Node): void {
    this.trackMachine(old, node);
    // Heartbeats change nothing here: only a node without CIDRs, or one whose CIDRs or machine changed, needs a sync.
    if (old && podCIDRs(node).length > 0 && podCIDRs(old).join() === podCIDRs(node).join() && old.spec?.providerID === node.spec?.providerID) return;
    this.enqueue(node);
  }

  private nodeDeleted(node: V1Node): void {
    const name = nodeName(node);
    this.trackMachine(node, undefined);
    this.written.delete(name);
    this.waiting.delete(name);
    this.reported.delete(name);
    const state = this.state;
    if (!state) return; // before the rebuild, which reads the store after this
    // CloudAllocator: the CIDRs stay the machine's, and a Node of the same machine that waited
    // (CIDRConflict while this one held them) may have them now: at once, not at its next status write.
    const machine = this.cloudAllocator ? node.spec?.providerID : undefined;
    if (machine) {
      for (const sibling of this.byMachine.get(machine) ?? []) if (this.waiting.delete(sibling)) this.queue.add(sibling);
    }
    // RangeAllocator: the node's CIDRs go back (upstream). CloudAllocator: they stay the machine's.
    const owner = nodeOwner(name);
    const held = state.held(owner);
    if (held.length === 0) return;
    state.releaseAll(owner);
    for (const prefix of held) this.metrics.releases.inc({ clusterCIDR: formatPrefix(state.setFor(prefix)?.cluster ?? prefix) });
    this.log.info('released the pod CIDRs of a deleted node', { node: name, podCIDRs: held.map(formatPrefix).join(',') });
    this.requeueWaiting();
  }

  private trackMachine(old: V1Node | undefined, node: V1Node | undefined): void {
    if (!this.cloudAllocator) return;
    const name = nodeName((node ?? old)!);
    const before = old?.spec?.providerID;
    const after = node?.spec?.providerID;
    if (before === after) return;
    if (before) this.byMachine.get(before)?.delete(name);
    if (after) {
      let names = this.byMachine.get(after);
      if (!names) this.byMachine.set(after, (names = new Set()));
      names.add(name);
    }
  }

  private enqueue(node: V1Node): void {
    if (this.ctx.isManagedNode(node)) this.queue.add(nodeName(node));
  }

  private requeueWaiting(): void {
    for (const name of this.waiting) this.queue.add(name);
    this.waiting.clear();
  }

  private async runWorker(signal: AbortSignal): Promise<void> {
    const onError = (name: string, error: unknown) => this.log.info('error syncing node pod CIDRs, requeuing', { node: name, error: errorMessage(error) });
    while (await processNextItem(this.queue, (name) => this.syncNode(name, signal), onError));
  }

  /** One node: hold, assign or report; throws (to be retried with backoff) when a write fails. */
  async syncNode(name: string, signal?: AbortSignal): Promise<void> {
    const node = this.ctx.nodeInformer.store.get(name);
    const state = this.state;
    if (!node || !state || !this.ctx.isManagedNode(node)) return;
    // Its record write is on the way, the node write after it; a failure queues it again.
    if (this.recording.has(name)) return;
    const empty = podCIDRs(node).length === 0;
    // Written already: this Node (by uid) has its CIDRs, the informer has not seen them yet (an
    // update by another writer came first). Pod CIDRs are set once, so its next event shows them.
    if (empty && node.metadata?.uid !== undefined && this.written.get(name) === node.metadata.uid) return;
    // CloudAllocator: the CIDRs are the machine's, so a node waits for the cloud node controller
    // to name its machine (spec.providerID); until then it still carries the uninitialized taint.
    if (this.cloudAllocator && empty && !node.spec?.providerID) return;
    const pin = this.cloudAllocator && empty ? await this.pinOf(node, signal) : undefined;
    const request = this.request(node, pin);
    const decision = decide(state, request);
    if (decision.kind === 'refuse') {
      this.waiting.add(name);
      this.report(node, [decision.problem]);
      return;
    }
    this.waiting.delete(name);
    if (decision.kind === 'hold') this.report(node, decision.problems);
    else this.report(node, []);
    const write = decision.kind === 'assign' ? () => this.assign(node, decision.cidrs, signal) : async () => {};
    if (!this.needsRecord(request.owner, state)) return write();
    // The record first. The worker moves on meanwhile, so each record write takes every node
    // decided while the one before was in flight (a registration burst), not one per worker.
    this.recording.add(name);
    const pending = this.writeRecord(request.owner, state, signal)
      .then(write)
      .catch((e: unknown) => {
        this.log.info('error recording or writing node pod CIDRs, requeuing', { node: name, error: errorMessage(e) });
        this.queue.addRateLimited(name);
      })
      .finally(() => {
        this.recording.delete(name);
        this.completions.delete(pending);
      });
    this.completions.add(pending);
  }

  private needsRecord(owner: string, state: Allocations): boolean {
    return this.record !== undefined && !owner.startsWith('node/') && !this.record.says(owner, state.held(owner).map(formatPrefix));
  }

  /** CloudAllocator: the machine's CIDRs in the record before they are on a node (a new leader must find them). */
  private async writeRecord(owner: string, state: Allocations, signal?: AbortSignal): Promise<void> {
    if (!this.needsRecord(owner, state)) return;
    await this.record!.write(owner, state.held(owner).map(formatPrefix), signal);
  }

  private async assign(node: V1Node, cidrs: Prefix[], signal?: AbortSignal): Promise<void> {
    const name = nodeName(node);
    const texts = cidrs.map(formatPrefix);
    const uid = node.metadata?.uid;
    try {
      // Both fields, as upstream's PatchNodeCIDRs (older readers take spec.podCIDR), on the very
      // Node decided for: one deleted and registered again meanwhile (another uid) is refused,
      // else the CIDRs its deletion released would be on it and free in the set at once.
      await this.nodes.patch(name, 'json', [
        ...(uid ? [{ op: 'test', path: '/metadata/uid', value: uid }] : []),
        { op: 'add', path: '/spec/podCIDR', value: texts[0] },
        { op: 'add', path: '/spec/podCIDRs', value: texts },
      ], { signal });
    } catch (e) {
      if (isNotFound(e)) return; // deleted meanwhile: the delete handler releases
      if (e instanceof KubeApiError && (e.status === 422 || e.status === 409)) {
        // Another Node by that name now, or someone else set its CIDRs first (they cannot change):
        // the next sync decides for the node as it is.
        this.log.warn('the node changed before its pod CIDRs were written; deciding again', { node: name, error: errorMessage(e) });
        this.releaseRefused(nodeOwner(name), cidrs);
      }
      throw new Error(`failed to patch the pod CIDRs ${texts.join(',')} of node ${name}: ${errorMessage(e)}`);
    }
    if (uid !== undefined) this.written.set(name, uid);
    for (const prefix of cidrs) this.metrics.allocations.inc({ clusterCIDR: formatPrefix(this.state?.setFor(prefix)?.cluster ?? prefix) });
    this.log.info('set node pod CIDRs', { node: name, podCIDRs: texts.join(',') });
  }

  /** RangeAllocator: CIDRs a node refused are free again; a machine keeps its own. */
  private releaseRefused(owner: string, cidrs: Prefix[]): void {
    if (this.cloudAllocator) return;
    for (const prefix of cidrs) this.state?.release(prefix, owner);
  }

  /** A Warning event and a count per new problem; nothing when the node's problems did not change. */
  private report(node: V1Node, problems: Problem[]): void {
    const name = nodeName(node);
    const key = problems.map((p) => p.message).join('\n');
    if ((this.reported.get(name) ?? '') === key) return;
    if (key === '') this.reported.delete(name);
    else this.reported.set(name, key);
    for (const problem of problems) {
      this.metrics.problems.inc({ reason: problem.reason });
      this.ctx.recorder.event(nodeEventSubject(node), 'Warning', problem.reason, problem.message);
      this.log.warn(problem.message, { node: name, reason: problem.reason });
    }
  }
}
