import type { Logger } from '../log.ts';
import { sendDatagram } from './unix-datagram.ts';

/**
 * systemd's readiness protocol (sd_notify(3)): with Type=notify, systemd hands the service a
 * datagram socket in NOTIFY_SOCKET and waits for READY=1 before it counts the unit as started;
 * STATUS= shows in `systemctl status`, STOPPING=1 says a stop is under way. Without
 * NOTIFY_SOCKET (anywhere but such a unit) every call is a no-op.
 */
export class SystemdNotifier {
  private warned = false;

  constructor(
    private readonly socketPath: string | undefined,
    private readonly logger: Logger,
  ) {}

  static fromEnv(logger: Logger, env: Record<string, string | undefined> = process.env): SystemdNotifier {
    return new SystemdNotifier(env.NOTIFY_SOCKET || undefined, logger);
  }

  get enabled(): boolean {
    return this.socketPath !== undefined;
  }

  ready(status: string): void {
    this.send(`READY=1\nSTATUS=${status}`);
  }

  status(status: string): void {
    this.send(`STATUS=${status}`);
  }

  stopping(status: string): void {
    this.send(`STOPPING=1\nSTATUS=${status}`);
  }

  private send(message: string): void {
    if (!this.socketPath) return;
    let sent = false;
    try {
      sent = sendDatagram(this.socketPath, message);
    } catch (e) {
      if (!this.warned) this.logger.warn('cannot notify systemd', { socket: this.socketPath, error: e instanceof Error ? e.message : String(e) });
      this.warned = true;
      return;
    }
    if (!sent && !this.warned) {
      this.warned = true;
      this.logger.warn('cannot notify systemd: sendto failed', { socket: this.socketPath });
    }
  }
}
