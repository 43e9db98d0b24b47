import type { V1Node, V1Service } from '@kubernetes/client-node';
import type { Hono } from 'hono';
import type { Registry } from 'prom-client';
import type { BgpClusterView, BgpSource, CloudProvider } from '../../cloud/types.ts';
import type { EndpointNodes } from '../../kube/endpoint-slices.ts';
import type { Informer } from '../../kube/informer/index.ts';
import { nodeEligibleForLoadBalancer } from '../../kube/service-helpers.ts';
import type { Logger } from '../../log.ts';
import { BgpSpeaker, type SpeakerConfig, type SpeakerStats, type StateChange } from '../../net/bgp/speaker.ts';
import type { ServerEnv } from '../../server/types.ts';
import type { HealthChecks } from '../../server/health.ts';
import { aborted } from '../../util/abort.ts';
import { errorMessage } from '../../util/errors.ts';
import { leaderNextHopCandidates } from './announcements.ts';
import { registerBgpMetrics } from './metrics.ts';

/**
 * The BGP speaker of the leader (src/net/bgp), fed with what the provider announces
 * (CloudProvider.bgp: pod CIDR routes and load-balancer addresses). One term, one announcer:
 * it starts with the controllers when this process leads and ends with them, so a standby
 * holds no session.
 *
 * The first sessions of a term open only once the whole table is known: the informers synced
 * and, when the route controller runs, its first round done (Routes.synced). A router that kept
 * the previous leader's routes through graceful restart then gets them all before End-of-RIB,
 * and flushes only what is really gone. The end of a term is a graceful restart (connections
 * closed without a NOTIFICATION): routers keep forwarding until the next leader has
 * re-announced. Removing the `bgp` section (a reload) is a real shutdown: Cease, routes withdrawn.
 */

/** How long the first sessions wait for the route controller's first round at most. */
export const ROUTES_WAIT_MAX_MS = 30_000;
/**
 * Changes arriving together (a node's events, a reload) go out as one table: the table is
 * recomputed at most every COALESCE_MS, or twice as long as the last recompute took, so a busy
 * cluster with a large table costs at most a third of a core (15,000 prefixes: about 110 ms per
 * recompute, BENCHMARKS.md).
 */
const COALESCE_MS = 50;

/** Reason of the Warning event when an established session goes down. */
export const BGP_SESSION_DOWN_REASON = 'BGPSessionDown';
/** Reason of the Warning event when the graceful restart time does not cover a leader change. */
export const BGP_RESTART_TIME_REASON = 'BGPRestartTimeTooShort';

export interface BgpTermDeps {
  source: BgpSource;
  provider: Pick<CloudProvider, 'onChange'>;
  nodes: Informer<V1Node>;
  services: Informer<V1Service>;
  /** The term's EndpointSlices (externalTrafficPolicy: Local), shared with the service controller; run by the app. */
  endpoints: EndpointNodes;
  isManagedNode(node: V1Node): boolean;
  /** The route controller runs: wait for its first round before the first sessions. */
  waitForRoutes: boolean;
  /**
   * Why this process may not act now; undefined: it may. Without leader election: another
   * replica holds the Lease. With it: the term is over or its lease was not renewed in time
   * (a leader paused past its lease). Checked by the speaker before every connect, accept and
   * UPDATE, and every second here (the speaker is stopped while it holds).
   */
  blocked?: () => string | undefined;
  /** Lease duration plus retry period, when leader election is on: the graceful restart time must exceed it. */
  takeoverMs?: number;
  logger: Logger;
  /** A Warning event about BGP (on the leader Lease, as other process-wide events). */
  warn(reason: string, message: string): void;
}

/** What an operator sees of the speaker (GET /debug/bgp, and `stats` for the metrics). */
export interface BgpDebugView {
  running: boolean;
  /** Why the sessions are not open yet, while the first table is awaited. */
  holding?: string;
  stats?: SpeakerStats;
  announcements?: ReturnType<BgpSpeaker['announcements']>;
}

/**
 * Process-wide parts, made once: metrics, the /readyz check and the debug endpoint read the
 * announcer of the current term (none on a standby).
 */
export class BgpService {
  private term?: BgpTerm;

  constructor(registry: Registry, checks: HealthChecks, app: Hono<ServerEnv>) {
    registerBgpMetrics(registry, () => this.term?.stats());
    // Readiness only: a router outage must not get the leader restarted (liveness), which would only move the problem.
    checks.add('bgp', () => this.term?.check(), { endpoints: ['readyz'] });
    // Behind delegated authorization (not an always-allowed path): the table names nodes and addresses.
    app.get('/debug/bgp', (c) => c.json(this.term?.debugView() ?? { running: false }));
  }

  /** Runs the speaker for one term (until `signal` aborts), when the provider announces over BGP. */
  async run(deps: BgpTermDeps, signal: AbortSignal): Promise<void> {
    const term = new BgpTerm(deps);
    this.term = term;
    try {
      await term.run(signal);
    } finally {
      if (this.term === term) this.term = undefined;
    }
  }
}

