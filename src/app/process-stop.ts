import type { Logger } from '../log.ts';
import type { SystemdNotifier } from '../systemd/notify.ts';

/**
 * The controller manager's one stop, whatever asks for it (SIGTERM/SIGINT, a term that failed, a
 * lost term that did not end), and the exit code it leaves. Its signal ends the term in force;
 * app.ts then runs the shutdown in order.
 */
export class ProcessStop {
  private readonly controller = new AbortController();
  readonly signal = this.controller.signal;
  /** Set once a stop was asked for: no new term starts after it. */
  requested = false;
  exitCode = 0;

  constructor(
    private readonly logger: Logger,
    private readonly systemd: SystemdNotifier,
  ) {}

  /** SIGTERM or SIGINT: an orderly stop (finish in-flight syncs, release the lease), exit 0. */
  onSignal(name: string): void {
    if (this.requested) return;
    this.requested = true;
    this.logger.info('shutting down', { signal: name });
    this.systemd.stopping(`shutting down (${name}): finishing in-flight syncs, releasing the lease`);
    this.controller.abort(new Error(`received ${name}`));
  }

  /** A failure that ends the process: the same orderly stop (lease released, events flushed, provider closed), exit 1. */
  fail(reason: unknown): void {
    this.exitCode = 1;
    this.requested = true;
    this.controller.abort(reason);
  }
}
