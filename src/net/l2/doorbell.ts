import { PacketSocket, type BpfInstruction } from './packet-socket.ts';

/**
 * A packet socket read only when a frame has reached it, so an idle responder is never woken
 * (issue 38: polling every 10 ms cost 100 wake-ups a second on every node). Bun offers no "tell
 * me when this descriptor is readable", but it reads any pollable descriptor from its own epoll
 * loop (`Bun.file(fd).stream()`). Handed the frame socket itself, it would read the frames: their
 * boundaries (it joins reads into one chunk) and their sll_pkttype would be lost. So a second
 * socket, the doorbell, bound to the same interface and EtherType behind the same filter, is
 * handed to Bun instead; what Bun reads from it is thrown away. Each chunk it delivers rings: the
 * frame socket is then read as before (recvfrom, one frame with its packet type per call), up to
 * a cap. Measured on Bun 1.4.5 (bench/l2-poll-cost.ts, docs/networking/l2.md).
 *
 * No wake-up is lost: the kernel hands a frame to the sockets bound to an interface in the order
 * of its per-device list, newest binding first (net/core/dev.c: dev_add_pack adds at the head,
 * __netif_receive_skb_core delivers in list order). The doorbell is
 * created and bound before the frame socket, so every frame is queued on the frame socket before
 * it reaches the doorbell (or is dropped there, full: then an older ring is still unread), and a
 * ring is read only after it was queued: the read that follows sees the frame. When the interface
 * goes down and up, the kernel registers its sockets again in the order they were created
 * (net/packet/af_packet.c: packet_create adds at the tail of the namespace's list, which
 * packet_notifier walks on NETDEV_UP), which keeps the frame socket first.
 *
 * Memory stays bounded whatever arrives: the doorbell keeps one byte of each frame (its filter
 * accepts 1 byte) in the smallest receive buffer the kernel allows, and Bun stops reading it
 * while no read is pending (measured once, Bun 1.4.5: a 20-second flood of 50,000 frames a second left 508 rings
 * buffered and 1 MB more RSS). A read that stops at its cap (a flood) is followed by another
 * after `floodPauseMs`, the doorbell unread meanwhile: at most cap frames per pause, as the
 * polling tick allowed, never a busy loop.
 */

/** The doorbell's SO_RCVBUF request: the kernel raises it to its floor, room for a few frames. */
const DOORBELL_RECEIVE_BUFFER_BYTES = 1;
/** After a second failure in a row of the doorbell's reader: wait this long before watching again. */
const RETRY_AFTER_FAILURES_MS = 1000;

/** `filter` (accept-all when none) with every accepting return keeping 1 byte of the frame. */
export function doorbellFilter(filter: readonly BpfInstruction[] | undefined): BpfInstruction[] {
  const BPF_RET_K = 0x06;
  if (!filter) return [{ code: BPF_RET_K, jt: 0, jf: 0, k: 1 }];
  return filter.map((op) => (op.code === BPF_RET_K && op.k > 0 ? { ...op, k: 1 } : { ...op }));
}

export interface WatchOptions {
  /** Reads the frame socket; returns true when it stopped at its cap with frames perhaps left. */
  onRing: (socket: PacketSocket) => boolean;
  /** The doorbell's reader failed (not for ENETDOWN, which the frame socket reports): it is watched again. */
  onError: (message: string) => void;
  floodPauseMs: number;
}

/** A frame socket and its doorbell, opened in that order and closed together. */
export class WatchedPacketSocket {
  private reader?: ReturnType<ReadableStream<Uint8Array>['getReader']>;
  private stopped = false;
  private pause?: { timer: ReturnType<typeof setTimeout>; resolve: () => void };
  private ringCount = 0;

  private constructor(
    private readonly doorbell: PacketSocket,
    readonly socket: PacketSocket,
    private readonly options: WatchOptions,
  ) {}

