import type { Clock } from '../../util/time.ts';
import { BfdDiag, BfdState, type ControlPacket, encodeControlPacket } from './packet.ts';

/**
 * One BFD session in asynchronous mode (RFC 5880 6.8, no Demand mode, no Echo function, no
 * authentication): the three-way handshake (Down -> Init -> Up), timer negotiation, the Poll
 * Sequence that changes the rates of a session that is Up, and the detection time after which
 * silence brings it Down. Pure state and timers: it sends through `send` and is fed the packets
 * that the endpoint (endpoint.ts) demultiplexed to it, so the state machine is tested with a fake
 * clock. Written here because no maintained BFD implementation exists on the npm registry.
 */

export interface BfdTimers {
  /** bfd.DesiredMinTxInterval once Up, in ms (while not Up, at least 1 s: RFC 5880 6.8.3). */
  desiredMinTxMs: number;
  /** bfd.RequiredMinRxInterval, in ms: how fast we accept packets. */
  requiredMinRxMs: number;
  /** bfd.DetectMult: packets missed before the remote system declares us down. */
  detectMult: number;
}

export const DEFAULT_BFD_TIMERS: BfdTimers = { desiredMinTxMs: 200, requiredMinRxMs: 200, detectMult: 3 };
/** RFC 5880 6.8.3: the transmit interval of a session that is not Up. */
export const SLOW_TX_MS = 1000;

export interface BfdStateChange {
  from: BfdState;
  to: BfdState;
  /** Our diagnostic after the change (why we left Up). */
  diag: BfdDiag;
}

export interface BfdSessionOptions {
  localDiscriminator: number;
  timers: BfdTimers;
  clock: Clock;
  send(packet: Uint8Array): void;
  onStateChange?(change: BfdStateChange): void;
  /** [0, 1): the transmit jitter's draw (injectable for tests). */
  random?: () => number;
}

export interface BfdSessionStats {
  state: BfdState;
  remoteState: BfdState;
  localDiscriminator: number;
  remoteDiscriminator: number;
  diag: BfdDiag;
  remoteDiag: BfdDiag;
  /** The negotiated transmit interval and the detection time now, in ms. */
  txIntervalMs: number;
  detectionTimeMs: number;
  sent: number;
  received: number;
  /** Times the session left Up. */
  downs: number;
}

/** stop() sends its AdminDown copies only when they all go out within this time (see there). */
const ADMIN_DOWN_COPIES_WITHIN_MS = 2_000;

export class BfdSession {
  private sessionState = BfdState.Down;
  private remoteState = BfdState.Down;
  private remoteDiscr = 0;
  private diag = BfdDiag.None;
  private remoteDiag = BfdDiag.None;
  /** What the remote asked of us; 1 µs until its first packet (RFC 5880 6.8.1). */
  private remoteMinRxMs = 0.001;
  private remoteDesiredMinTxMs = 0;
  private remoteDetectMult = 0;
  private pollActive = false;
  private lastTxAt = -Infinity;
  private cancelTx?: () => void;
  private cancelDetect?: () => void;
  private running = false;
  private readonly counters = { sent: 0, received: 0, downs: 0 };
  private readonly random: () => number;

  constructor(private readonly o: BfdSessionOptions) {
    if (o.localDiscriminator === 0 || o.localDiscriminator > 0xffffffff) throw new Error('the local discriminator must be a non-zero 32-bit number');
    if (!(o.timers.desiredMinTxMs > 0 && o.timers.requiredMinRxMs > 0)) throw new Error('the BFD intervals must be positive');
    if (!Number.isInteger(o.timers.detectMult) || o.timers.detectMult < 1 || o.timers.detectMult > 255) throw new Error('the BFD detect multiplier must be 1..255');
    this.random = o.random ?? Math.random;
  }

  get state(): BfdState {
    return this.sessionState;
  }

  get remoteDiscriminator(): number {
    return this.remoteDiscr;
  }

