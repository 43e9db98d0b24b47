import type { V1Node, V1NodeAddress } from '@kubernetes/client-node';
import type { CloudProvider, InstanceMetadata, Instances } from '../../cloud/types.ts';
import type { NodeRuleEffects } from '../../cloud/node-rules.ts';
import { isNotFound } from '../../kube/errors.ts';
import { isUninitialized, nodeAgeMs, nodeEventSubject, nodeName } from '../../kube/node-helpers.ts';
import { DEFAULT_RETRY, retryOnConflict, type RetryOptions } from '../../kube/retry-on-conflict.ts';
import { WorkQueue, defaultControllerRateLimiter, processNextItem } from '../../kube/workqueue/index.ts';
import type { Logger } from '../../log.ts';
import type { Controller, ControllerContext } from '../types.ts';
import { ProvidedNodeIPError, decideNodeAddresses } from './addresses.ts';
import { fetchInstanceMetadata, planInitialization, type InitializationPlan } from './initialize.ts';
import { labelsToReconcile } from './labels.ts';
import { nodeControllerMetrics, type NodeControllerMetrics } from './metrics.ts';
import { planLabelResync } from './label-resync.ts';
import { planNodeRules } from './rules-sync.ts';
import { ApiCloudNodeWriter, type NodeLabelWriter, type NodeRuleWriter, type CloudNodeWriter } from './writer.ts';
import { ResyncTrigger } from '../../util/resync-trigger.ts';
import { forEachLimited } from '../../util/parallel.ts';
import { errorMessage } from '../../util/errors.ts';
import { Backoff } from '../../util/backoff.ts';
import { CLOUD_NODE_CONTROLLER } from '../../names.ts';

export interface CloudNodeControllerOptions {
  /** --concurrent-node-syncs: workers initialising nodes. */
  workers: number;
  /** --concurrent-node-status-updates: the concurrency of the periodic status pass; default `workers` (as upstream when 0). */
  statusWorkers?: number;
  /** --node-status-update-frequency: period of the address refresh of initialised nodes. */
  nodeStatusUpdateFrequencyMs: number;
  /**
   * Beyond upstream (--node-label-resync, or the provider's relabelNodes): the periodic pass also
   * brings the cloud labels of initialised nodes in line with the metadata (label-resync.ts).
   */
  relabelNodes?: boolean;
  /** Quiet time after the provider's last onChange before the early pass. Default 1000 ms. */
  changeDebounceMs?: number;
}

/** Seams for tests; the app passes none. */
export interface CloudNodeControllerDeps {
  writer?: CloudNodeWriter;
  labelWriter?: NodeLabelWriter;
  ruleWriter?: NodeRuleWriter;
}

/** Its name in logs, health checks and metrics: src/names.ts, the one list of names. */
export { CLOUD_NODE_CONTROLLER };
export const EVENT_SYNCED = 'Synced';
export const EVENT_PROVIDED_NODE_IP_INVALID = 'ProvidedNodeIPInvalid';

/** Upstream UpdateNodeSpecBackoff: 20 attempts, 50ms with jitter 1.0 (50-100ms). */
const UPDATE_NODE_SPEC_RETRY: RetryOptions = { attempts: 20, delayMs: 50, jitter: 1 };
/** Label re-sync: attempts before a node is left to the next pass. */
const RELABEL_RETRY: RetryOptions = { ...DEFAULT_RETRY, attempts: 3 };
/** A node the provider has no metadata for is tried again after this, doubling up to the status update period. */
export const NIL_METADATA_RETRY_INITIAL_MS = 1000;

/** What the cloud node controller uses of the app's context: the provider's instances and change notice, the node informer, its writes, events and metrics. */
export type NodeControllerContext = Pick<ControllerContext, 'transport' | 'recorder' | 'logger' | 'registry' | 'nodeInformer' | 'isManagedNode' | 'workQueueMetrics'> & { cloud: Pick<CloudProvider, 'instances' | 'onChange'> };

/**
 * The cloud node controller (upstream controllers/node): initialises nodes registered with the
 * uninitialized taint from the provider's instance metadata, keeps the GA labels of initialised
 * nodes in line with their beta labels, and refreshes their addresses periodically.
 *
 * Beyond upstream: when the provider reports a change (onChange), the periodic pass runs soon
 * (debounced) instead of at its next period, and nodes still tainted are tried again; a node the
 * provider had no metadata for is tried again with backoff (1 s doubling up to the status update
 * period); with relabelNodes the pass also re-syncs cloud labels; node rules (the provider's
 * ruleEffects) are applied at initialisation and kept in step by the pass.
 */
