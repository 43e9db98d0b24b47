import type { V1Node } from '@kubernetes/client-node';
import type { CloudProvider, Existence, Instances, ProviderPartition } from '../../cloud/types.ts';
import { isNodeReady, nodeEventSubject, nodeName } from '../../kube/node-helpers.ts';
import { systemClock, type Clock } from '../../util/time.ts';
import type { Logger } from '../../log.ts';
import { formatGoDuration } from '../../util/duration.ts';
import type { Controller, ControllerContext } from '../types.ts';
import { type BreakerVerdict, DeletionWindow, evaluateBreaker } from './breaker.ts';
import { type HoldReason, type NotFoundStreak, decide } from './decide.ts';
import { forEachLimited } from '../../util/parallel.ts';
import { askExistence, forEachShutDown, providerDeadline } from './existence.ts';
import type { Deadline } from '../../util/deadline.ts';
import { ANNOTATION_ACKNOWLEDGE_DELETION, QUARANTINE_TAINT, SHUTDOWN_TAINT, isDeletionAcknowledged } from './keys.ts';
import { type HeldReason, NodeLifecycleMetrics } from './metrics.ts';
import { ApiLifecycleWriter, type LifecycleWriter } from './writer.ts';
import { type LifecycleOptions, type LifecycleOptionsInput, resolveLifecycleOptions, shrinkConfirmReads } from './options.ts';
import { DISTRUST_REASONS, type Distrust, type GroupJudgement, ProviderSnapshots, type SnapshotJudgement, describeGroup, providerIDScheme } from './snapshot.ts';
import { sleep } from '../../util/time.ts';
import { errorMessage } from '../../util/errors.ts';
import { ACKNOWLEDGE_NODE_DELETIONS_ANNOTATION, type BreakerLink } from './breaker-link.ts';
import { type HeldConditionWriter, type HeldState, heldConditionPatch } from './held-condition.ts';
import { CLOUD_NODE_LIFECYCLE_CONTROLLER } from '../../names.ts';
import { SteadyPass } from './steady.ts';

/** Taint writes (and the shutdown questions before them) in flight at once. */
export const WRITE_CONCURRENCY = 10;

/** Seams for tests: time and the API writes. */
export interface LifecycleControllerDeps {
  clock?: Clock;
  writer?: LifecycleWriter;
  /** The breaker's state out to the EdgeCCMStatus object, an operator's acknowledgment in (src/status). */
  breakerLink?: BreakerLink;
  /** The EdgeCCMStatus object's name, for the messages that say how to acknowledge. */
  statusObject?: string;
  /** When set, each held node gets the condition edge-ccm.io/DeletionHeld saying why (held-condition.ts). */
  heldConditions?: HeldConditionWriter;
  /** false: every pass judges every node, even one repeating a quiet pass (steady.ts); for the tests that compare both. */
  steadyShortcut?: boolean;
}

/** What one pass did; returned for logs and tests. */
export interface MonitorReport {
  /** The answers acted on: the provider's, with those of an empty or shrunken answer taken as unknown. */
  answers: ReadonlyMap<string, Existence>;
  /** Nodes whose "not found" was not believed, and why. */
  distrusted: Map<string, Distrust>;
  held: Map<string, HeldReason>;
  quarantined: string[];
  deleted: string[];
  /** The breakers' verdicts together (one provider: its own). */
  breaker: BreakerVerdict<V1Node>;
  /** Each provider's breaker verdict, by provider name. */
  breakers: ReadonlyMap<string, BreakerVerdict<V1Node>>;
}

type Partition = ProviderPartition;

interface PartitionState {
  deletions: DeletionWindow;
  breakerOpen: boolean;
}

/** One provider's managed nodes in a pass, and what the pass found about them. */
interface Group {
  partition: Partition;
  state: PartitionState;
  nodes: V1Node[];
  asked: V1Node[];
  /** NotReady nodes whose machine exists: asked whether shut down once the writes (taints they lose first) are done. */
  existing: readonly V1Node[];
  candidates: V1Node[];
}

/** What judging and deciding every node gave: the report so far, the writes to make, and whether the pass is quiet (steady.ts). */
interface Decisions {
  report: Omit<MonitorReport, 'breaker' | 'breakers'>;
  writes: (() => Promise<void>)[];
  quiet: boolean;
}

