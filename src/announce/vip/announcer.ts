import type { Registry } from 'prom-client';
import type { Logger } from '../../log.ts';
import type { IP } from '../../net/ip.ts';
import { errorMessage } from '../../util/errors.ts';
import { LogLimiter } from '../../util/log-limiter.ts';
import { Liveness, loggedLivenessProblems } from '../l2/liveness.ts';
import { WarmUp } from '../l2/warm-up.ts';
import type { ControlPlaneEndpointConfig } from './config-model.ts';
import { decideVip, type VipDecision } from './decision.ts';
import type { HealthRequest } from './health-connection.ts';
import { ApiServerHealth, failureHint } from './health.ts';
import { VipL2Output } from './l2-output.ts';
import { VipMetrics } from './metrics.ts';
import { DeferredOutput, type VipOutput } from './output.ts';
import { newEpoch } from './word.ts';
import { Metronome } from '../../util/metronome.ts';

/**
 * `edge-ccm vip`: one per control-plane host. Checks its own API server, hears the other hosts'
 * heartbeats (the L2 speaker's liveness mesh, peers from the config file), decides with
 * decision.ts and, while it holds the VIP, answers ARP/NDP for it (l2-output.ts) or announces it
 * to the routers (bgp-output.ts). Needs no API server and no Kubernetes credentials.
 *
 * Order of every step: release (or take) first, then tell the others (a taker waits for every
 * host it hears to answer it: decision.ts's take rule). Until one liveness timeout has passed
 * since the start it says "warming" and holds nothing: it has not heard who is up yet.
 */

/** Beyond one heartbeat interval: two liveness checks (50 ms each) and a margin (docs: rule 4). */
const SILENCE_GRACE_EXTRA_MS = 150;
const LOG_WINDOW_MS = 60_000;

export interface VipAnnouncerOptions {
  node: string;
  config: ControlPlaneEndpointConfig;
  key: Uint8Array;
  /** How the health check connects (health-credentials.ts); default anonymous, not verified. */
  healthRequest?: HealthRequest;
  logger: Logger;
  registry: Registry;
  /** announce: l2: the interface holding an address's subnet (default: this host's interfaces). */
  subnetInterface?: (ip: IP) => string | undefined;
  floodPauseMs?: number;
  /** announce: bgp: BFD ports (tests). */
  bfdPort?: number;
  bfdPeerPort?: number;
}

export class VipAnnouncer {
  private readonly config: ControlPlaneEndpointConfig;
  private readonly liveness: Liveness;
  private readonly output: VipOutput;
  private readonly health: ApiServerHealth;
  private readonly metrics: VipMetrics;
  private readonly log: Logger;
  private readonly logLimit = new LogLimiter(LOG_WINDOW_MS);
  private readonly vipKey: string;
  private scheduled = false;
  private readonly warmUp: WarmUp;
  private holding = false;
  private heardSinceStart = false;
  private probeClear = false;
  private probe?: AbortController;
  private stopping = false;
  /** The holder this host elected at its last step. */
  private lastHolder?: string;
  /** Host -> when it fell silent while this host counted it the holder. */
  private readonly silentSince = new Map<string, number>();
  private lastDecision?: VipDecision;
  private lastBlocker = '';
  /** This host's epoch while eligible (word.ts), since when (performance.now()), and whether it still runs. */
  private epoch = newEpoch();
  private eligibleSince = 0;
  private inEpoch = false;