export class CloudNodeController implements Controller {
  readonly name = CLOUD_NODE_CONTROLLER;
  readonly queue: WorkQueue<string>;
  private readonly instances: Instances;
  private readonly writer: CloudNodeWriter;
  private readonly labelWriter: NodeLabelWriter;
  private readonly ruleWriter: NodeRuleWriter;
  private readonly resync: ResyncTrigger;
  private readonly metrics: NodeControllerMetrics;
  private readonly log: Logger;
  /** Nodes the provider had no metadata for: how many times in a row (their retry backoff). */
  /** Per node the provider had no metadata for: when to ask again (1 s doubling to the status update period). */
  private readonly nilMetadata = new Map<string, Backoff>();

  constructor(
    private readonly ctx: NodeControllerContext,
    private readonly opts: CloudNodeControllerOptions,
    deps: CloudNodeControllerDeps = {},
  ) {
    if (!ctx.cloud.instances) throw new Error('cloud provider does not support instances');
    this.instances = ctx.cloud.instances;
    const api = new ApiCloudNodeWriter(ctx.transport);
    this.writer = deps.writer ?? api;
    this.labelWriter = deps.labelWriter ?? api;
    this.ruleWriter = deps.ruleWriter ?? api;
    this.resync = new ResyncTrigger(opts.changeDebounceMs ?? 1000);
    this.metrics = nodeControllerMetrics(ctx.registry);
    this.log = ctx.logger.with({ controller: this.name });
    this.queue = new WorkQueue<string>('Nodes', { rateLimiter: defaultControllerRateLimiter<string>(), metrics: ctx.workQueueMetrics });
    // Registered at construction, as upstream: nodes listed before run() show up as adds.
    ctx.nodeInformer.addHandlers({
      onAdd: (node) => this.enqueue(node),
      onUpdate: (_old, node) => this.enqueue(node),
    });
  }

  async run(signal: AbortSignal): Promise<void> {
    this.log.info('waiting for informer caches to sync');
    if (!(await this.ctx.nodeInformer.waitForSync(signal))) {
      this.queue.shutDown();
      return;
    }
    if (this.opts.relabelNodes) this.log.info('node label re-sync on: cloud labels of initialised nodes follow the provider');
    const unsubscribe = this.ctx.cloud.onChange?.(() => this.resync.request());
    const workers = Array.from({ length: Math.max(1, this.opts.workers) }, () => this.runWorker(signal));
    const statusLoop = this.runStatusLoop(signal);
    await new Promise<void>((resolve) => {
      if (signal.aborted) resolve();
      else signal.addEventListener('abort', () => resolve(), { once: true });
    });
    unsubscribe?.();
    this.resync.stop();
    this.queue.shutDown();
    await Promise.all([...workers, statusLoop]);
  }

  private enqueue(node: V1Node): void {
    if (this.ctx.isManagedNode(node)) this.queue.add(nodeName(node));
  }

  private async runWorker(signal: AbortSignal): Promise<void> {
    const onError = (name: string, error: unknown) =>
      this.log.info('error syncing node, requeuing', { node: name, error: errorMessage(error) });
    while (await processNextItem(this.queue, (name) => this.syncNode(name, signal), onError));
  }

