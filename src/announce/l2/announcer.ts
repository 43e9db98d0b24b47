import { ENDPOINT_SLICES } from '../../kube/endpoint-slices.ts';
import type { V1EndpointSlice, V1Node, V1Service } from '@kubernetes/client-node';
import type { Registry } from 'prom-client';
import type { LoadBalancerConfig } from '../../lb/config-model.ts';
import type { EventRecorder } from '../../kube/event-recorder.ts';
import { Informer, stripManagedFields } from '../../kube/informer/index.ts';
import { isNodeReady, nodeAddresses, nodeName } from '../../kube/node-helpers.ts';
import { NODES, SERVICES } from '../../kube/resources.ts';
import type { KubeTransport } from '../../kube/transport.ts';
import type { Logger } from '../../log.ts';
import type { IP } from '../../net/ip.ts';
import { DEFAULT_PROBE_COUNT, DEFAULT_PROBE_INTERVAL_MS, probeAddress } from '../../net/l2/probe.ts';
import { L2Responder, type ResponderEvent } from '../../net/l2/responder.ts';
import { rankNodes } from '../../net/l2/election.ts';
import { errorMessage } from '../../util/errors.ts';
import { LogLimiter } from '../../util/log-limiter.ts';
import { announcementTable, electAddresses, reassignedAddresses, standbyInterfaces, type AddressElection, type ClusterView } from './election.ts';
import { linkUp, subnetInterfaceNow } from './interfaces.ts';
import { Liveness, loggedLivenessProblems, type LivenessOptions } from './liveness.ts';
import { WarmUp } from './warm-up.ts';
import { decodeView, disagreeing, electionView, takeoverBlocker } from './view.ts';
import { L2AnnouncerMetrics } from './metrics.ts';

/**
 * `edge-ccm speaker`: one per node. Watches Services, Nodes and EndpointSlices (list/watch only:
 * it writes nothing but Events), hears the other speakers' heartbeats, elects a node per address of
 * every `announce: l2` pool and answers ARP/NDP for the addresses its own node is elected for.
 *
 * Until one liveness timeout has passed since the start it announces nothing and its heartbeats
 * say "warming": it has not yet heard the speakers that are up, and would elect itself for their
 * addresses; the others do not elect it meanwhile, so they keep answering. Then it says "ready",
 * and an address moves to it only when every speaker it hears reports the same view (view.ts):
 * the incumbent has released it by then. On SIGTERM it stops answering, then says "leaving",
 * so the others take over at once.
 */


/** A claim for an address this long after our takeover is a conflict (before: the former owner's last announcements). */
const CONFLICT_GRACE_MS = 10_000;
/** Refused heartbeats and liveness errors: one log line per reason (or kind) per this window. */
const LIVENESS_LOG_WINDOW_MS = 60_000;
/** Another station's claims of an announced address: one log line per address per this window (a host on the LAN sends them at will). */
const CONFLICT_LOG_WINDOW_MS = 10_000;

export interface L2AnnouncerOptions {
  node: string;
  transport: KubeTransport;
  pools: LoadBalancerConfig;
  liveness: Omit<LivenessOptions, 'node' | 'peers' | 'onChange' | 'onRefused' | 'onError'>;
  logger: Logger;
  registry: Registry;
  events?: EventRecorder;
  /** The interface holding an address's subnet (default: this host's interfaces). */
  subnetInterface?: (ip: IP) => string | undefined;
  floodPauseMs?: number;
  /** Probes of a newly assigned address before it is first announced (count 0: none); default 3, 1 s apart. */
  probe?: { count: number; intervalMs: number };
}

/**
 * An address a probe found in use is probed again after 5 s, then 10, 20, 40, 60 s and every 60 s
 * while it stays assigned: the answer can be a fellow speaker's that still announced it while the
 * election settled (seen at load in the node-footprint bench: an address never announced by any
 * node), and a foreign host may give the address up.
 */
const REPROBE_FIRST_MS = 5_000;
const REPROBE_MAX_MS = 60_000;