/** Several verdicts read as one, for the EdgeCCMStatus object and the report: open when any is; counts added. */
function combined(verdicts: BreakerVerdict<V1Node>[]): BreakerVerdict<V1Node> {
  if (verdicts.length === 1) return verdicts[0]!;
  return {
    open: verdicts.some((v) => v.open),
    allowed: verdicts.reduce((n, v) => n + v.allowed, 0),
    gone: verdicts.reduce((n, v) => n + v.gone, 0),
    population: verdicts.reduce((n, v) => n + v.population, 0),
    deletable: verdicts.flatMap((v) => v.deletable),
    held: verdicts.flatMap((v) => v.held),
  };
}

/** What the lifecycle controller uses of the app's context: the provider's instances, the node informer, its writes, events and metrics. */
export type LifecycleControllerContext = Pick<ControllerContext, 'transport' | 'recorder' | 'logger' | 'registry' | 'nodeInformer' | 'isManagedNode'> & { cloud: Pick<CloudProvider, 'instances'> & Partial<Pick<CloudProvider, 'providerName' | 'partitionOf'>> };

/** Its name in logs, health checks and metrics: src/names.ts, the one list of names. */
export { CLOUD_NODE_LIFECYCLE_CONTROLLER };

/**
 * cloud-node-lifecycle-controller: every monitor period, look at every managed node; a Ready node
 * loses the shutdown taint, a NotReady one is checked against the provider: shut down -> tainted,
 * gone -> deleted. Beyond upstream, "gone" must survive a grace period, N answers in a row, the
 * deletion policy, the protection annotation and the circuit breaker before anything is deleted.
 */
export class CloudNodeLifecycleController implements Controller {
  readonly name = CLOUD_NODE_LIFECYCLE_CONTROLLER;
  readonly options: LifecycleOptions;
  private readonly instances: Instances;
  private readonly metrics: NodeLifecycleMetrics;
  private readonly log: Logger;
  private readonly clock: Clock;
  private readonly writer: LifecycleWriter;
  private readonly streaks = new Map<string, NotFoundStreak>();
  /** Last hold reason logged per node, so a held node is announced once, not every period. */
  private readonly announced = new Map<string, HeldReason>();
  /** Per provider (one with one provider): its deletions in the breaker's window and whether its breaker was open. */
  private readonly partitionStates = new Map<string, PartitionState>();
  /** What a node's answer is judged with (snapshot.ts): its providerID scheme; with several providers, its provider's platform. */
  private readonly groupOf: (node: V1Node) => string;
  /** The one provider's partition when the cloud has no partitions (one provider, as upstream). */
  private readonly single: Partition;
  /** UIDs deleted but maybe still in the informer's store: never judged (or counted) twice. */
  private readonly deletedUids = new Set<string>();
  private readonly snapshots: ProviderSnapshots;
  /** Last state logged per providerID scheme, so a distrusted answer is logged when it starts and ends, not every period. */
  private readonly groupStates = new Map<string, GroupJudgement['state']>();
  /** The last quiet pass's inputs, so a pass repeating it skips the judgement (steady.ts); undefined: shortcut off. */
  private readonly steady: SteadyPass | undefined;

  constructor(
    private readonly ctx: LifecycleControllerContext,
    opts: LifecycleOptionsInput = {},
    private readonly deps: LifecycleControllerDeps = {},
  ) {
    if (!ctx.cloud.instances) throw new Error('cloud provider does not support instances');
    this.instances = ctx.cloud.instances;
    this.options = resolveLifecycleOptions(opts);
    this.metrics = NodeLifecycleMetrics.for(ctx.registry);
    this.log = ctx.logger.with({ controller: this.name });
    this.clock = deps.clock ?? systemClock;
    this.writer = deps.writer ?? new ApiLifecycleWriter(ctx.transport);
    this.single = { name: ctx.cloud.providerName ?? '', platform: '', instances: this.instances };
    const partitionOf = ctx.cloud.partitionOf?.bind(ctx.cloud);
    this.groupOf = partitionOf ? (node) => partitionOf(node)?.platform ?? providerIDScheme(node) : providerIDScheme;
    this.steady = deps.steadyShortcut === false ? undefined : new SteadyPass();
    this.snapshots = new ProviderSnapshots({
      shrinkMaxShare: this.options.shrinkMaxShare,
      gracePeriodMs: this.options.gracePeriodMs,
      confirmReads: shrinkConfirmReads(this.options),
    });
  }

