import { Framer, frame, type RawMessage } from './message.ts';

/** The part of a Bun TCP socket a connection uses (so tests can stand in a fake). */
export interface Wire {
  write(data: Uint8Array): number;
  end(): void;
  /** Closes at once, dropping unsent data. */
  terminate(): void;
}

export type ConnectionState = 'opensent' | 'openconfirm' | 'established';

export interface ConnectionEvents {
  messages(conn: Connection, messages: RawMessage[]): void;
  /** A bad header: the stream cannot be read further. */
  framingError(conn: Connection, error: unknown): void;
  closed(conn: Connection): void;
}

/**
 * One TCP connection of a session: cuts the stream into messages, queues writes while the
 * socket is full (Bun's write is non-blocking and may take part of a buffer; `drain` resumes),
 * and closes only after queued bytes (a final NOTIFICATION) are handed to the kernel.
 */
export class Connection {
  state: ConnectionState = 'opensent';
  private readonly framer = new Framer();
  private queue: Uint8Array[] = [];
  private ending = false;
  closed = false;
  /** Timers of the session on this connection; cleared when it closes. */
  holdTimer: ReturnType<typeof setTimeout> | undefined;
  keepaliveTimer: ReturnType<typeof setInterval> | undefined;

  constructor(
    readonly direction: 'in' | 'out',
    private readonly wire: Wire,
    private readonly events: ConnectionEvents,
  ) {}

  onData(chunk: Uint8Array): void {
    if (this.closed || this.ending) return;
    let messages: RawMessage[];
    try {
      messages = this.framer.push(chunk);
    } catch (e) {
      this.events.framingError(this, e);
      return;
    }
    if (messages.length > 0) this.events.messages(this, messages);
  }

  send(type: number, body?: Uint8Array): void {
    this.write(frame(type, body));
  }

  /** Many messages of one type in as few writes as possible. */
  sendMany(type: number, bodies: Uint8Array[]): void {
    const BATCH = 64 * 1024;
    let parts: Uint8Array[] = [];
    let size = 0;
    const flush = () => {
      if (parts.length === 0) return;
      const buf = new Uint8Array(size);
      let at = 0;
      for (const p of parts) {
        buf.set(p, at);
        at += p.length;
      }
      this.write(buf);
      parts = [];
      size = 0;
    };
    for (const b of bodies) {
      const m = frame(type, b);
      parts.push(m);
      size += m.length;
      if (size >= BATCH) flush();
    }
    flush();
  }

  writeRaw(bytes: Uint8Array): void {
    this.write(bytes);
  }

  private write(bytes: Uint8Array): void {
    if (this.closed || this.ending) return;
    if (this.queue.length > 0) {
      this.queue.push(bytes);
      return;
    }
    const n = this.wire.write(bytes);
    if (n < bytes.length) this.queue.push(bytes.subarray(Math.max(n, 0)));
  }

  onDrain(): void {
    while (this.queue.length > 0) {
      const head = this.queue[0]!;
      const n = this.wire.write(head);
      if (n < head.length) {
        this.queue[0] = head.subarray(Math.max(n, 0));
        return;
      }
      this.queue.shift();
    }
    if (this.ending) this.wire.end();
  }

  /** Ends the connection once what is queued has been written; no more reads or writes. */
  close(): void {
    if (this.closed || this.ending) return;
    this.ending = true;
    this.stopTimers();
    if (this.queue.length === 0) this.wire.end();
    // A peer that stops reading must not keep the connection: give it a moment, then drop it.
    else setTimeout(() => this.wire.terminate(), 2000).unref?.();
    this.markClosed();
  }

  /** The socket closed (by either side). */
  onClosed(): void {
    if (!this.ending) this.stopTimers();
    if (!this.closed) this.markClosed();
    this.queue = [];
  }

  private markClosed(): void {
    if (this.closed) return;
    this.closed = true;
    this.events.closed(this);
  }

  stopTimers(): void {
    clearTimeout(this.holdTimer);
    clearInterval(this.keepaliveTimer);
    this.holdTimer = undefined;
    this.keepaliveTimer = undefined;
  }
}