/** Reason of the Warning event when a probe finds a newly assigned address in use by another station. */
export const ADDRESS_IN_USE_REASON = 'L2AddressInUse';

/** How long the services' and slices' changes are gathered before one reconcile (scheduleSoon). */
const SERVICE_CHANGES_COALESCE_MS = 50;

export class L2Announcer {
  private readonly services: Informer<V1Service>;
  private readonly nodes: Informer<V1Node>;
  private readonly slices: Informer<V1EndpointSlice>;
  private readonly liveness: Liveness;
  private readonly responder: L2Responder;
  private readonly metrics: L2AnnouncerMetrics;
  private readonly log: Logger;
  private pools: LoadBalancerConfig;
  private scheduled = false;
  private soonTimer?: ReturnType<typeof setTimeout>;
  private readonly warmUp: WarmUp;
  private elections: AddressElection[] = [];
  /** Address -> when this node took it over (for telling the former owner's frames from a conflict). */
  private readonly takenOverAt = new Map<string, number>();
  /** Address -> the owner before the last change, as this speaker saw it (for the takeover event). */
  private readonly previousOwner = new Map<string, string | undefined>();
  private lastProblems = '';
  /** A reconcile has run since the warm-up: addresses it saw were assigned before, not new. */
  private reconciledOnce = false;
  /** Newly assigned addresses this node is elected for, being probed: not announced yet. */
  private readonly probing = new Map<string, AbortController>();
  /**
   * Addresses a probe found in use: not announced by this node, probed again after a back-off
   * (`retry`) while they stay assigned.
   */
  private readonly inUse = new Map<string, { mac: string; interface: string; retry: ReturnType<typeof setTimeout> }>();
  /** Addresses whose back-off ended: the next reconcile probes them again if this node still owns them. */
  private readonly probeAgain = new Set<string>();
  /** Address -> probe rounds in a row that found it held, and the MAC last reported: kept across the retries, dropped with the assignment. */
  private readonly heldHistory = new Map<string, { rounds: number; reported: string }>();
  private readonly livenessLog = new LogLimiter(LIVENESS_LOG_WINDOW_MS);
  /** Keyed by announced address: as bounded as the configuration. */
  private readonly conflictLog = new LogLimiter(CONFLICT_LOG_WINDOW_MS);
  private peerCache?: Map<string, string[]>;
  private lastAlive = '';
  private lastHeld = '';
  private wasIsolated = false;
  /** The alive set when this speaker last heard another: what it keeps electing by while isolated. */
  private lastHeardView?: Set<string>;
  /** Shutting down: nothing is announced again. */
  private stopping = false;
  /** Heard peers again after hearing none: what it answered alone is answered again only once the views agree. */
  private rejoining = false;
  /** When this speaker last heard a peer again after hearing none (isolation over). */
  private rejoinedAt?: number;
  private rejoinTimer?: ReturnType<typeof setTimeout>;
  /** Interfaces that lost their link while this speaker was isolated -> when it came back (undefined: still down). */
  private readonly linkLost = new Map<string, number | undefined>();