  constructor(private readonly opts: VipAnnouncerOptions) {
    this.config = opts.config;
    this.log = opts.logger.with({ component: 'vip', node: opts.node });
    this.vipKey = opts.config.addresses.map((a) => a.address).join(',');
    const t = opts.config.timings;
    const peers = new Map([...opts.config.hosts].filter(([name]) => name !== opts.node).map(([name, address]) => [name, [address]]));
    // The heartbeats and the API server checks on one beat when their intervals are the same (the
    // defaults, 250 ms): one wake-up of the process for both (util/metronome.ts says what it saves).
    const metronome = new Metronome();
    this.liveness = new Liveness({
      metronome,
      node: opts.node,
      key: opts.key,
      port: opts.config.heartbeatPort,
      intervalMs: t.heartbeatIntervalMs,
      timeoutMs: t.livenessTimeoutMs,
      peers: () => peers,
      onChange: (alive) => {
        this.log.info('control-plane hosts heard', { alive: [...alive].sort().join(',') });
        this.schedule();
      },
      ...loggedLivenessProblems(this.log, this.logLimit),
      onFrozen: (gapMs) => this.afterPause(gapMs),
    });
    // Just woken from a pause, before the liveness check has judged it: say nothing.
    const paused = () => this.liveness.stalledFor() > this.liveness.timeoutMs;
    const config = opts.config;
    const bgp = config.bgp;
    // announce: bgp's module (BGP, BFD: a sixth of the VIP's code) is loaded when the output starts,
    // so the hosts announcing over L2 never load it (issue 38, what runs on every host).
    this.output = config.announce === 'bgp' && bgp
      ? new DeferredOutput(async () => new (await import('./bgp-output.ts')).VipBgpOutput({
          node: opts.node, config: { ...config, bgp }, log: this.log, registry: opts.registry,
          refusal: () => (paused() ? 'this process did not run for longer than the liveness timeout' : undefined),
          ...(opts.bfdPort !== undefined ? { bfdPort: opts.bfdPort } : {}),
          ...(opts.bfdPeerPort !== undefined ? { bfdPeerPort: opts.bfdPeerPort } : {}),
        }))
      : new VipL2Output({ config, log: this.log, logLimit: this.logLimit, mayAnswer: () => !paused(), holding: () => this.holding, subnetInterface: opts.subnetInterface, floodPauseMs: opts.floodPauseMs });
    this.health = new ApiServerHealth({
      metronome,
      url: opts.config.healthURL,
      intervalMs: t.healthIntervalMs,
      timeoutMs: t.healthTimeoutMs,
      unhealthyAfter: t.unhealthyAfter,
      healthyAfter: t.healthyAfter,
      request: opts.healthRequest,
      onNewFailure: (why) => {
        const hint = failureHint(why, opts.healthRequest);
        if (this.logLimit.allow(`health ${why}`)) this.log.info('local API server check failed', { url: opts.config.healthURL, outcome: why, ...(hint ? { hint } : {}) });
      },
      onChange: (healthy, why) => {
        this.metrics.healthy.set(healthy ? 1 : 0);
        if (healthy) this.log.info('local API server healthy', { url: opts.config.healthURL });
        else this.log.warn('local API server unhealthy', { url: opts.config.healthURL, last: why, failuresInARow: t.unhealthyAfter });
        this.schedule();
      },
    });
    this.warmUp = new WarmUp(this.liveness.timeoutMs, () => {
      this.log.info('liveness warm-up over', { alive: [...this.liveness.alive()].sort().join(',') });
      this.schedule();
    });
    this.metrics = new VipMetrics(opts.registry);
  }

  /** Ready: warmed up (it has heard who is up and decides). */
  ready(): boolean {
    return this.warmUp.over && !this.stopping;
  }

  /** Runs until the signal aborts; then releases the VIP and tells the others it leaves (they take over at once). */
  async run(signal: AbortSignal): Promise<void> {
    await this.liveness.start();
    await this.output.start();
    this.health.start();
    this.warmUp.start();
    this.schedule();
    try {
      await new Promise<void>((resolve) => {
        if (signal.aborted) resolve();
        signal.addEventListener('abort', () => resolve(), { once: true });
      });
    } finally {
      this.stopping = true;
      this.warmUp.stop();
      this.probe?.abort();
      this.health.stop();
      // Released (a withdrawal is written by now), then the others told at once, and only then
      // the output's slower goodbyes (BGP Cease, BFD AdminDown): they must not delay the takeover.
      this.setHolding(false, 'stopping');
      await this.liveness.leave();
      await this.output.close();
    }
  }

  /** Woken from a pause longer than the timeout: the others have taken the VIP; release at once and warm up again. */
  private afterPause(gapMs: number): void {
    if (this.stopping) return;
    this.log.warn('this process did not run for longer than the liveness timeout: releasing the VIP and warming up again', { pausedMs: Math.round(gapMs) });
    this.metrics.pauses.inc();
    this.setHolding(false, 'paused');
    this.inEpoch = false;
    this.liveness.setState('warming', '');
    this.warmUp.start();
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    queueMicrotask(() => {
      this.scheduled = false;
      try {
        this.reconcile();
      } catch (e) {
        this.log.error('vip step failed', { error: errorMessage(e) });
      }
    });
  }