  async run(signal: AbortSignal): Promise<void> {
    if (!(await this.ctx.nodeInformer.waitForSync(signal))) return;
    this.log.info('starting cloud node lifecycle controller', {
      period: formatGoDuration(this.options.monitorPeriodMs),
      policy: this.options.deletionPolicy,
      grace: formatGoDuration(this.options.gracePeriodMs),
      threshold: this.options.notFoundThreshold,
    });
    // Upstream's wait.UntilWithContext: the period runs from the end of one pass to the next.
    while (!signal.aborted) {
      try {
        await this.monitorNodes(signal);
      } catch (e) {
        if (signal.aborted) break;
        this.log.error('node lifecycle pass failed', { error: errorMessage(e) });
      }
      await sleep(this.options.monitorPeriodMs, signal).catch(() => {});
    }
  }

  /** One pass over every managed node (upstream MonitorNodes). */
  async monitorNodes(signal?: AbortSignal): Promise<MonitorReport> {
    // One deadline per provider for every question of the pass (one timer, one signal), not one
    // per call: a provider that hangs uses up its own deadline, not the others'.
    const deadlines = new Map<Partition, Deadline>();
    const deadlineOf = (p: Partition) => {
      let d = deadlines.get(p);
      if (!d) deadlines.set(p, (d = providerDeadline(this.options.providerTimeoutMs, signal)));
      return d;
    };
    try {
      return await this.monitorPass(deadlineOf, signal);
    } finally {
      for (const d of deadlines.values()) d.dispose();
    }
  }

  /**
   * The managed nodes by the provider that answers for them: one group with one provider; with
   * several in one process (the cloud's partitions), each provider's own, and none for a node
   * whose platform is not known yet (never judged).
   */
  private groupNodes(): Group[] {
    const cloud = this.ctx.cloud;
    const list = this.ctx.nodeInformer.store.list(); // a new array each call: ours to change
    // Nothing deleted waits for the informer (the usual pass): every node is asked, and the two
    // lists are one array rather than two copies of every node.
    const skipping = this.deletedUids.size > 0;
    if (!cloud.partitionOf) {
      // One provider (as upstream): the list itself is the group, the unmanaged nodes taken out in place.
      let kept = 0;
      for (const n of list) if (this.ctx.isManagedNode(n)) list[kept++] = n;
      list.length = kept;
      if (kept === 0) return [];
      return [{ partition: this.single, state: this.partitionState(this.single), nodes: list, asked: skipping ? list.filter((n) => !this.deletedUids.has(n.metadata?.uid ?? '')) : list, existing: [], candidates: [] }];
    }
    const groups = new Map<Partition, Group>();
    for (const n of list) {
      if (!this.ctx.isManagedNode(n)) continue;
      const partition = cloud.partitionOf(n);
      if (!partition?.instances) continue;
      let group = groups.get(partition);
      if (!group) {
        const nodes: V1Node[] = [];
        groups.set(partition, (group = { partition, state: this.partitionState(partition), nodes, asked: skipping ? [] : nodes, existing: [], candidates: [] }));
      }
      group.nodes.push(n);
      if (skipping && !this.deletedUids.has(n.metadata?.uid ?? '')) group.asked.push(n);
    }
    return [...groups.values()];
  }

  private partitionState(partition: Partition): PartitionState {
    let state = this.partitionStates.get(partition.name);
    if (!state) {
      this.partitionStates.set(partition.name, (state = { deletions: new DeletionWindow(this.options.breaker.windowMs), breakerOpen: false }));
      this.metrics.seeProvider(partition.name);
    }
    return state;
  }

