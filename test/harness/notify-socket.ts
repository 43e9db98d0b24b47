import { ptr } from 'bun:ffi';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { openDatagramSocket, unixAddress } from '../../src/systemd/unix-datagram.ts';
import { libc, MSG_DONTWAIT } from '../../src/util/libc.ts';

/**
 * What systemd does for a Type=notify unit: a datagram socket whose path goes to the service in
 * NOTIFY_SOCKET, and the messages the service sends to it. Polled (non-blocking recv), so it
 * never blocks the test's event loop.
 */
export class NotifySocket {
  readonly path: string;
  readonly messages: string[] = [];
  private readonly fd: number;
  private readonly timer: ReturnType<typeof setInterval>;

  constructor(dir: string) {
    this.path = join(dir, 'notify.sock');
    this.fd = openDatagramSocket();
    const address = unixAddress(this.path);
    if (libc().bind(this.fd, ptr(address.bytes), address.length) !== 0) {
      libc().close(this.fd);
      throw new Error(`cannot bind a notify socket at ${this.path}`);
    }
    this.timer = setInterval(() => this.drain(), 20);
  }

  /** Every field=value line received so far, in order. */
  lines(): string[] {
    this.drain();
    return this.messages.flatMap((m) => m.split('\n')).filter(Boolean);
  }

  close(): void {
    clearInterval(this.timer);
    libc().close(this.fd);
    rmSync(this.path, { force: true });
  }

  private drain(): void {
    const buffer = new Uint8Array(4096);
    for (;;) {
      const n = Number(libc().recv(this.fd, ptr(buffer), buffer.length, MSG_DONTWAIT));
      if (n <= 0) return;
      this.messages.push(new TextDecoder().decode(buffer.subarray(0, n)));
    }
  }
}