  constructor(private readonly opts: L2AnnouncerOptions) {
    this.log = opts.logger.with({ component: 'speaker', node: opts.node });
    this.pools = opts.pools;
    const common = { transport: opts.transport, logger: opts.logger };
    // Without their managedFields (nothing here reads them, often half an object): what the stores
    // hold is memory every collection and the allocator's purges go over.
    this.services = new Informer<V1Service>({ ...common, type: SERVICES, transform: stripManagedFields });
    this.nodes = new Informer<V1Node>({ ...common, type: NODES, transform: slimNode });
    this.slices = new Informer<V1EndpointSlice>({ ...common, type: ENDPOINT_SLICES, transform: stripManagedFields });
    const changed = { onAdd: () => this.scheduleSoon(), onUpdate: () => this.scheduleSoon(), onDelete: () => this.scheduleSoon() };
    this.services.addHandlers(changed);
    const nodeChanged = () => {
      this.peerCache = undefined;
      this.schedule();
    };
    this.nodes.addHandlers({ onAdd: nodeChanged, onUpdate: nodeChanged, onDelete: nodeChanged });
    this.slices.addHandlers(changed);
    this.liveness = new Liveness({
      ...opts.liveness,
      node: opts.node,
      peers: () => this.peerAddresses(),
      onChange: (alive) => {
        const names = [...alive].sort().join(',');
        if (names !== this.lastAlive) this.log.info('speakers heard changed', { alive: names });
        this.lastAlive = names;
        this.schedule();
      },
      ...loggedLivenessProblems(this.log, this.livenessLog),
      onFrozen: (gapMs) => this.rejoinAfterPause(gapMs),
    });
    this.responder = new L2Responder({
      floodPauseMs: opts.floodPauseMs,
      onEvent: (e) => this.onResponderEvent(e),
      // Just woken from a pause, before the liveness check has judged it: answer nothing (rejoinAfterPause follows).
      mayAnswer: () => this.liveness.stalledFor() <= this.liveness.timeoutMs,
    });
    this.warmUp = new WarmUp(this.liveness.timeoutMs, () => {
      this.log.info('liveness warm-up over: announcing', { alive: [...this.liveness.alive()].sort().join(',') });
      this.schedule();
    });
    this.metrics = new L2AnnouncerMetrics(opts.registry, () => ({ responder: this.responder.stats(), liveness: this.liveness.stats(), announcing: this.responder.announcing().length }));
  }

  /** Runs until the signal aborts; then stops answering, and tells the others it leaves (they take over at once). */
  async run(signal: AbortSignal): Promise<void> {
    await this.liveness.start();
    const informers = [this.services, this.nodes, this.slices].map((i) => i.run(signal));
    this.warmUp.start();
    try {
      await Promise.all(informers);
    } finally {
      this.warmUp.stop();
      clearTimeout(this.rejoinTimer);
      clearTimeout(this.soonTimer);
      for (const abort of this.probing.values()) abort.abort();
      for (const held of this.inUse.values()) clearTimeout(held.retry);
      // Silent first, then "leaving": the others never answer while this node still does.
      this.stopping = true;
      this.responder.close();
      await this.liveness.leave();
    }
  }

  /**
   * Woken from a pause longer than the liveness timeout (SIGSTOP, a frozen cgroup, a blocked event
   * loop): the others counted this speaker dead and took its addresses. It stops answering at once
   * and joins again as a returning speaker (warming, then the ordered handback), instead of
   * answering beside the new holders until the views agree (seen in the soak: 13 ms of two
   * answers, and requests queued during the pause answered 0.75 s late).
   */
  private rejoinAfterPause(gapMs: number): void {
    if (this.stopping) return;
    this.log.warn('this process did not run for longer than the liveness timeout: the others have taken its addresses; joining again as a returning speaker', { pausedMs: Math.round(gapMs), timeoutMs: this.liveness.timeoutMs });
    this.metrics.pauses.inc();
    this.responder.setAnnouncements(new Map());
    this.liveness.setState('warming', '');
    this.warmUp.start();
  }

  /** Replaces the pools (the config file changed). */
  setPools(pools: LoadBalancerConfig): void {
    this.pools = pools;
    this.schedule();
  }

  /** What this speaker elects, for tests and the debug log. */
  currentElections(): readonly AddressElection[] {
    return this.elections;
  }

  private peerAddresses(): Map<string, string[]> {
    if (this.peerCache) return this.peerCache;
    const peers = new Map<string, string[]>();
    for (const node of this.nodes.store.list()) {
      const addresses = nodeAddresses(node);
      // InternalIP first: heartbeats stay on the node network where there is one.
      const ordered = [...addresses.filter((a) => a.type === 'InternalIP'), ...addresses.filter((a) => a.type === 'ExternalIP')].map((a) => a.address);
      peers.set(nodeName(node), ordered);
    }
    this.peerCache = peers;
    return peers;
  }