  private async monitorPass(deadlineOf: (p: Partition) => Deadline, signal?: AbortSignal): Promise<MonitorReport> {
    const now = this.clock.now();
    // Every managed node is asked, Ready ones too (upstream asks NotReady ones only): their
    // answers are what tells one machine gone from an empty or shrunken list (snapshot.ts). A
    // provider with the bulk call answers in one call; others are asked node by node.
    // One loop over the store for both lists: this runs every period over every node.
    const groups = this.groupNodes();
    this.forgetAbsent(groups);
    // Each provider asked about its own nodes, all at once: one that fails or hangs leaves only its nodes unknown.
    const replies = await Promise.all(groups.map(async (g) => {
      const reply = await askExistence(g.partition.instances!, g.asked, {
        deadline: deadlineOf(g.partition),
        timeoutMs: this.options.providerTimeoutMs,
        signal,
        onError: (failed, error) => this.log.error('error checking if nodes exist in the cloud provider', { provider: g.partition.name, nodes: failed.map(nodeName), error }),
      });
      countBy(reply, (answer, n) => this.metrics.existenceAnswers.inc({ answer, provider: g.partition.name }, n));
      return reply;
    }));
    // A pass repeating the last quiet one (the usual idle pass) decides nothing new: steady.ts.
    const repeated = this.steady?.repeated(groups, replies);
    let decisions: Decisions;
    if (repeated) {
      groups.forEach((group, g) => (group.existing = repeated.groups[g]!.existing));
      decisions = { report: { answers: repeated.answersByName, distrusted: new Map(), held: new Map(), quarantined: [], deleted: [] }, writes: [], quiet: true };
    } else {
      decisions = this.decideEveryNode(groups, replies, now, signal);
    }
    const { report, writes } = decisions;
    await forEachLimited(writes, WRITE_CONCURRENCY, (write) => write());
    // Then the shutdown question of each NotReady node whose machine exists (at idle, most of a
    // pass's work), as many at once as the writes, each provider under its own deadline.
    await Promise.all(groups.map((g) => forEachShutDown(g.partition.instances!, g.existing, WRITE_CONCURRENCY, {
      deadline: deadlineOf(g.partition),
      timeoutMs: this.options.providerTimeoutMs,
      signal,
      onError: ([node], error) => this.log.error('error checking if node is shutdown', { provider: g.partition.name, node: nodeName(node!), error }),
    }, (node) => this.addShutdownTaint(node, signal))));

    const link = this.deps.breakerLink;
    const viaObject = (n: V1Node) => !isDeletionAcknowledged(n) && (link?.acknowledges(nodeName(n)) ?? false);
    // The breaker counts per provider: one provider's mass "not found" holds back only its own nodes.
    const verdicts = new Map<Group, BreakerVerdict<V1Node>>();
    for (const group of groups) {
      const verdict = evaluateBreaker({
        candidates: group.candidates,
        acknowledged: (n) => isDeletionAcknowledged(n) || viaObject(n),
        managedCount: group.asked.length, // deletedUids changes only in the deletions below
        recentDeletions: group.state.deletions.count(now),
        overridden: this.options.breakerAcknowledged === true,
      }, this.options.breaker);
      verdicts.set(group, verdict);
      this.setBreaker(verdict, group);
      for (const node of verdict.held) this.holdByBreaker(node, verdict, report, group);
    }
    for (const [group, verdict] of verdicts) {
      for (const node of verdict.deletable) {
        if (await this.deleteNode(node, now, group.state, signal)) report.deleted.push(nodeName(node));
      }
    }
    const verdict = combined([...verdicts.values()]);
    // The object's acknowledgment let these through: spent (the publisher removes the annotation).
    if ([...verdicts.values()].some((v) => v.open && v.deletable.some(viaObject))) link?.acknowledgmentUsed();
    link?.report({ open: verdict.open, gone: verdict.gone, allowed: verdict.allowed, population: verdict.population, windowMs: this.options.breaker.windowMs, held: verdict.held.map(nodeName) });
    // A steady pass changes no condition (the quiet pass it repeats had none to change) and keeps the memory as it is.
    if (!repeated) {
      let conditionWrites = 0;
      for (const [group, v] of verdicts) conditionWrites += await this.writeHeldConditions(group.nodes, report, v, now, signal);
      if (decisions.quiet && conditionWrites === 0) this.steady?.remember(groups, replies, report.answers);
      else this.steady?.forget();
    }
    return { ...report, breaker: verdict, breakers: new Map([...verdicts].map(([g, v]) => [g.partition.name, v])) };
  }

