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
  /** A write would take the queue past `maxQueuedBytes`: it was not queued. */
  overflow(conn: Connection, queuedBytes: number): void;
  /** Bytes have waited in the queue for `sendHoldMs` without the peer taking any (RFC 9687). */
  sendHoldExpired(conn: Connection, stalledMs: number): void;
}

/**
 * The floor of the write queue's cap: the Linux default ceiling of a TCP send buffer
 * (net.ipv4.tcp_wmem max, 4 MiB), so the queue holds at most about as much again as the
 * kernel already holds for a peer that does not read. The peer raises it to twice its full
 * table when that is larger (see Peer), so a legitimate full table never overflows.
 */
export const QUEUE_CAP_FLOOR_BYTES = 4 * 1024 * 1024;

/**
 * One TCP connection of a session: cuts the stream into messages, queues writes while the
 * socket is full (Bun's write is non-blocking and may take part of a buffer; `drain` resumes),
 * and closes only after queued bytes (a final NOTIFICATION) are handed to the kernel.
 */
export class Connection {
  state: ConnectionState = 'opensent';
  private readonly framer = new Framer();
  private queue: Uint8Array[] = [];
  private queued = 0;
  /** Bytes accepted by `write` and bytes handed to the kernel, since the connection opened. */
  private accepted = 0;
  private handed = 0;
  private sendHoldTimer: ReturnType<typeof setTimeout> | undefined;
  private stalledSince = 0;
  private ending = false;
  /** Cap of the write queue (bytes not yet taken by the kernel); see QUEUE_CAP_FLOOR_BYTES. */
  maxQueuedBytes = QUEUE_CAP_FLOOR_BYTES;
  /** How long queued bytes may wait without the peer reading any before it is dropped. */
  sendHoldMs = 240_000;
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

  /** A final NOTIFICATION: queued even past the cap (at most 4096 bytes), then the connection ends. */
  writeRaw(bytes: Uint8Array): void {
    this.write(bytes, true);
  }

  /** Bytes not yet taken by the kernel. */
  get queuedBytes(): number {
    return this.queued;
  }

  /** A mark after everything written so far: `sentThrough(mark)` once the kernel has it all. */
  mark(): number {
    return this.accepted;
  }

  sentThrough(mark: number): boolean {
    return this.handed >= mark;
  }

  private write(bytes: Uint8Array, pastCap = false): void {
    if (this.closed || this.ending) return;
    if (this.queue.length > 0) {
      if (!pastCap && this.queued + bytes.length > this.maxQueuedBytes) {
        this.events.overflow(this, this.queued);
        return;
      }
      this.accepted += bytes.length;
      this.enqueue(bytes);
      return;
    }
    this.accepted += bytes.length;
    const n = Math.max(this.wire.write(bytes), 0);
    this.handed += Math.min(n, bytes.length);
    if (n < bytes.length) {
      this.enqueue(bytes.subarray(n));
      this.stalledSince = Date.now();
      this.armSendHold();
    }
  }

  private enqueue(bytes: Uint8Array): void {
    this.queue.push(bytes);
    this.queued += bytes.length;
  }

  onDrain(): void {
    let progress = false;
    while (this.queue.length > 0) {
      const head = this.queue[0]!;
      const n = Math.max(this.wire.write(head), 0);
      this.handed += Math.min(n, head.length);
      this.queued -= Math.min(n, head.length);
      if (n > 0) progress = true;
      if (n < head.length) {
        this.queue[0] = head.subarray(n);
        if (progress) {
          this.stalledSince = Date.now();
          this.sendHoldTimer?.refresh();
        }
        return;
      }
      this.queue.shift();
    }
    this.disarmSendHold();
    if (this.ending) this.wire.end();
  }

  /** RFC 9687: a timer runs while bytes wait; each time the peer takes some it starts again. */
  private armSendHold(): void {
    if (this.sendHoldTimer || this.closed) return;
    this.sendHoldTimer = setTimeout(() => {
      this.sendHoldTimer = undefined;
      if (this.queue.length > 0 && !this.closed) this.events.sendHoldExpired(this, Date.now() - this.stalledSince);
    }, this.sendHoldMs);
    this.sendHoldTimer.unref?.();
  }

  private disarmSendHold(): void {
    clearTimeout(this.sendHoldTimer);
    this.sendHoldTimer = undefined;
  }

  /** Ends the connection once what is queued has been written; no more reads or writes. */
  close(): void {
    if (this.closed || this.ending) return;
    this.ending = true;
    this.stopTimers();
    this.disarmSendHold();
    if (this.queue.length === 0) this.wire.end();
    // A peer that stops reading must not keep the connection: give it a moment, then drop it.
    else setTimeout(() => this.wire.terminate(), 2000).unref?.();
    this.markClosed();
  }

  /** The socket closed (by either side). */
  onClosed(): void {
    if (!this.ending) this.stopTimers();
    if (!this.closed) this.markClosed();
    this.disarmSendHold();
    this.queue = [];
    this.queued = 0;
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
