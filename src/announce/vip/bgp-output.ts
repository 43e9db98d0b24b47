import type { Registry } from 'prom-client';
import type { Logger } from '../../log.ts';
import type { Announcement, PeerConfig } from '../../net/bgp/speaker.ts';
import { parseIP } from '../../net/ip.ts';
import { errorMessage } from '../../util/errors.ts';
import { BfdGatedSessions, routerIdOf, type SessionsPlan } from '../bgp/bfd-gated-sessions.ts';
import { registerNodeBgpMetrics } from '../bgp/node-metrics.ts';
import type { ControlPlaneEndpointConfig, VipBgpConfig } from './config-model.ts';
import type { VipOutput } from './output.ts';

/** After a failed apply (a BFD port taken, a socket refused), the next try. */
const RETRY_MS = 5_000;

export interface VipBgpOutputOptions {
  node: string;
  config: ControlPlaneEndpointConfig & { bgp: VipBgpConfig };
  log: Logger;
  registry: Registry;
  /** Why nothing may be sent now: a process woken from a pause longer than the liveness timeout. */
  refusal: () => string | undefined;
  /** BFD ports (tests). */
  bfdPort?: number;
  bfdPeerPort?: number;
}

/**
 * announce: bgp: every control-plane host keeps its own BGP session (and BFD session) with each
 * peer at all times; the holder announces the VIP as a host route (/32, /128) with itself as next
 * hop, and withdraws it on give-up. Only the holder announces: a router then has one path, never
 * two (a release's withdrawal is written before the others hear of it, as for L2).
 *
 * - a holder whose process dies on a live host: its kernel closes the TCP session and the router
 *   drops its path at once; a host that dies or loses its link: the router's BFD session goes
 *   down after 3 x 200 ms and takes the path with it, before another host takes (1 s liveness
 *   timeout and a grace);
 * - no graceful restart is offered (RFC 4724): a router must not keep a stopped holder's path
 *   while another host announces the VIP (two paths), so a restarting edge-ccm loses its path at
 *   once and the next host takes over; a restarting router (its own graceful restart) keeps our
 *   path as its helper if it offers that.
 */
export class VipBgpOutput implements VipOutput {
  private readonly sessions: BfdGatedSessions;
  private readonly plan: SessionsPlan;
  /** What the holder announces: fixed by the file (addresses, this host's next hops, attributes). */
  private readonly routes: Announcement[];
  private holding = false;
  private applying: Promise<void> = Promise.resolve();
  private retry?: ReturnType<typeof setTimeout>;
  private closed = false;

  constructor(private readonly o: VipBgpOutputOptions) {
    const bgp = o.config.bgp;
    const own = bgp.nextHops.get(o.node) ?? {};
    const peers: PeerConfig[] = [];
    for (const p of bgp.peers) {
      const local = own[parseIP(p.address)!.family];
      const families = (p.families ?? [4, 6]).filter((f) => own[f]);
      if (!local || families.length === 0) {
        o.log.warn('no address of this host of the peer\'s family: no session with it (controlPlaneEndpoint.hosts[].nextHops)', { peer: p.address });
        continue;
      }
      peers.push({ ...p, sourceAddress: local, families });
    }
    this.routes = o.config.addresses.flatMap(({ address, ip }) => {
      const nextHop = own[ip.family];
      return nextHop ? [{ prefix: `${address}/${ip.family === 4 ? 32 : 128}`, nextHops: [nextHop], communities: bgp.communities, ...(bgp.localPref !== undefined ? { localPref: bgp.localPref } : {}) }] : [];
    });
    this.plan = { localAsn: bgp.localAsn, routerId: own[4] ?? routerIdOf(o.node), peers, ...(bgp.bfd ? { bfd: bgp.bfd } : {}) };
    this.sessions = new BfdGatedSessions({
      log: o.log,
      refusal: o.refusal,
      onChange: () => this.apply(),
      ...(o.bfdPort !== undefined ? { bfdPort: o.bfdPort } : {}),
      ...(o.bfdPeerPort !== undefined ? { bfdPeerPort: o.bfdPeerPort } : {}),
    });
    registerNodeBgpMetrics(o.registry, () => this.sessions.stats());
  }

  /** The sessions open (nothing announced yet), so that a first take is one UPDATE away. */
  async start(): Promise<void> {
    this.apply();
    await this.applying;
  }

  hold(on: boolean): void {
    if (on === this.holding) return;
    this.holding = on;
    this.sessions.setTable(this.table());
  }

  /**
   * Nothing on the wire shows another holder of a routed address (routers do not send their
   * table back to the hosts here): the bootstrap rule relies on hearing no other host since the
   * start (docs/networking/control-plane-vip.md, limits).
   */
  async bootstrapCheck(): Promise<boolean> {
    return true;
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.retry);
    this.hold(false);
    await this.applying;
    await this.sessions.shutdown();
  }

  /** The VIP's host routes with this host as next hop while it holds, else nothing. */
  private table(): Announcement[] {
    return this.holding ? this.routes : [];
  }

  /** Sessions as the plan says with the current table; one apply at a time, the latest state wins. */
  private apply(): void {
    if (this.closed) return;
    this.applying = this.applying.then(async () => {
      if (this.closed) return;
      try {
        await this.sessions.apply(this.plan, this.table(), () => this.closed);
      } catch (e) {
        this.o.log.error(`cannot open the VIP's BGP sessions; retrying in ${RETRY_MS / 1000} s`, { error: errorMessage(e) });
        clearTimeout(this.retry);
        this.retry = setTimeout(() => this.apply(), RETRY_MS);
        this.retry.unref?.();
      }
    });
  }
}