  /** Starts sending (Down, at the slow rate). */
  start(): void {
    if (this.running) return;
    this.running = true;
    this.scheduleTx();
  }

  /**
   * Administratively down (RFC 5880 6.8.16): AdminDown with diag 7 goes out now and twice more
   * at the transmit interval, so the remote takes the session down at once instead of after its
   * detection time; then nothing. Resolves after the last packet.
   */
  async stop(): Promise<void> {
    if (!this.running) return;
    this.cancelDetect?.();
    this.cancelTx?.();
    const interval = this.txIntervalMs(); // the rate in force, not the slow one of a session that is not Up
    this.setState(BfdState.AdminDown, BfdDiag.AdministrativelyDown);
    this.pollActive = false;
    // The copies only while they fit in ADMIN_DOWN_COPIES_WITHIN_MS: the interval follows the
    // remote's Required Min RX Interval (up to 2^32 us, 71 minutes), and a stop (a shutdown) must
    // not wait on what a peer said; sending them sooner would break RFC 5880 6.8.7.
    const copies = interval * 2 <= ADMIN_DOWN_COPIES_WITHIN_MS ? 3 : 1;
    for (let i = 0; i < copies; i++) {
      if (i > 0) await new Promise<void>((resolve) => this.o.clock.setTimer(resolve, interval));
      this.transmit(false);
    }
    this.running = false;
  }

  /** A packet the endpoint matched to this session (already checked by decodeControlPacket). */
  receive(p: ControlPacket): void {
    if (!this.running || this.sessionState === BfdState.AdminDown) return; // RFC 5880 6.8.6: discarded
    this.counters.received++;
    const txBefore = this.txIntervalMs();
    this.remoteDiscr = p.myDiscriminator;
    this.remoteState = p.state;
    this.remoteDiag = p.diag;
    this.remoteMinRxMs = p.requiredMinRxUs / 1000;
    this.remoteDesiredMinTxMs = p.desiredMinTxUs / 1000;
    this.remoteDetectMult = p.detectMult;
    if (p.final && this.pollActive) this.pollActive = false;

    if (p.state === BfdState.AdminDown) {
      if (this.sessionState !== BfdState.Down) this.setState(BfdState.Down, BfdDiag.NeighborSignaledSessionDown);
    } else if (this.sessionState === BfdState.Down) {
      if (p.state === BfdState.Down) this.setState(BfdState.Init, BfdDiag.None);
      else if (p.state === BfdState.Init) this.setState(BfdState.Up, BfdDiag.None);
    } else if (this.sessionState === BfdState.Init) {
      if (p.state === BfdState.Init || p.state === BfdState.Up) this.setState(BfdState.Up, BfdDiag.None);
    } else if (p.state === BfdState.Down) {
      this.setState(BfdState.Down, BfdDiag.NeighborSignaledSessionDown);
    }

    // A Poll is answered at once with Final (RFC 5880 6.8.7), outside the periodic schedule.
    if (p.poll) this.transmit(true);
    if (this.txIntervalMs() !== txBefore) this.scheduleTx();
    this.armDetection();
  }

  stats(): BfdSessionStats {
    return {
      state: this.sessionState,
      remoteState: this.remoteState,
      localDiscriminator: this.o.localDiscriminator,
      remoteDiscriminator: this.remoteDiscr,
      diag: this.diag,
      remoteDiag: this.remoteDiag,
      txIntervalMs: this.txIntervalMs(),
      detectionTimeMs: this.detectionTimeMs(),
      ...this.counters,
    };
  }

  /** bfd.DesiredMinTxInterval as advertised now: at least 1 s while not Up. */
  private desiredMinTxMs(): number {
    return this.sessionState === BfdState.Up ? this.o.timers.desiredMinTxMs : Math.max(this.o.timers.desiredMinTxMs, SLOW_TX_MS);
  }