class BgpTerm {
  private speaker?: BgpSpeaker;
  private holding?: string;
  private timer?: ReturnType<typeof setTimeout>;
  /** The term is over: nothing starts again. */
  private ended = false;
  /** A stop of ours is under way: its session ends are not news. */
  private quiet = false;
  private starting?: Promise<void>;
  /** How long the last recompute took (see COALESCE_MS). */
  private lastApplyMs = 0;
  /** The configuration the speaker runs with, as text. */
  private appliedConfig?: string;
  private readonly log: Logger;
  private warnedRestartTime = false;
  /** The last view had no Ready eligible node (logged on each change only). */
  private noneReady = false;

  constructor(private readonly deps: BgpTermDeps) {
    this.log = deps.logger.with({ component: 'bgp' });
  }

  async run(signal: AbortSignal): Promise<void> {
    // Nothing (not even the EndpointSlice watch) until the file has a bgp section: a reload may add one.
    if (!(await this.configured(signal))) return;
    this.holding = 'waiting for the informers to sync';
    const slices = this.deps.endpoints;
    slices.want();
    const schedule = () => this.schedule();
    const handlers = { onAdd: schedule, onUpdate: schedule, onDelete: schedule };
    const unsubscribe = [
      this.deps.nodes.addHandlers(handlers),
      this.deps.services.addHandlers(handlers),
      slices.informer.addHandlers(handlers),
      this.deps.source.onRoutesChange(schedule),
      this.deps.provider.onChange?.(schedule) ?? (() => {}),
    ];
    // Another replica may take the Lease (or this term's may lapse): checked every second, a
    // change of verdict applied (stops or starts the speaker).
    let wasBlocked = this.deps.blocked?.() !== undefined;
    const guard = this.deps.blocked
      ? setInterval(() => {
          const blocked = this.deps.blocked?.() !== undefined;
          if (blocked !== wasBlocked || (blocked && this.speaker)) schedule();
          wasBlocked = blocked;
        }, 1000)
      : undefined;
    try {
      const synced = await Promise.all([this.deps.nodes.waitForSync(signal), this.deps.services.waitForSync(signal), slices.informer.waitForSync(signal)]);
      if (!synced.every(Boolean)) return;
      if (this.deps.waitForRoutes && !this.deps.source.routesSynced) {
        this.holding = "waiting for the route controller's first round";
        await this.routesSynced(signal);
      }
      // Ended while waiting (the informers answer "synced" even then): no session for a term that is over.
      if (signal.aborted) return;
      this.holding = undefined;
      this.apply();
      await aborted(signal);
    } finally {
      for (const u of unsubscribe) u();
      if (guard) clearInterval(guard);
      clearTimeout(this.timer);
      this.ended = true;
      // The end of a term: a graceful restart for the routers (see the class comment).
      await this.stopSpeaker(true);
    }
  }

  stats(): SpeakerStats | undefined {
    return this.speaker?.stats();
  }

  /** /readyz: failing while the first table is awaited, or while no configured peer has an established session. */
  check(): void {
    if (this.holding) throw new Error(`BGP sessions not opened yet: ${this.holding}`);
    const stats = this.speaker?.stats();
    if (!stats || stats.peers.length === 0) return;
    if (!stats.peers.some((p) => p.state === 'established')) {
      throw new Error(`no BGP session established (${stats.peers.map((p) => `${p.address}: ${p.state}${p.lastError ? `, ${p.lastError}` : ''}`).join('; ')})`);
    }
  }

  debugView(): BgpDebugView {
    return {
      running: !!this.speaker,
      ...(this.holding ? { holding: this.holding } : {}),
      ...(this.speaker ? { stats: this.speaker.stats(), announcements: this.speaker.announcements() } : {}),
    };
  }

  /** Resolves true once the provider's configuration has a bgp section (at once, or after a reload); false when the term ends first. */
  private configured(signal: AbortSignal): Promise<boolean> {
    if (this.deps.source.speakerConfig()) return Promise.resolve(true);
    if (signal.aborted) return Promise.resolve(false);
    return new Promise<boolean>((resolve) => {
      const done = (value: boolean) => {
        off();
        signal.removeEventListener('abort', aborted);
        resolve(value);
      };
      const aborted = () => done(false);
      const off = this.deps.provider.onChange?.(() => {
        if (this.deps.source.speakerConfig()) done(true);
      }) ?? (() => {});
      signal.addEventListener('abort', aborted, { once: true });
    });
  }

  /** Until the route controller's first round is done, the term ends, or ROUTES_WAIT_MAX_MS passed. */
  private async routesSynced(signal: AbortSignal): Promise<void> {
    let off = () => {};
    let timeout: ReturnType<typeof setTimeout> | undefined;
    const synced = new Promise<void>((resolve) => {
      off = this.deps.source.onRoutesChange(() => {
        if (this.deps.source.routesSynced) resolve();
      });
      timeout = setTimeout(() => {
        this.log.warn("the route controller's first round did not finish in time; opening BGP sessions with the routes created so far", { waitedMs: ROUTES_WAIT_MAX_MS });
        resolve();
      }, ROUTES_WAIT_MAX_MS);
    });
    try {
      await Promise.race([synced, aborted(signal)]);
    } finally {
      clearTimeout(timeout);
      off();
    }
  }

