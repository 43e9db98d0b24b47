/**
 * How the holder makes the VIP reach it: answering ARP/NDP on its interfaces (l2-output.ts) or
 * announcing a host route with itself as next hop to the routers (bgp-output.ts). The announcer
 * decides who holds; an output only carries that out.
 */
export interface VipOutput {
  /** Opens what the output needs before the first decision (sockets, sessions). */
  start(): Promise<void>;
  /**
   * Take or give up the VIP, at once: when it returns, a release is on the wire (no ARP answer
   * after it; a BGP withdrawal written), so the announcer may tell the others next.
   */
  hold(on: boolean): void;
  /**
   * Bootstrap (this host has heard no other since its start): is the VIP free? `true` when
   * nothing answers for it, `false` when another station does (logged), rejects when it cannot
   * tell.
   */
  bootstrapCheck(signal: AbortSignal): Promise<boolean>;
  /** Gives everything up (SIGTERM): a release first, then sockets and sessions closed. */
  close(): Promise<void>;
}

/**
 * An output whose module is loaded when it starts (a dynamic import). Until then it holds nothing:
 * a release is a no-op (a pause noticed while it loads releases), a take is a fault of the caller
 * (the announcer decides nothing before start() has returned).
 */
export class DeferredOutput implements VipOutput {
  private inner?: VipOutput;

  constructor(private readonly load: () => Promise<VipOutput>) {}

  async start(): Promise<void> {
    this.inner ??= await this.load();
    await this.inner.start();
  }

  hold(on: boolean): void {
    if (this.inner || on) this.started().hold(on);
  }

  bootstrapCheck(signal: AbortSignal): Promise<boolean> {
    return this.started().bootstrapCheck(signal);
  }

  async close(): Promise<void> {
    await this.inner?.close();
  }

  private started(): VipOutput {
    if (!this.inner) throw new Error('the VIP output is used before it started');
    return this.inner;
  }
}
