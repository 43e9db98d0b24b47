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