  private schedule(): void {
    if (this.holding || this.ended || this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      const started = performance.now();
      this.apply();
      this.lastApplyMs = performance.now() - started;
    }, Math.max(COALESCE_MS, 2 * this.lastApplyMs));
  }

  /** Brings the speaker in line with the configuration in force and the cluster: started, reconfigured or stopped, and the table set. */
  private apply(): void {
    if (this.ended) return;
    const config = this.deps.source.speakerConfig();
    const blocked = this.deps.blocked?.();
    if (!config || blocked) {
      if (this.speaker) {
        this.log.info(blocked ? `BGP speaker stopped: ${blocked}` : 'BGP speaker stopped: the bgp section was removed');
        // Removed on purpose: withdraw (Cease). Another replica took over: leave its routes be (graceful).
        void this.stopSpeaker(!!blocked);
      }
      return;
    }
    let table;
    try {
      const computed = this.deps.source.announcements(this.view());
      table = computed.table;
      if (computed.clashes.length) this.log.warn('load-balancer addresses equal to a pod CIDR are not announced', { prefixes: computed.clashes.join(',') });
    } catch (e) {
      this.log.error('cannot compute the BGP table; the last one stays announced', { error: errorMessage(e) });
      return;
    }
    if (!this.speaker) {
      if (this.starting) return this.schedule(); // its table is set once it runs
      this.checkRestartTime(config);
      this.starting = this.startSpeaker(config, table).finally(() => (this.starting = undefined));
      return;
    }
    try {
      // Only a changed configuration touches the sessions (reconfigure resets the peers it changed).
      const text = JSON.stringify(config);
      if (text !== this.appliedConfig) {
        this.speaker.reconfigure(config);
        this.appliedConfig = text;
      }
      this.speaker.setAnnouncements(table);
    } catch (e) {
      this.log.error('cannot apply the BGP configuration or table; the last one stays in force', { error: errorMessage(e) });
    }
  }

  private async startSpeaker(config: SpeakerConfig, table: Parameters<BgpSpeaker['setAnnouncements']>[0]): Promise<void> {
    try {
      this.speaker = await BgpSpeaker.start(config, { log: this.log, announcements: table, onStateChange: (c) => this.onStateChange(c), refusal: this.deps.blocked });
      this.appliedConfig = JSON.stringify(config);
      this.log.info('BGP speaker started', { peers: config.peers.length, announcements: table.length });
    } catch (e) {
      this.log.error('cannot start the BGP speaker', { error: errorMessage(e) });
    }
  }

  private async stopSpeaker(graceful: boolean): Promise<void> {
    const speaker = this.speaker;
    this.speaker = undefined;
    if (!speaker) return;
    this.quiet = true;
    try {
      await speaker.stop({ graceful });
    } finally {
      this.quiet = false;
    }
  }

  private onStateChange(c: StateChange): void {
    if (c.from !== 'established' || c.to === 'established' || this.quiet) return;
    const peer = this.speaker?.stats().peers.find((p) => p.address === c.peer);
    this.deps.warn(BGP_SESSION_DOWN_REASON, `BGP session with ${c.peer}${peer ? ` (AS ${peer.asn})` : ''} went down${c.reason ? `: ${c.reason}` : ''}`);
  }

  /** Graceful restart must outlast a leader change (lease expiry plus a retry), else routers flush the routes before the next leader re-announces them. */
  private checkRestartTime(config: SpeakerConfig): void {
    if (this.warnedRestartTime || this.deps.takeoverMs === undefined) return;
    const restart = config.gracefulRestart?.restartTimeSeconds;
    const message = restart === undefined
      ? 'bgp.gracefulRestart is off: on a leader change, routers withdraw every route at once until the next leader has re-announced it'
      : restart * 1000 <= this.deps.takeoverMs
        ? `bgp.gracefulRestart.restartTimeSeconds (${restart}) does not exceed the leader election's lease duration plus retry period (${this.deps.takeoverMs / 1000} s): routers may flush the routes before the next leader re-announces them`
        : undefined;
    if (!message) return;
    this.warnedRestartTime = true;
    this.log.warn(message);
    this.deps.warn(BGP_RESTART_TIME_REASON, message);
  }

  private view(): BgpClusterView {
    // The service controller's eligibility (nodes this process manages that may back a load balancer), then readiness.
    const { nodes, noneReady } = leaderNextHopCandidates(this.deps.nodes.store.list().filter((n) => this.deps.isManagedNode(n) && nodeEligibleForLoadBalancer(n)));
    if (noneReady !== this.noneReady) {
      this.noneReady = noneReady;
      if (noneReady) this.log.warn('no eligible node is Ready: keeping every eligible node as a next hop (a control plane cut off from the kubelets must not withdraw every address)');
      else this.log.info('a Ready node again: next hops are the Ready nodes');
    }
    return { services: this.deps.services.store.list(), eligibleNodes: nodes, readyEndpointNodes: this.deps.endpoints.all() };
  }
}