  /**
   * The full pass: the answers judged (snapshot.ts) and every node decided. Quiet when it found
   * nothing to do and nothing to remember, which lets the next pass with the same nodes and
   * answers skip this (steady.ts).
   */
  private decideEveryNode(groups: Group[], replies: readonly (readonly Existence[])[], now: number, signal?: AbortSignal): Decisions {
    const asked = groups.length === 1 ? groups[0]!.asked : groups.flatMap((g) => g.asked);
    // By name for the judgement and the report: built on a full pass only, not on the steady ones.
    const provided = new Map<string, Existence>();
    groups.forEach((g, i) => g.asked.forEach((node, at) => provided.set(nodeName(node), replies[i]![at]!)));
    const snapshot = this.snapshots.judge(asked, provided, now, this.groupOf);
    this.reportSnapshot(snapshot, asked);
    const answers = snapshot.answers;
    let quiet = snapshot.distrusted.size === 0 && [...snapshot.groups.values()].every((g) => g.state === 'trusted');

    const report: Omit<MonitorReport, 'breaker' | 'breakers'> = { answers, distrusted: snapshot.distrusted, held: new Map(), quarantined: [], deleted: [] };
    // The writes are bound methods, not arrows: an arrow in this loop's body would capture its
    // variables, which then cost a scope object per node and iteration, write or not.
    const writes: (() => Promise<void>)[] = [];
    for (const group of groups) {
      const existing: V1Node[] = [];
      group.existing = existing;
      const candidates = group.candidates;
      for (const node of group.nodes) {
        const name = nodeName(node);
        if (this.deletedUids.size && this.deletedUids.has(node.metadata?.uid ?? '')) continue; // deleted; the informer has not caught up yet
        // The memory maps are empty in the usual pass: no lookups in them for every node then.
        const { action, streak } = decide(node, answers.get(name), this.streaks.size ? this.streaks.get(name) : undefined, now, this.options);
        if (streak) this.streaks.set(name, streak);
        else if (this.streaks.size) this.streaks.delete(name);
        if (action.kind !== 'hold' && this.announced.size) this.announced.delete(name);
        switch (action.kind) {
          case 'ready':
            if (action.removeTaints.length > 0) writes.push(this.removeTaints.bind(this, node, action.removeTaints, signal));
            break;
          case 'exists':
            if (action.removeTaints.length > 0) writes.push(this.removeTaints.bind(this, node, action.removeTaints, signal));
            existing.push(node);
            break;
          case 'unknown':
            quiet = false;
            if (!snapshot.distrusted.has(name)) this.log.debug(2, 'cloud provider cannot tell whether node exists; doing nothing', { node: name });
            break;
          case 'hold':
            this.hold(node, action.reason, report, streak, group.partition.name);
            break;
          case 'quarantine':
            this.hold(node, 'policy', report, streak, group.partition.name);
            report.quarantined.push(name);
            if (!action.alreadyTainted) writes.push(this.quarantine.bind(this, node, signal));
            break;
          case 'delete':
            candidates.push(node);
            break;
        }
      }
    }
    // Two of these are guards, never the only reason: a streak comes with a hold, and a judgement
    // other than 'trusted' either distrusts answers or repeats itself too ('no-read', 'confirmed').
    quiet &&= writes.length === 0 && report.held.size === 0 && groups.every((g) => g.candidates.length === 0) &&
      this.streaks.size === 0 && this.announced.size === 0 && this.deletedUids.size === 0;
    return { report, writes, quiet };
  }