  /** RFC 5880 6.8.7: the larger of our desired interval and what the remote can receive. */
  private txIntervalMs(): number {
    return Math.max(this.desiredMinTxMs(), this.remoteMinRxMs);
  }

  /** RFC 5880 6.8.4: the remote's Detect Mult times the larger of our RequiredMinRx and its DesiredMinTx. */
  private detectionTimeMs(): number {
    return this.remoteDetectMult * Math.max(this.o.timers.requiredMinRxMs, this.remoteDesiredMinTxMs);
  }

  private setState(to: BfdState, diag: BfdDiag): void {
    const from = this.sessionState;
    if (from === to) return;
    this.sessionState = to;
    this.diag = diag;
    if (from === BfdState.Up) this.counters.downs++;
    // Entering Up lowers bfd.DesiredMinTxInterval from 1 s: a Poll Sequence tells the remote
    // (RFC 5880 6.8.3), whose Final confirms it heard the new rate.
    // Leaving Up needs no Poll: a session that is not Up has no rate to keep.
    this.pollActive = to === BfdState.Up && this.o.timers.desiredMinTxMs < SLOW_TX_MS;
    // The remote hears of the change at once, not a (slow) interval later: the handshake takes
    // milliseconds, and the remote is Up about when we are (as BIRD and FRR's bfdd also do).
    if (to !== BfdState.AdminDown && this.running) {
      this.transmit(false);
      this.scheduleTx();
    }
    try {
      this.o.onStateChange?.({ from, to, diag });
    } catch {
      // A listener's failure is its own: the state machine goes on.
    }
  }

  private armDetection(): void {
    this.cancelDetect?.();
    const ms = this.detectionTimeMs();
    if (ms <= 0) return;
    this.cancelDetect = this.o.clock.setTimer(() => this.detectionExpired(), ms);
  }

  /** RFC 5880 6.8.4: no valid packet for a detection time. */
  private detectionExpired(): void {
    this.cancelDetect = undefined;
    if (this.sessionState === BfdState.Init || this.sessionState === BfdState.Up) this.setState(BfdState.Down, BfdDiag.ControlDetectionTimeExpired);
    this.remoteDiscr = 0; // RFC 5880 6.8.1
    this.remoteState = BfdState.Down;
    this.remoteMinRxMs = 0.001;
    this.scheduleTx();
  }

  /**
   * The next periodic packet: the interval less a random 0-25 % (10-25 % with a Detect Mult of
   * 1), counted from the last packet sent, so a shorter interval takes effect at once.
   */
  private scheduleTx(): void {
    this.cancelTx?.();
    this.cancelTx = undefined;
    if (!this.running || this.sessionState === BfdState.AdminDown) return;
    const interval = this.txIntervalMs();
    const jitter = this.o.timers.detectMult === 1 ? 0.75 + 0.15 * this.random() : 0.75 + 0.25 * this.random();
    const due = Math.max(0, this.lastTxAt + interval * jitter - this.o.clock.now());
    this.cancelTx = this.o.clock.setTimer(() => {
      this.cancelTx = undefined;
      this.transmit(false);
      this.scheduleTx();
    }, due);
  }

  private transmit(final: boolean): void {
    const packet: ControlPacket = {
      diag: this.diag,
      state: this.sessionState,
      poll: !final && this.pollActive,
      final,
      controlPlaneIndependent: false,
      demand: false,
      detectMult: this.o.timers.detectMult,
      myDiscriminator: this.o.localDiscriminator,
      yourDiscriminator: this.remoteDiscr,
      desiredMinTxUs: Math.round(this.desiredMinTxMs() * 1000),
      requiredMinRxUs: Math.round(this.o.timers.requiredMinRxMs * 1000),
      requiredMinEchoRxUs: 0,
    };
    if (!final) this.lastTxAt = this.o.clock.now();
    this.counters.sent++;
    try {
      this.o.send(encodeControlPacket(packet));
    } catch {
      // A send that fails (no route while the link is down) is a lost packet: the remote's detection time covers it.
    }
  }
}
