import { errorMessage } from '../../util/errors.ts';
import { Metronome } from '../../util/metronome.ts';
import { ANONYMOUS_UNVERIFIED, HealthConnection, type HealthRequest } from './health-connection.ts';

/**
 * Whether the local kube-apiserver answers: a GET of its health URL every interval, a check that
 * does not return 200 within the timeout failed (a hung server that keeps its port is caught like
 * a dead one). `unhealthyAfter` failures in a row make it unhealthy, `healthyAfter` successes in a
 * row healthy again; it starts unhealthy (at bootstrap the VIP comes up at its first answers,
 * never before). Checks never overlap: one at the start, then one at each beat of the interval,
 * one at once after a check that ran through a beat (it took the whole interval: a timeout as long
 * as the interval, or an early check), and one at once when the server closed the kept-alive
 * connection meanwhile (checkNow). The beat may be shared with another
 * periodic job (`metronome`: the VIP's heartbeats), so that both cost one wake-up.
 *
 * By default the certificate is not verified and no credential is sent: the check reads only the
 * status (the API server's serving certificate need not name 127.0.0.1, and its CA may not exist
 * on disk before kubeadm init). Where the API server refuses anonymous requests (k3s, RKE2,
 * Talos) or the certificate should be verified, `request` carries a CA, a client certificate or
 * a token (controlPlaneEndpoint.healthCheck, read by health-credentials.ts).
 */

export interface HealthOptions {
  url: string;
  intervalMs: number;
  timeoutMs: number;
  unhealthyAfter: number;
  healthyAfter: number;
  /** Default: anonymous, certificate not verified. */
  request?: HealthRequest;
  /** The verdict changed; `why` is the last check's outcome ("200", "503", "timeout after 200 ms", an error). */
  onChange: (healthy: boolean, why: string) => void;
  /**
   * A check failed with an outcome other than the previous check's: a server that refuses every
   * check from the start (401, a certificate that does not verify) never changes the verdict,
   * and this is how its reason gets told.
   */
  onNewFailure?: (why: string) => void;
  /** The beat the checks follow; default one of its own. */
  metronome?: Metronome;
  /** One check: resolves to its outcome, "200" when healthy. Default: a GET on a kept-alive connection (health-connection.ts). */
  check?: (url: string, timeoutMs: number, request: HealthRequest) => Promise<string>;
}

/** Consecutive outcomes -> verdict; pure. */
export class HealthVerdict {
  healthy = false;
  private streak = 0;

  constructor(private readonly unhealthyAfter: number, private readonly healthyAfter: number) {}

  /** Records one check; true when the verdict changed. */
  record(ok: boolean): boolean {
    if (ok === this.healthy) {
      this.streak = 0;
      return false;
    }
    this.streak += 1;
    if (this.streak < (ok ? this.healthyAfter : this.unhealthyAfter)) return false;
    this.healthy = ok;
    this.streak = 0;
    return true;
  }
}

export class ApiServerHealth {
  private readonly verdict: HealthVerdict;
  /** Stops the checks' beat. */
  private stopBeat?: () => void;
  private stopped = true;
  /** The kept-alive connection of the default check; none with opts.check. */
  private readonly connection?: HealthConnection;
  private readonly check: () => Promise<string>;
  private checking = false;
  /** A beat came while a check ran: the next check starts as soon as it ends. */
  private beatMissed = false;
  /** The check running was started early (the connection closed): the next close waits for the interval. */
  private early = false;
  /** The last check's outcome. */
  last = 'not checked yet';

  constructor(private readonly opts: HealthOptions) {
    this.verdict = new HealthVerdict(opts.unhealthyAfter, opts.healthyAfter);
    const request = opts.request ?? ANONYMOUS_UNVERIFIED;
    const custom = opts.check;
    if (custom) {
      this.check = () => custom(opts.url, opts.timeoutMs, request);
    } else {
      const connection = new HealthConnection(opts.url, request, () => this.checkNow());
      this.connection = connection;
      this.check = () => connection.check(opts.timeoutMs);
    }
  }

  get healthy(): boolean {
    return this.verdict.healthy;
  }

  start(): void {
    this.stopped = false;
    this.stopBeat = (this.opts.metronome ?? new Metronome()).every(this.opts.intervalMs, () => {
      if (this.checking) this.beatMissed = true;
      else void this.tick();
    });
    void this.tick();
  }

  stop(): void {
    this.stopped = true;
    this.stopBeat?.();
    this.connection?.close();
  }

  /**
   * The server closed the kept-alive connection between checks (a kube-apiserver killed, its port
   * closed): check at once, not at the next interval, so a dead server's failures start counting
   * now. Not twice in a row: a server closing every connection after its answer gets at most one
   * check more per interval, never a loop.
   */
  private checkNow(): void {
    if (this.stopped || this.checking || this.early) return;
    void this.tick(true);
  }

  private async tick(early = false): Promise<void> {
    if (this.stopped) return;
    this.checking = true;
    this.early = early;
    const outcome = await this.check().catch((e) => errorMessage(e));
    this.checking = false;
    if (this.stopped) return;
    if (outcome !== '200' && outcome !== this.last) this.opts.onNewFailure?.(outcome);
    this.last = outcome;
    if (this.verdict.record(outcome === '200')) this.opts.onChange(this.verdict.healthy, outcome);
    if (this.beatMissed) {
      this.beatMissed = false;
      void this.tick();
    }
  }
}

/** What an operator can do about an outcome that says more than "down"; undefined for the rest. */
export function failureHint(outcome: string, request: HealthRequest = ANONYMOUS_UNVERIFIED): string | undefined {
  const credential = request.tls.cert !== undefined || request.headers.authorization !== undefined;
  if (outcome === '401' && credential) return "the API server does not accept the check's credential (a token expired or of another cluster, a certificate not from its client CA)";
  if (outcome === '401') return 'the API server refuses anonymous requests (k3s, RKE2, Talos): give controlPlaneEndpoint.healthCheck a client certificate or a token';
  if (outcome === '403') return "the check's identity may not read this URL: use /readyz, /livez or /healthz (system:public-info-viewer)";
  if (/CERT|SELF_SIGNED|UNABLE_TO_VERIFY|ALTNAME/.test(outcome)) return 'the certificate does not verify against controlPlaneEndpoint.healthCheck.caFile (or serverName)';
  return undefined;
}