  static open(interfaceName: string, etherType: number, filter: BpfInstruction[] | undefined, options: WatchOptions): WatchedPacketSocket {
    // The doorbell first: see the module comment.
    const doorbell = PacketSocket.open(interfaceName, etherType, doorbellFilter(filter), { receiveBufferBytes: DOORBELL_RECEIVE_BUFFER_BYTES });
    let socket: PacketSocket;
    try {
      socket = PacketSocket.open(interfaceName, etherType, filter);
    } catch (e) {
      doorbell.close();
      throw e;
    }
    const watched = new WatchedPacketSocket(doorbell, socket, options);
    void watched.watch();
    return watched;
  }

  /**
   * Replaces both sockets' filter, the frame socket's first: a frame let in by the new filter
   * meanwhile may be queued without a ring (the doorbell still judging by the old one), so the
   * caller reads the frame socket once after this. The other way round it could ring for nothing.
   */
  setFilter(filter: readonly BpfInstruction[]): void {
    this.socket.setFilter(filter);
    this.doorbell.setFilter(doorbellFilter(filter));
  }

  /** Rings read since the start: a wake-up of the event loop each. */
  get rings(): number {
    return this.ringCount;
  }

  get interfaceName(): string {
    return this.socket.interfaceName;
  }

  /**
   * Rings until closed. Only a failure of the doorbell's reader is caught here: an exception from
   * onRing is the caller's and escapes, as it did from the polling timer's callback.
   */
  private async watch(): Promise<void> {
    let failures = 0;
    while (!this.stopped) {
      const failure = await this.ringUntilFailure();
      if (this.stopped) return;
      // The kernel reports ENETDOWN once each time the interface goes down (then the socket
      // reads on, and frames come again once it is up): watched again at once, unreported, as
      // the frame socket's read below reports it too. Anything else is reported, and watched
      // again a second later if it came twice in a row with no ring between (never a busy loop).
      if (failure.code !== 'ENETDOWN') {
        failures = this.rings === failure.ringsBefore ? failures + 1 : 1;
        this.options.onError(`the doorbell on ${this.interfaceName}: ${(failure.error as Error).message}`);
        if (failures > 1) await this.sleep(RETRY_AFTER_FAILURES_MS);
        if (this.stopped) return;
      }
      // What came meanwhile is still queued on both sockets: nothing is lost by watching again.
      this.options.onRing(this.socket);
    }
  }

  /** Reads the doorbell, and the socket at each ring, until its reader fails (or the doorbell is closed). */
  private async ringUntilFailure(): Promise<{ error: unknown; code?: string; ringsBefore: number }> {
    const ringsBefore = this.rings;
    const reader = this.doorbell.readable().getReader();
    this.reader = reader;
    for (;;) {
      let done: boolean;
      try {
        ({ done } = await reader.read());
      } catch (error) {
        return { error, code: (error as { code?: string }).code, ringsBefore };
      }
      if (this.stopped) return { error: undefined, ringsBefore };
      if (done) return { error: new Error('its reader ended'), ringsBefore };
      this.ringCount += 1;
      while (this.options.onRing(this.socket)) {
        await this.sleep(this.options.floodPauseMs);
        if (this.stopped) return { error: undefined, ringsBefore };
      }
    }
  }

  private sleep(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      this.pause = { timer: setTimeout(resolve, ms), resolve };
    }).then(() => {
      this.pause = undefined;
    });
  }

  /**
   * Stops watching and closes both sockets. Bun's reader reads a duplicate of the doorbell's
   * descriptor, which cancelling closes (before this returns, measured; a turn of the event loop
   * later when that reader had failed, the link gone down: test/integration/l2-probe.test.ts): no
   * descriptor is left, and nothing reads a number the kernel may give to another descriptor.
   */
  close(): void {
    if (this.stopped) return;
    this.stopped = true;
    if (this.pause) {
      clearTimeout(this.pause.timer);
      this.pause.resolve();
    }
    this.reader?.cancel().catch(() => {});
    this.doorbell.close();
    this.socket.close();
  }
}