  /**
   * A reconcile within SERVICE_CHANGES_COALESCE_MS, for the services' and slices' changes: each
   * reconcile re-elects every address, and a burst of writes (3 per new service: the service, its
   * status, its slice) made one per watch event: at 1,000 services 20 CPU-ms and the garbage of a
   * full election per event, the heap growing to hold it (BENCHMARKS.md, "Footprint on every
   * node"). Liveness and node changes, the failover's path, still reconcile at once.
   */
  private scheduleSoon(): void {
    if (this.soonTimer || this.scheduled) return;
    this.soonTimer = setTimeout(() => {
      this.soonTimer = undefined;
      this.schedule();
    }, SERVICE_CHANGES_COALESCE_MS);
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    queueMicrotask(() => {
      this.scheduled = false;
      this.reconcile();
    });
  }

  private reconcile(): void {
    if (this.stopping || !this.warmUp.over || ![this.services, this.nodes, this.slices].every((i) => i.hasSynced())) return;
    const nodes = this.nodes.store.list();
    const peers = this.liveness.reports();
    const view = electionView({
      self: this.opts.node,
      selfReady: true,
      readyNodes: new Set(nodes.filter(isNodeReady).map(nodeName)),
      peers,
      lastHeard: this.lastHeardView,
    });
    const alive = view.alive;
    this.metrics.alive.set(this.liveness.alive().size);
    this.metrics.isolated.set(view.isolated ? 1 : 0);
    if (view.isolated !== this.wasIsolated) {
      if (view.isolated) this.log.warn('hearing no other speaker: trusting the Node objects\' Ready condition until one is heard (docs/networking/l2.md#asymmetric-loss)', { alive: [...alive].sort().join(',') });
      else this.log.info('hearing other speakers again');
    }
    if (this.wasIsolated && !view.isolated) {
      this.rejoining = true;
      this.rejoinedAt = performance.now();
      // The hold below ends by itself: reconcile again once every live peer has had time to be heard.
      clearTimeout(this.rejoinTimer);
      this.rejoinTimer = setTimeout(() => this.schedule(), this.liveness.timeoutMs + 10);
    }
    this.wasIsolated = view.isolated;
    const elections = electAddresses({
      pools: this.pools.pools,
      classes: this.pools.classes,
      services: this.services.store.list(),
      nodes,
      endpointSlices: this.slices.store.list(),
      alive,
    });
    const before = new Map(this.elections.map((e) => [e.address, e.owner]));
    for (const e of elections) {
      if (before.has(e.address) && before.get(e.address) !== e.owner) this.previousOwner.set(e.address, before.get(e.address));
      if (!before.has(e.address)) this.previousOwner.delete(e.address);
    }
    const reassigned = reassignedAddresses(this.elections, elections);
    this.forgetGone(elections, reassigned);
    this.elections = elections;
    this.metrics.elected.reset();
    for (const e of elections) this.metrics.elected.set({ address: e.address, node: e.owner ?? '', pool: e.pool.name }, 1);

    const placeOf = this.opts.subnetInterface ?? subnetInterfaceNow();
    const { table, unplaced } = announcementTable(elections, this.opts.node, placeOf);
    const fresh = this.reconciledOnce ? elections.filter((e) => (!before.has(e.address) || reassigned.has(e.address) || this.probeAgain.has(e.address)) && e.owner === this.opts.node).map((e) => e.address) : [];
    this.probeAgain.clear();
    this.reconciledOnce = true;
    for (const address of fresh) this.startProbe(address, [...table].filter(([, addresses]) => addresses.includes(address)).map(([iface]) => iface));
    for (const [iface, addresses] of table) table.set(iface, addresses.filter((a) => !this.probing.has(a) && !this.inUse.has(a)));
    // A takeover waits until no speaker heard may still hold the address (view.ts).
    const cluster = { pools: this.pools.pools, classes: this.pools.classes, services: this.services.store.list(), nodes, endpointSlices: this.slices.store.list() };
    const others = new Set([...peers.keys(), ...nodes.map(nodeName)]);
    const owners = new Map<string, Map<string, string | undefined> | undefined>();
    const ownersUnder = (digest: string) => {
      if (!owners.has(digest)) {
        const set = decodeView(digest, alive, others);
        owners.set(digest, set && new Map(electAddresses({ ...cluster, alive: set }).map((e) => [e.address, e.owner])));
      }
      return owners.get(digest);
    };
    const answering = new Set([...this.responder.announcements()].flatMap(([iface, addresses]) => addresses.map((a) => `${iface} ${a}`)));
    const held: string[] = [];
    const waitingFor = new Set<string>();
    const disagree = disagreeing(peers, view.digest);
    // The view kept for isolation is one the peers heard agree on: peers fall silent one by one (a
    // deaf speaker's heartbeats expire a few ms apart), and a view taken half-way (one peer gone,
    // the other still saying it is alive) made a deaf speaker take that peer's address once it heard
    // none (CI: 42 of 80 probes answered twice).
    if (!view.isolated && view.alive.size > 1 && !disagree.length) this.lastHeardView = view.alive;
    if (!disagree.length) this.rejoining = false;
    if (disagree.length) {
      // Back from isolation (a partition healed), even what it answers waits: the others may have taken it meanwhile.
      for (const [iface, addresses] of table) {
        table.set(iface, addresses.filter((a) => {
          if (answering.has(`${iface} ${a}`) && !this.rejoining) return true;
          const blocker = takeoverBlocker(a, this.opts.node, view.digest, peers, ownersUnder);
          if (!blocker) return true;
          held.push(a);
          waitingFor.add(blocker);
          return false;
        }));
      }
    }
    // Back from isolation, the peers are heard one by one (a heartbeat each interval): a peer not
    // heard yet may still answer what this node would take (seen in the soak: a node whose link came
    // back took an address from a peer it had not heard yet, 94 ms of two answers). For one liveness
    // timeout it takes nothing it does not answer already; the barrier above then judges.
    if (this.rejoinedAt !== undefined && performance.now() - this.rejoinedAt < this.liveness.timeoutMs) {
      const unheard = unheardHolders(cluster, this.opts.node, this.liveness.alive());
      for (const [iface, addresses] of table) {
        table.set(iface, addresses.filter((a) => {
          const blocker = unheard.get(a);
          if (answering.has(`${iface} ${a}`) || !blocker) return true;
          if (!held.includes(a)) held.push(a);
          waitingFor.add(blocker);
          return false;
        }));
      }
    }
    // Isolated, an interface that lost its link answers nothing from then on, and keeps silent once
    // the link is back until a peer is heard (the rejoin above then orders the handover) or one
    // liveness timeout has passed (nobody else is there). Without this, a node whose cable came back
    // answered its old addresses beside their new holders until the first heartbeat (the soak's
    // node-link-down heals, one probe round of two answers).
    if (view.isolated) {
      const now = performance.now();
      for (const iface of table.keys()) {
        if (!linkUp(iface)) this.linkLost.set(iface, undefined);
        else if (this.linkLost.has(iface) && this.linkLost.get(iface) === undefined) {
          this.linkLost.set(iface, now);
          setTimeout(() => this.schedule(), this.liveness.timeoutMs + 10).unref();
        }
      }
      for (const [iface, backAt] of this.linkLost) {
        if (backAt !== undefined && now - backAt >= this.liveness.timeoutMs) this.linkLost.delete(iface);
        else if (table.has(iface)) table.set(iface, []);
      }
    } else this.linkLost.clear();
    this.metrics.held.set(held.length);
    const heldText = held.length ? `${held.sort().join(',')} until ${[...waitingFor].sort().join(',')} agree` : '';
    if (heldText !== this.lastHeld && heldText) this.log.info('takeover held: a speaker heard may still answer', { addresses: held.join(','), waitingFor: [...waitingFor].sort().join(',') });
    this.lastHeld = heldText;
    for (const iface of standbyInterfaces(elections, this.opts.node, placeOf)) if (!table.has(iface)) table.set(iface, []);
    const problems = this.responder.setAnnouncements(table);
    const report = [...problems.map((p) => `${p.interface}${p.address ? ` ${p.address}` : ''}: ${p.message}`), ...unplaced.map((a) => `${a}: no interface of this node is on its subnet and its pool lists no interfaces`)].join('; ');
    if (report && report !== this.lastProblems) this.log.warn('cannot announce everything elected', { problems: report });
    this.lastProblems = report;
    this.metrics.announcing.reset();
    for (const [iface, addresses] of this.responder.announcements()) {
      for (const address of addresses) this.metrics.announcing.set({ address, interface: iface, node: this.opts.node }, 1);
    }
    // Released and taken what the view says: only now do the others hear it (they wait for it).
    this.liveness.setState('ready', view.digest);
  }