  /**
   * upstream wait.UntilWithContext: a pass at once, then one period after each pass ends; a
   * provider change cuts the wait short, and then nodes still tainted (perhaps with no metadata
   * before the change) are queued again as well.
   */
  private async runStatusLoop(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      await this.updateNodeStatus(signal);
      const changed = await this.resync.wait(this.opts.nodeStatusUpdateFrequencyMs, signal);
      if (changed && !signal.aborted) {
        this.log.info('cloud provider reported a change: syncing nodes');
        for (const node of this.ctx.nodeInformer.store.list()) if (isUninitialized(node)) this.enqueue(node);
      }
    }
  }

  /**
   * One queue item: initialise the node if it carries the uninitialized taint, else only reconcile
   * its GA labels (no cloud call). Throws to be retried with backoff.
   */
  async syncNode(name: string, signal?: AbortSignal): Promise<void> {
    const node = this.ctx.nodeInformer.store.get(name);
    if (!node || !this.ctx.isManagedNode(node) || !isUninitialized(node)) this.nilMetadata.delete(name);
    if (!node || !this.ctx.isManagedNode(node)) return;
    if (!isUninitialized(node)) return this.reconcileLabels(node, signal);
    return this.initializeNode(node, signal);
  }

  private async reconcileLabels(node: V1Node, signal?: AbortSignal): Promise<void> {
    const labels = labelsToReconcile(node);
    if (Object.keys(labels).length === 0) return;
    try {
      await this.writer.setLabels(nodeName(node), labels, signal);
    } catch (e) {
      if (isNotFound(e)) return;
      throw new Error(`failed to update labels for node ${nodeName(node)}: ${errorMessage(e)}`);
    }
  }

  private async initializeNode(cached: V1Node, signal?: AbortSignal): Promise<void> {
    const name = nodeName(cached);
    const log = this.log.with({ node: name });
    log.info('initializing node with cloud provider');

    const metadata = await fetchInstanceMetadata(this.instances, cached, signal).catch((e: unknown) => {
      throw new Error(`failed to get instance metadata for node ${name}: ${errorMessage(e)}`);
    });
    if (metadata === null) {
      // The provider has nothing for this node (yet): leave it tainted. Beyond upstream (which
      // waits for the Node to change): tried again with backoff, since "nothing" may be a
      // provider answer that lags (a VM list cached from before the VM, or distrusted as empty).
      let backoff = this.nilMetadata.get(name);
      if (!backoff) this.nilMetadata.set(name, (backoff = Backoff.doubling({ initialMs: NIL_METADATA_RETRY_INITIAL_MS, maxMs: Math.max(NIL_METADATA_RETRY_INITIAL_MS, this.opts.nodeStatusUpdateFrequencyMs) })));
      const retryMs = backoff.next();
      log.info('skip sync node because cloud provided nil metadata; trying again later', { retryMs });
      this.queue.addAfter(name, retryMs);
      return;
    }
    this.nilMetadata.delete(name);

    // Upstream order: first the node write (providerID, labels, taint removal), then the
    // addresses on the status, once the node is no longer tainted.
    const initialized = await retryOnConflict(async (attempt) => {
      const node = attempt === 1 ? cached : await this.writer.get(name, signal);
      // Someone else initialised it meanwhile: nothing left to do here.
      if (attempt > 1 && !isUninitialized(node)) return undefined;
      const plan = this.planOrWarn(node, metadata);
      for (const { key, reason } of plan.discardedLabels) log.warn('discarding node label from cloud provider', { label: key, reason });
      for (const { kind, key, reason } of plan.discardedByRules) log.warn('not applying node rule', { kind, key, reason });
      return this.writer.initialize(name, plan.patch, signal).catch((e: unknown) => {
        if (isNotFound(e)) return undefined;
        throw e;
      });
    }, UPDATE_NODE_SPEC_RETRY, signal);
    if (!initialized) return;
    observeAge(this.metrics.taintRemovalDelay, initialized);

    await this.updateNodeAddresses(initialized, metadata.nodeAddresses, log, signal);
    log.info('successfully initialized node with cloud provider');
    this.ctx.recorder.event(nodeEventSubject(cached), 'Normal', EVENT_SYNCED, 'Node synced successfully');
    observeAge(this.metrics.initialNodeSyncDelay, initialized);
  }

  /** The initialisation plan; a node IP the provider does not know is a Warning event and an error (retried). */
  private planOrWarn(node: V1Node, metadata: InstanceMetadata): InitializationPlan {
    try {
      return planInitialization(node, metadata, { trackCloudLabels: this.opts.relabelNodes });
    } catch (e) {
      if (!(e instanceof ProvidedNodeIPError)) throw e;
      const message = `provided node ip for node "${nodeName(node)}" is not valid: ${e.message}`;
      this.ctx.recorder.event(nodeEventSubject(node), 'Warning', EVENT_PROVIDED_NODE_IP_INVALID, message);
      throw new Error(`failed to get node modifiers from cloud provider: ${message}`);
    }
  }

  /**
   * The periodic pass (upstream UpdateNodeStatus): every initialised managed node gets one
   * metadata call and an address write when its addresses changed; `statusWorkers` at a time. With
   * relabelNodes, the same answer also re-syncs its cloud labels; when it carries ruleEffects (a
   * provider with node rules), what the rules set is brought in line too.
   */
  async updateNodeStatus(signal?: AbortSignal): Promise<void> {
    const started = performance.now();
    const nodes = this.ctx.nodeInformer.store.list().filter((n) => this.ctx.isManagedNode(n) && !isUninitialized(n));
    await forEachLimited(nodes, this.opts.statusWorkers ?? this.opts.workers, async (node) => {
      const log = this.log.with({ node: nodeName(node) });
      try {
        const metadata = await this.instances.instanceMetadata(node, signal);
        // No metadata, nothing to compare the addresses with.
        if (metadata === null) return;
        // Each write hands on the node it wrote, so the next one's precondition is not stale.
        let latest = node;
        if (this.opts.relabelNodes) latest = await this.resyncLabels(latest, metadata, log, signal);
        if (metadata.ruleEffects) latest = await this.syncNodeRules(latest, metadata.ruleEffects, log, signal);
        await this.updateNodeAddresses(latest, metadata.nodeAddresses, log, signal);
      } catch (e) {
        log.error('error getting instance metadata for node addresses', { error: errorMessage(e) });
      }
    }, signal);
    this.log.debug(2, 'updated node status', { nodes: nodes.length, ms: Math.round(performance.now() - started) });
  }

  /** Brings the node's cloud labels in line with the metadata (label-resync.ts). */
  private resyncLabels(cached: V1Node, metadata: InstanceMetadata, log: Logger, signal?: AbortSignal): Promise<V1Node> {
    return this.keepInStep('node labels', cached, log, signal, (node) => {
      const plan = planLabelResync(node, metadata);
      for (const { key, reason } of plan.discarded) log.debug(4, 'not re-syncing node label from cloud provider', { label: key, reason });
      return plan.patch && (() => this.labelWriter.patchCloudLabels(nodeName(node), node.metadata?.resourceVersion, plan.patch!, signal)
        .then((written) => (log.info('re-synced node labels with cloud provider', { labels: JSON.stringify(plan.patch!.labels) }), written)));
    });
  }

  /** Brings what the node rules set on the node in line with what they give it now (rules-sync.ts). */
  private syncNodeRules(cached: V1Node, effects: NodeRuleEffects, log: Logger, signal?: AbortSignal): Promise<V1Node> {
    return this.keepInStep('node rules', cached, log, signal, (node) => {
      const plan = planNodeRules(node, effects);
      for (const { kind, key, reason } of plan.discarded) log.debug(4, 'not applying node rule', { kind, key, reason });
      return plan.patch && (() => this.ruleWriter.patchNodeRules(nodeName(node), node.metadata?.resourceVersion, plan.patch!, signal)
        .then((written) => (log.info('applied node rules', { changes: JSON.stringify(plan.patch) }), written)));
    });
  }

  /**
   * One metadata write of an initialised node, planned from the node as read and made under its
   * resourceVersion: on a conflict it is planned again from the node as the API has it; errors
   * are logged and left to the next pass. Returns the node as written (or as last read).
   */
  private async keepInStep(what: string, cached: V1Node, log: Logger, signal: AbortSignal | undefined, plan: (node: V1Node) => (() => Promise<V1Node>) | undefined): Promise<V1Node> {
    const name = nodeName(cached);
    let latest = cached;
    try {
      await retryOnConflict(async (attempt) => {
        if (attempt > 1) latest = await this.writer.get(name, signal);
        // Tainted again meanwhile? Initialisation owns it then.
        if (attempt > 1 && isUninitialized(latest)) return;
        const write = plan(latest);
        if (write) latest = await write();
      }, RELABEL_RETRY, signal);
    } catch (e) {
      if (!isNotFound(e)) log.error(`error re-syncing ${what}`, { error: errorMessage(e) });
    }
    return latest;
  }

  /**
   * Writes the node's addresses when they changed, computed from the node as read and written
   * only if it is still at that resourceVersion: on a conflict (the kubelet posted its status
   * meanwhile) the node is read again and the list recomputed, so nothing the kubelet added is
   * lost. Other errors are logged, not retried (upstream): the next pass tries again.
   */
  private async updateNodeAddresses(cached: V1Node, cloudAddresses: V1NodeAddress[], log: Logger, signal?: AbortSignal): Promise<void> {
    const name = nodeName(cached);
    try {
      await retryOnConflict(async (attempt) => {
        const node = attempt === 1 ? cached : await this.writer.get(name, signal);
        const decision = decideNodeAddresses(node, cloudAddresses);
        if (decision.action === 'skip') {
          log.debug(5, 'not updating node addresses', { reason: decision.reason });
        } else if (decision.action === 'invalid-node-ip') {
          log.error('failed to update node addresses', { error: decision.reason });
        } else {
          await this.writer.setAddresses(name, node.metadata?.resourceVersion, decision.addresses, signal);
        }
      }, DEFAULT_RETRY, signal);
    } catch (e) {
      if (isNotFound(e)) return;
      log.error('error patching node with cloud ip addresses', { error: errorMessage(e) });
    }
  }
}

function observeAge(histogram: NodeControllerMetrics['taintRemovalDelay'], node: V1Node): void {
  const ageMs = nodeAgeMs(node);
  if (ageMs !== undefined) histogram.observe(ageMs / 1000);
}