  private reconcile(): void {
    if (this.stopping) return;
    const peers = this.liveness.reports();
    if ([...peers.values()].some((p) => p.heard)) this.heardSinceStart = true;
    // A new epoch each time eligibility begins: a word answering an earlier one is no answer now.
    if (!this.inEpoch) {
      this.epoch = newEpoch();
      this.eligibleSince = performance.now();
    }
    const decide = () => decideVip({
      self: this.opts.node,
      hosts: [...this.config.hosts.keys()],
      key: this.vipKey,
      warmedUp: this.warmUp.over,
      healthy: this.health.healthy,
      peers,
      holding: this.holding,
      heardSinceStart: this.heardSinceStart,
      probeClear: this.probeClear,
      recentlySilent: this.recentlySilent(peers),
      epoch: this.epoch,
      eligibleForMs: performance.now() - this.eligibleSince,
      livenessTimeoutMs: this.liveness.timeoutMs,
      ...(this.config.preferredHost !== undefined ? { preferredHost: this.config.preferredHost } : {}),
    });
    let decision = decide();
    if (this.rejoining(decision)) {
      // Back among a majority after being cut off (link, partition, deaf): the first host heard
      // again gives quorum, but the current holder may not have been heard yet, and its word (that
      // it holds) is what keeps this host in standby. Warm up again, as after a pause: one
      // liveness timeout hearing everyone that is up before this host may take (measured before
      // the take rule of issue 39: without it, a returning first-ranked host took the VIP 4-14 ms,
      // once 1 s, before the holder released; the take rule alone now also waits for the holder's
      // answer whenever the host heard hears it).
      this.log.info('hearing a majority again after being cut off: warming up again before taking anything', { alive: [...this.liveness.alive()].sort().join(',') });
      this.warmUp.start();
      decision = decide();
    }
    this.lastHolder = decision.holder;
    if (decision.needProbe) this.startProbe();
    this.setHolding(decision.hold, decision.hold ? takeReason(decision) : releaseReason(decision, this.opts.node, this.config.preferredHost));
    const blocker = decision.blocker ?? '';
    if (blocker && blocker !== this.lastBlocker) this.log.info('take held: waiting for a host heard to answer (it may hold the VIP, or be about to take it)', { waitingFor: blocker });
    // A peer still warming that never answers (deaf to us) stops holding the take back after one
    // liveness timeout of eligibility: decide again then.
    if (blocker && decision.eligible && !this.inEpoch) setTimeout(() => this.schedule(), this.liveness.timeoutMs + 5).unref();
    this.lastBlocker = blocker;
    this.metrics.quorum.set(decision.quorum ? 1 : 0);
    this.metrics.elected.reset();
    this.metrics.elected.set({ node: decision.holder ?? '' }, 1);
    if (this.lastDecision?.basis !== decision.basis) this.log.info('eligibility', { basis: decision.basis, eligible: decision.eligible });
    this.lastDecision = decision;
    this.inEpoch = decision.eligible;
    // Released or taken what the decision says: only now do the others hear it.
    this.liveness.setState(decision.eligible ? 'ready' : 'warming', decision.word);
  }

  /**
   * This step regains quorum after a step without it, the host warmed up, not holding (a host cut
   * off has released), and more than one host configured. Not at bootstrap's join: a lone first
   * host holding the VIP keeps it when the others arrive (they hear it and elect around it).
   */
  private rejoining(decision: VipDecision): boolean {
    return !!this.lastDecision && !this.lastDecision.quorum && decision.quorum && this.warmUp.over && !this.holding && this.config.hosts.size > 1;
  }

  /**
   * Hosts elected as holder at the last step that are now silent without having said so, and not
   * refused (their process may be alive, merely cut off): held for one interval and a margin past
   * the silence, so a holder cut off from us has released (after its own timeout without quorum)
   * before anyone takes. A reconcile is scheduled at the end of the grace.
   */
  private recentlySilent(peers: ReturnType<Liveness['reports']>): Set<string> {
    const now = performance.now();
    const graceMs = this.config.timings.heartbeatIntervalMs + SILENCE_GRACE_EXTRA_MS;
    for (const [name, p] of peers) {
      if (p.heard || p.refused || p.state !== 'ready') this.silentSince.delete(name);
      else if (name === this.lastHolder && !this.silentSince.has(name)) {
        this.silentSince.set(name, now);
        setTimeout(() => this.schedule(), graceMs + 5).unref();
      }
    }
    return new Set([...this.silentSince].filter(([, at]) => now - at < graceMs).map(([name]) => name));
  }

  /** Bootstrap: ask the output whether the VIP is free (L2: an ARP probe / DAD solicitation); clear: the decision may take it. */
  private startProbe(): void {
    if (this.probe) return;
    const abort = new AbortController();
    this.probe = abort;
    this.log.info('hearing no other control-plane host since the start: checking the VIP is free before taking it (bootstrap)', { addresses: this.vipKey, announce: this.config.announce });
    void this.output.bootstrapCheck(abort.signal)
      .then((clear) => {
        if (!abort.signal.aborted) this.probeClear = clear;
      })
      .catch((e) => this.log.warn('cannot probe the VIP; not taking it alone', { error: errorMessage(e) }))
      .finally(() => {
        if (this.probe !== abort) return;
        // A new probe at most once per liveness timeout while it stays needed.
        setTimeout(() => {
          if (this.probe === abort) this.probe = undefined;
          this.schedule();
        }, this.probeClear ? 0 : this.liveness.timeoutMs).unref();
      });
  }

  private setHolding(hold: boolean, reason: string): void {
    this.output.hold(hold && !this.stopping);
    const now = hold && !this.stopping;
    if (now === this.holding) return;
    this.holding = now;
    if (!now) this.probeClear = false;
    this.metrics.holding.set(now ? 1 : 0);
    this.metrics.holdingSince.set(now ? Date.now() / 1000 : 0);
    this.metrics.transitions.inc({ direction: now ? 'take' : 'release', reason });
    if (now) this.log.info('vip taken', { addresses: this.vipKey, reason });
    else this.log.info('vip released', { addresses: this.vipKey, reason });
  }
}

function takeReason(d: VipDecision): string {
  return d.basis === 'quorum' ? 'elected' : d.basis;
}

function releaseReason(d: VipDecision, self: string, preferred: string | undefined): string {
  if (d.eligible) return d.holder && d.holder !== self ? (d.candidates.has(d.holder) && d.holder === preferred ? 'preferred-host' : 'another-holder') : 'elected';
  return d.basis;
}