  /**
   * A newly assigned address (it appeared in a service's status after this speaker's warm-up) is
   * probed by its elected node before the first announcement, on each interface it would be
   * announced on. Only then: no node announced it before, so whoever answers is outside the
   * cluster (at a failover the former owner may still answer, and must not count). An address
   * in use is held back: not announced by this node, a Warning event naming the MAC on its
   * services, until it leaves their status (a new assignment is probed again).
   */
  private startProbe(address: string, interfaces: string[]): void {
    const probe = this.opts.probe ?? { count: DEFAULT_PROBE_COUNT, intervalMs: DEFAULT_PROBE_INTERVAL_MS };
    if (probe.count <= 0 || interfaces.length === 0 || this.probing.has(address)) return;
    const abort = new AbortController();
    this.probing.set(address, abort);
    this.log.info('probing a newly assigned address before announcing it', { address, interfaces: interfaces.join(',') });
    void Promise.all(interfaces.map(async (iface) => ({ iface, ...(await probeAddress(iface, address, { ...probe, signal: abort.signal })) })))
      .then((results) => {
        for (const r of results) {
          if (r.transient && !r.holder) this.log.info('a station answered one probe and no more (another speaker before the election settled): not a holder', { address, interface: r.iface, mac: r.transient });
        }
        const found = results.find((r) => r.holder);
        if (abort.signal.aborted) return;
        const history = this.heldHistory.get(address);
        const rounds = history?.rounds ?? 0;
        if (!found?.holder) {
          this.heldHistory.delete(address);
          if (rounds > 0) this.log.info('an address found in use before is free now: announcing it', { address });
          return;
        }
        const alreadyReported = history?.reported === found.holder;
        this.heldHistory.set(address, { rounds: rounds + 1, reported: found.holder });
        const retryMs = Math.min(REPROBE_FIRST_MS * 2 ** rounds, REPROBE_MAX_MS);
        const retry = setTimeout(() => {
          if (this.inUse.get(address)?.retry !== retry) return;
          this.inUse.delete(address);
          this.probeAgain.add(address);
          this.schedule();
        }, retryMs);
        const previous = this.inUse.get(address);
        if (previous) clearTimeout(previous.retry);
        this.inUse.set(address, { mac: found.holder, interface: found.iface, retry });
        // Counted and said once per holder: the probes repeat while the address stays assigned.
        if (alreadyReported) return;
        this.metrics.conflicts.inc({ address, node: this.opts.node });
        this.log.warn('newly assigned address in use by another station: not announced', { address, interface: found.iface, mac: found.holder, probedAgainInSeconds: retryMs / 1000 });
        this.eventOnServices(address, 'Warning', ADDRESS_IN_USE_REASON,
          `station ${found.holder} answered node ${this.opts.node}'s probe for ${address} on ${found.iface}: a host outside the cluster uses the address; not announced while it answers (probed again, at most every ${REPROBE_MAX_MS / 1000} s; exclude it from the pool to move the service)`);
      })
      .catch((e) => this.log.warn('cannot probe a newly assigned address; announcing it without', { address, error: errorMessage(e) }))
      .finally(() => {
        if (this.probing.get(address) === abort) this.probing.delete(address);
        this.schedule();
      });
  }