  /**
   * Metrics, a log line when a scheme's answer starts or stops being distrusted, and a Warning
   * event per period on each NotReady node whose deletion that prevents (aggregated by the
   * recorder while the message stays the same).
   */
  private reportSnapshot(snapshot: SnapshotJudgement, asked: readonly V1Node[]): void {
    for (const reason of DISTRUST_REASONS) {
      this.metrics.answerDistrusted.set({ reason }, [...snapshot.groups.values()].filter((g) => g.state === reason).length);
    }
    countBy(snapshot.distrusted.values(), (reason, n) => this.metrics.answersDistrusted.inc({ reason }, n));

    for (const group of snapshot.groups.values()) {
      const before = this.groupStates.get(group.scheme);
      this.groupStates.set(group.scheme, group.state);
      const fields = { provider: describeGroup(group.scheme), nodes: group.nodes, found: group.found, notFound: group.notFound, listedBefore: group.heldBefore, lost: group.lost };
      if (group.state === before) continue;
      if (group.state === 'empty') {
        this.log.error('cloud provider answer listed none of the managed nodes; taking every "not found" as unknown (an outage or lost permissions, not every machine gone)', fields);
      } else if (group.state === 'shrunk') {
        this.log.error('cloud provider answer lost more machines than allowed at once; taking their "not found" as unknown until consecutive answers confirm it',
          { ...fields, maxShare: this.options.shrinkMaxShare, confirmAfter: formatGoDuration(this.options.gracePeriodMs) });
      } else if (group.state === 'confirmed') {
        this.log.info('cloud provider answer with fewer machines confirmed by consecutive answers; believing it', fields);
      } else if (before === 'empty' || before === 'shrunk') {
        this.log.info('cloud provider answer believed again', fields);
      }
    }
    for (const scheme of this.groupStates.keys()) if (!snapshot.groups.has(scheme)) this.groupStates.delete(scheme);

    if (snapshot.distrusted.size === 0) return;
    for (const node of asked) {
      const reason = snapshot.distrusted.get(nodeName(node));
      if (!reason || isNodeReady(node)) continue;
      const group = snapshot.groups.get(this.groupOf(node))!;
      this.ctx.recorder.event(nodeEventSubject(node), 'Warning', 'ProviderAnswerDistrusted', reason === 'empty'
        ? `Not judging node ${nodeName(node)} gone: the cloud provider's answer listed none of the ${group.nodes} managed nodes with ${describeGroup(group.scheme)}; ` +
          'an empty answer is an outage or lost permissions, never evidence that every machine is gone'
        : `Not judging node ${nodeName(node)} gone yet: the cloud provider's answer lost ${group.lost} of the ${group.heldBefore} machines with ${describeGroup(group.scheme)} ` +
          `it listed before, more than the share ${this.options.shrinkMaxShare} allowed; it is believed once consecutive answers confirm the smaller list for ${formatGoDuration(this.options.gracePeriodMs)}`);
    }
  }

  private forgetAbsent(groups: readonly Group[]): void {
    // Nothing remembered (the usual pass): no list of every node, no sets of their names and UIDs to build.
    if (this.streaks.size === 0 && this.announced.size === 0 && this.deletedUids.size === 0) return;
    const nodes = groups.flatMap((g) => g.nodes);
    const present = new Set(nodes.map(nodeName));
    for (const name of this.streaks.keys()) if (!present.has(name)) this.streaks.delete(name);
    for (const name of this.announced.keys()) if (!present.has(name)) this.announced.delete(name);
    const presentUids = new Set(nodes.map((n) => n.metadata?.uid ?? ''));
    for (const uid of this.deletedUids) if (!presentUids.has(uid)) this.deletedUids.delete(uid);
  }

  private hold(node: V1Node, reason: HoldReason, report: Omit<MonitorReport, 'breaker' | 'breakers'>, streak: NotFoundStreak | undefined, provider: string): void {
    const name = nodeName(node);
    report.held.set(name, reason);
    this.metrics.deletionsHeld.inc({ reason, provider });
    const fields = { node: name, reason, notFoundAnswers: streak?.count, notFoundFor: streak && formatGoDuration(this.clock.now() - streak.since) };
    if (reason === 'grace') {
      this.log.debug(2, 'node not found in the cloud provider; waiting for the grace period and threshold', fields);
    } else if (this.announced.get(name) !== reason) {
      this.log.info(reason === 'protected' ? 'node not found in the cloud provider but protected from deletion; keeping it' : `node not found in the cloud provider; keeping it (deletion policy ${this.options.deletionPolicy})`, fields);
    }
    this.announced.set(name, reason);
  }

  /** The DeletionHeld condition on every managed node, as this pass left it (only changes are written); returns how many it wrote or tried to. */
  private async writeHeldConditions(nodes: V1Node[], report: Omit<MonitorReport, 'breaker' | 'breakers'>, verdict: BreakerVerdict<V1Node>, now: number, signal?: AbortSignal): Promise<number> {
    const writer = this.deps.heldConditions;
    if (!writer) return 0;
    const at = new Date(now);
    const writes: (() => Promise<void>)[] = [];
    // No node held or distrusted (the usual pass): no node's state to look up, only stale conditions to remove.
    const anyHeld = report.held.size > 0 || report.distrusted.size > 0;
    for (const node of nodes) {
      if (this.deletedUids.size && this.deletedUids.has(node.metadata?.uid ?? '')) continue;
      const patch = heldConditionPatch(node, anyHeld ? this.heldState(node, report, verdict) : undefined, at);
      // Bound, not an arrow: see monitorPass (this loop too runs for every node every period).
      if (patch) writes.push(this.writeHeldCondition.bind(this, writer, node, patch, signal));
    }
    await forEachLimited(writes, WRITE_CONCURRENCY, (write) => write());
    return writes.length;
  }

