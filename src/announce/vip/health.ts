import { errorMessage } from '../../util/errors.ts';

/**
 * Whether the local kube-apiserver answers: its health URL fetched every interval, a check that
 * does not return 200 within the timeout failed (a hung server that keeps its port is caught like
 * a dead one). `unhealthyAfter` failures in a row make it unhealthy, `healthyAfter` successes in a
 * row healthy again; it starts unhealthy (at bootstrap the VIP comes up at its first answers,
 * never before). Checks never overlap: the next starts one interval after the previous started,
 * or at once when it took longer.
 *
 * The certificate is not verified: the check sends no credential and reads only the status (the
 * API server's serving certificate need not name 127.0.0.1, and its CA may not exist on disk
 * before kubeadm init).
 */

export interface HealthOptions {
  url: string;
  intervalMs: number;
  timeoutMs: number;
  unhealthyAfter: number;
  healthyAfter: number;
  /** The verdict changed; `why` is the last check's outcome ("200", "503", "timeout after 200 ms", an error). */
  onChange: (healthy: boolean, why: string) => void;
  /** One check: resolves to its outcome, "200" when healthy. Default: fetch the URL. */
  check?: (url: string, timeoutMs: number) => Promise<string>;
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
  private timer?: ReturnType<typeof setTimeout>;
  private stopped = true;
  /** The last check's outcome. */
  last = 'not checked yet';

  constructor(private readonly opts: HealthOptions) {
    this.verdict = new HealthVerdict(opts.unhealthyAfter, opts.healthyAfter);
  }

  get healthy(): boolean {
    return this.verdict.healthy;
  }

  start(): void {
    this.stopped = false;
    void this.tick();
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  private async tick(): Promise<void> {
    if (this.stopped) return;
    const started = performance.now();
    const outcome = await (this.opts.check ?? fetchStatus)(this.opts.url, this.opts.timeoutMs).catch((e) => errorMessage(e));
    if (this.stopped) return;
    this.last = outcome;
    if (this.verdict.record(outcome === '200')) this.opts.onChange(this.verdict.healthy, outcome);
    this.timer = setTimeout(() => void this.tick(), Math.max(0, this.opts.intervalMs - (performance.now() - started)));
  }
}

/** The HTTP status of a GET of `url` as text, "timeout after N ms", or the error. */
export async function fetchStatus(url: string, timeoutMs: number): Promise<string> {
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(timeoutMs), tls: { rejectUnauthorized: false }, redirect: 'manual' } as RequestInit);
    await response.body?.cancel();
    return String(response.status);
  } catch (e) {
    return e instanceof DOMException && e.name === 'TimeoutError' ? `timeout after ${timeoutMs} ms` : errorMessage(e);
  }
}