  /**
   * Addresses no longer assigned, or assigned to other services: their probe stops, and the new
   * assignment is probed afresh.
   */
  private forgetGone(elections: readonly AddressElection[], reassigned: ReadonlySet<string>): void {
    const assigned = new Set(elections.map((e) => e.address).filter((a) => !reassigned.has(a)));
    for (const [address, abort] of this.probing) {
      if (assigned.has(address)) continue;
      abort.abort();
      this.probing.delete(address);
    }
    for (const [address, held] of [...this.inUse]) {
      if (assigned.has(address)) continue;
      clearTimeout(held.retry);
      this.inUse.delete(address);
    }
    for (const address of [...this.heldHistory.keys()]) if (!assigned.has(address)) this.heldHistory.delete(address);
  }

  private onResponderEvent(event: ResponderEvent): void {
    switch (event.type) {
      case 'takeover': {
        this.takenOverAt.set(event.address, performance.now());
        this.metrics.takeovers.inc({ address: event.address, node: this.opts.node });
        const from = this.previousOwner.get(event.address);
        const message = `node ${this.opts.node} announces ${event.address} on ${event.interface}${from ? `, taking over from node ${from}` : ''}`;
        this.log.info('announcing', { address: event.address, interface: event.interface, from });
        this.eventOnServices(event.address, 'Normal', from ? 'L2Takeover' : 'L2Announcing', message);
        return;
      }
      case 'release':
        this.takenOverAt.delete(event.address);
        this.log.info('no longer announcing', { address: event.address, interface: event.interface });
        return;
      case 'claim': {
        const since = this.takenOverAt.get(event.address);
        if (since === undefined || performance.now() - since < CONFLICT_GRACE_MS) return;
        this.metrics.conflicts.inc({ address: event.address, node: this.opts.node });
        const message = `station ${event.mac} claims ${event.address} on ${event.interface}, which node ${this.opts.node} announces: another host uses the address`;
        const logged = this.conflictLog.allow(event.address);
        if (logged) this.log.warn('address conflict', { address: event.address, interface: event.interface, mac: event.mac, notLoggedSince: logged.suppressed });
        this.eventOnServices(event.address, 'Warning', 'L2AddressConflict', message);
        return;
      }
      case 'error':
        this.log.warn('responder error', { interface: event.interface, error: event.message });
        return;
      case 'refused':
        // At most one per reason per the responder's report window: a flood stays a line per reason.
        this.log.debug(4, `${event.kind} frame ignored`, { interface: event.interface, reason: event.reason, detail: event.detail, notReportedSince: event.notReportedSince });
        return;
    }
  }