  private async writeHeldCondition(writer: HeldConditionWriter, node: V1Node, patch: Record<string, unknown>, signal?: AbortSignal): Promise<void> {
    try {
      await writer.write(node, patch, signal);
    } catch (e) {
      this.log.error('cannot write the DeletionHeld condition of node', { node: nodeName(node), error: errorMessage(e) });
    }
  }

  /** Why the node is kept although its machine is not found, and what lets it go; undefined when it is not held. */
  private heldState(node: V1Node, report: Omit<MonitorReport, 'breaker' | 'breakers'>, verdict: BreakerVerdict<V1Node>): HeldState | undefined {
    const name = nodeName(node);
    const reason = report.held.get(name);
    const streak = this.streaks.get(name);
    switch (reason) {
      case 'grace':
        return {
          reason: 'GracePeriod',
          message: `Not found in the cloud provider since ${streak ? new Date(streak.since).toISOString() : 'now'}; deleted once not found for ` +
            `${formatGoDuration(this.options.gracePeriodMs)} and ${this.options.notFoundThreshold} answers in a row`,
        };
      case 'protected':
        return { reason: 'Protected', message: 'Not found in the cloud provider, but annotated node.edge-ccm.io/protect-from-deletion=true: kept until the annotation is removed' };
      case 'policy':
        return { reason: 'DeletionPolicy', message: `Not found in the cloud provider; kept by --node-deletion-policy=${this.options.deletionPolicy}: delete the node yourself once the machine is gone` };
      case 'breaker':
        return {
          reason: 'Breaker',
          message: `Not found in the cloud provider, but the deletion breaker is open: ${verdict.gone} of ${verdict.population} managed nodes judged gone within ` +
            `${formatGoDuration(this.options.breaker.windowMs)}, ${verdict.allowed} allowed. If the machine is gone: kubectl annotate node ${name} ` +
            `${ANNOTATION_ACKNOWLEDGE_DELETION}=true, or let every held node go: ` +
            `kubectl annotate edgeccmstatus ${this.deps.statusObject ?? '<lease name>'} ${ACKNOWLEDGE_NODE_DELETIONS_ANNOTATION}=true`,
        };
    }
    const distrust = report.distrusted.get(name);
    if (distrust && !isNodeReady(node)) {
      return {
        reason: 'ProviderAnswerDistrusted',
        message: distrust === 'empty'
          ? 'The cloud provider\'s answer listed none of its managed nodes: an outage or lost permissions, never taken as every machine gone; kept'
          : `The cloud provider's answer lost more machines than --node-deletion-shrink-max-share=${this.options.shrinkMaxShare} allows at once; kept until consecutive answers confirm the smaller list for ${formatGoDuration(this.options.gracePeriodMs)}`,
      };
    }
    return undefined;
  }

  private setBreaker(verdict: BreakerVerdict<V1Node>, group: Group): void {
    const provider = group.partition.name;
    this.metrics.breakerOpen.set({ provider }, verdict.open ? 1 : 0);
    const fields = { provider, gone: verdict.gone, allowed: verdict.allowed, managed: verdict.population, window: formatGoDuration(this.options.breaker.windowMs) };
    if (verdict.open && !group.state.breakerOpen) {
      this.log.error('node deletion circuit breaker open: too many nodes judged gone at once, deleting none of them', { ...fields, held: verdict.held.map(nodeName) });
    } else if (!verdict.open && group.state.breakerOpen) {
      this.log.info('node deletion circuit breaker closed', fields);
    }
    group.state.breakerOpen = verdict.open;
  }

  private holdByBreaker(node: V1Node, verdict: BreakerVerdict<V1Node>, report: Omit<MonitorReport, 'breaker' | 'breakers'>, group: Group): void {
    const name = nodeName(node);
    report.held.set(name, 'breaker');
    this.metrics.deletionsHeld.inc({ reason: 'breaker', provider: group.partition.name });
    this.ctx.recorder.event(nodeEventSubject(node), 'Warning', 'NodeDeletionHeld',
      `Not deleting node ${name} although it does not exist in the cloud provider: ${verdict.gone} of ${verdict.population} managed nodes${this.ofProvider(group)} ` +
      `were judged gone within ${formatGoDuration(this.options.breaker.windowMs)}, more than the ${verdict.allowed} allowed. ` +
      `If the machine is really gone, annotate the node ${ANNOTATION_ACKNOWLEDGE_DELETION}=true`);
  }