  private eventOnServices(address: string, type: 'Normal' | 'Warning', reason: string, message: string): void {
    const election = this.elections.find((e) => e.address === address);
    for (const key of election?.services ?? []) {
      const service = this.services.store.list().find((s) => `${s.metadata?.namespace}/${s.metadata?.name}` === key);
      if (service) this.opts.events?.event({ apiVersion: 'v1', kind: 'Service', metadata: service.metadata }, type, reason, message);
    }
  }
}

/**
 * Address -> a Ready node not heard from that may answer it now: the node that ranks first for the
 * address among the eligible Ready nodes other than `self` (a peer that does not hear `self` yet
 * elects among those), when this speaker has not heard it. Read while rejoining after isolation.
 */
function unheardHolders(cluster: Omit<ClusterView, 'alive'>, self: string, heard: ReadonlySet<string>): Map<string, string> {
  const ready = new Set(cluster.nodes.filter(isNodeReady).map(nodeName));
  const out = new Map<string, string>();
  for (const e of electAddresses({ ...cluster, alive: ready })) {
    const first = rankNodes(e.address, e.eligible.filter((n) => n !== self))[0];
    if (first && !heard.has(first)) out.set(e.address, first);
  }
  return out;
}

/** Only what the election and the heartbeats read: a node's images and volumes are most of its size. */
function slimNode(node: V1Node): V1Node {
  stripManagedFields(node);
  return {
    metadata: { name: node.metadata?.name, labels: node.metadata?.labels, resourceVersion: node.metadata?.resourceVersion, deletionTimestamp: node.metadata?.deletionTimestamp, uid: node.metadata?.uid },
    spec: { taints: node.spec?.taints },
    status: { conditions: node.status?.conditions?.filter((c) => c.type === 'Ready'), addresses: node.status?.addresses },
  };
}