  /** Upstream: a Normal DeletingNode event, then the delete; a Warning DeletingNodeFailed on failure. */
  /** " of the NAME provider" when several providers run here (its nodes are counted apart), else nothing. */
  private ofProvider(group: Group): string {
    return this.ctx.cloud.partitionOf ? ` of the ${group.partition.name} provider` : '';
  }

  private async deleteNode(node: V1Node, now: number, state: PartitionState, signal?: AbortSignal): Promise<boolean> {
    const name = nodeName(node);
    const subject = nodeEventSubject(node);
    this.log.info('deleting node since it is no longer present in cloud provider', { node: name });
    this.ctx.recorder.event(subject, 'Normal', 'DeletingNode', `Deleting node ${name} because it does not exist in the cloud provider`);
    try {
      const outcome = await this.writer.deleteNode(node, signal);
      if (outcome === 'replaced') {
        this.log.info('node was re-registered since it was judged gone; keeping the new one', { node: name });
        return false;
      }
      if (outcome === 'changed') {
        // Not deleted: Ready again, or changed since the judgement; the next period judges the new copy.
        this.log.info('node is Ready again or changed since it was judged gone; not deleting it', { node: name });
        this.ctx.recorder.event(subject, 'Normal', 'DeletingNodeCancelled', `Not deleting node ${name}: it is Ready again or changed since it was judged gone`);
        return false;
      }
      this.deletedUids.add(node.metadata?.uid ?? '');
      state.deletions.record(now);
      this.streaks.delete(name);
      if (outcome === 'deleted') this.metrics.nodesDeleted.inc();
      return outcome === 'deleted';
    } catch (e) {
      this.log.error('unable to delete node', { node: name, error: errorMessage(e) });
      this.ctx.recorder.event(subject, 'Warning', 'DeletingNodeFailed', `Failed deleting node ${name}: ${errorMessage(e)}`);
      return false;
    }
  }

  /** Upstream: a node that exists and is shut down gets the shutdown taint. */
  private async addShutdownTaint(node: V1Node, signal?: AbortSignal): Promise<void> {
    try {
      await this.writer.addTaint(node, SHUTDOWN_TAINT, signal);
    } catch (e) {
      this.log.error('failed to apply shutdown taint to node, it may have been deleted', { node: nodeName(node), error: errorMessage(e) });
    }
  }

  private async quarantine(node: V1Node, signal?: AbortSignal): Promise<void> {
    const name = nodeName(node);
    try {
      if (!(await this.writer.addTaint(node, QUARANTINE_TAINT, signal))) return;
      this.ctx.recorder.event(nodeEventSubject(node), 'Warning', 'NodeQuarantined',
        `Node ${name} does not exist in the cloud provider; tainted ${QUARANTINE_TAINT.key}:${QUARANTINE_TAINT.effect} and kept (deletion policy taint)`);
    } catch (e) {
      this.log.error('failed to apply quarantine taint to node', { node: name, error: errorMessage(e) });
    }
  }

  private async removeTaints(node: V1Node, keys: readonly string[], signal?: AbortSignal): Promise<void> {
    try {
      await this.writer.removeTaints(node, keys, signal);
    } catch (e) {
      this.log.error('error patching node taints', { node: nodeName(node), taints: keys, error: errorMessage(e) });
    }
  }
}

/**
 * Calls `add` once per distinct value with its count (one metric update per label, not per node).
 * The values are few (three answers, two reasons) and many (one per node, every period): a
 * search of the few seen so far, not a map's hashing for each.
 */
function countBy<T>(values: Iterable<T>, add: (value: T, count: number) => void): void {
  const seen: T[] = [];
  const counts: number[] = [];
  for (const value of values) {
    const i = seen.indexOf(value);
    if (i >= 0) counts[i]!++;
    else {
      seen.push(value);
      counts.push(1);
    }
  }
  for (let i = 0; i < seen.length; i++) add(seen[i]!, counts[i]!);
}
