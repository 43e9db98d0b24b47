import type { V1EndpointSlice, V1Node, V1Service } from '@kubernetes/client-node';
import { ENDPOINT_SLICES, readyEndpointNodes } from '../../kube/endpoint-slices.ts';
import { Informer, stripManagedFields } from '../../kube/informer/index.ts';
import { NODES, SERVICES } from '../../kube/resources.ts';
import type { KubeTransport } from '../../kube/transport.ts';
import type { Logger } from '../../log.ts';
import type { PeerConfig } from '../../net/bgp/speaker.ts';
import { parseIP, type IPFamily } from '../../net/ip.ts';
import { errorMessage } from '../../util/errors.ts';
import type { Registry } from 'prom-client';
import { nodeLoadBalancerAnnouncements } from './announcements.ts';
import { BfdGatedSessions, routerIdOf, type PeerSessionView } from './bfd-gated-sessions.ts';
import { registerNodeBgpMetrics, type NodeSessionStats } from './node-metrics.ts';
import { announcesFromNodes, type NodeBgpConfig } from './node-config.ts';
import { nodeNextHop } from './next-hop.ts';

/**
 * A node's own BGP sessions (`bgp.loadBalancers.announceFrom: nodes`), run by `edge-ccm speaker`
 * on every node, as MetalLB's and Cilium's speakers do: each node announces the load-balancer
 * addresses it may serve with itself as next hop, to every configured peer of a family it has an
 * address of, from that address. A router then withdraws a node's paths when the node's session
 * ends, which is what makes a dead node leave its table:
 *
 * - each BGP session goes with a BFD session to the same peer (RFC 5880/5881, src/net/bfd): a
 *   node that dies (power, link, kernel) stops sending BFD, the router's BFD declares it down
 *   after its detection time (3 x 200 ms by default) and the router drops the BGP session and its
 *   paths with it (BIRD `bfd on`, FRR `neighbor X bfd`);
 * - nothing is announced to a peer until the BFD session with it is Up, so a node that comes
 *   back is a next hop again only once packets flow both ways; when BFD goes down its paths are
 *   withdrawn. The BGP session itself opens regardless: a router with dynamic neighbors (BIRD
 *   `neighbor range`, FRR `bgp listen range`) creates its BFD session for a node only once the
 *   node's BGP session is up;
 * - a node being drained (ToBeDeletedByClusterAutoscaler, the exclusion label, deletion)
 *   withdraws its paths (an UPDATE) while its sessions stay, before its workloads stop; this
 *   speaker watches its own Node for that;
 * - the sessions offer no graceful restart: a speaker that stops (or is killed) takes its paths
 *   with it (the other nodes serve), and SIGTERM sends a Cease and BFD AdminDown first.
 */

/** After a failed reconcile (a port taken, a socket refused), the next try. */
const RETRY_MS = 5_000;

export interface NodeBgpOptions {
  node: string;
  transport: KubeTransport;
  config: NodeBgpConfig;
  logger: Logger;
  /** UDP port BFD is received on (default 3784) and the peers' BFD port (default 3784); tests change them. */
  bfdPort?: number;
  bfdPeerPort?: number;
  /** After a failed reconcile, the next try (default RETRY_MS). */
  retryMs?: number;
  /** Where the per-peer BGP and BFD metrics go (the speaker's /metrics). */
  registry?: Registry;
}

export type NodePeerView = PeerSessionView;

export class NodeBgpAnnouncer {
  private config: NodeBgpConfig;
  private readonly log: Logger;
  /** The informers of the current activation (while the file asks for announceFrom: nodes). */
  private watch?: { services: Informer<V1Service>; self: Informer<V1Node>; slices: Informer<V1EndpointSlice> };
  /** This node's sessions (BgpSpeaker and BFD per peer). */
  private readonly sessions: BfdGatedSessions;
  private synced = false;
  private ended = false;
  private running?: Promise<void>;
  private again = false;
  /** Wakes run() when the file starts asking for per-node sessions; ends an activation when it stops. */
  private wake?: () => void;
  private deactivate?: () => void;
  private retry?: ReturnType<typeof setTimeout>;

  constructor(private readonly o: NodeBgpOptions) {
    this.config = o.config;
    this.log = o.logger.with({ component: 'node-bgp', node: o.node });
    this.sessions = new BfdGatedSessions({
      log: this.log,
      onChange: () => this.schedule(),
      ...(o.bfdPort !== undefined ? { bfdPort: o.bfdPort } : {}),
      ...(o.bfdPeerPort !== undefined ? { bfdPeerPort: o.bfdPeerPort } : {}),
    });
    if (o.registry) registerNodeBgpMetrics(o.registry, () => this.stats());
  }

  /** Every peer's BGP session and BFD session; undefined while none runs. */
  stats(): NodeSessionStats | undefined {
    return this.sessions.stats();
  }

  /** The config file changed. */
  setConfig(config: NodeBgpConfig): void {
    this.config = config;
    if (announcesFromNodes(config)) this.wake?.();
    else this.deactivate?.();
    this.schedule();
  }

  /**
   * Runs until the signal aborts. Nothing is watched and no port opened while the file does not
   * ask for per-node sessions (an L2-only cluster pays nothing for this); when it stops asking,
   * or at the end, everything is withdrawn (Cease, BFD AdminDown).
   */
  async run(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      if (!announcesFromNodes(this.config)) {
        await new Promise<void>((resolve) => {
          this.wake = resolve;
          signal.addEventListener('abort', () => resolve(), { once: true });
        });
        this.wake = undefined;
        continue;
      }
      const active = new AbortController();
      const end = () => active.abort();
      signal.addEventListener('abort', end, { once: true });
      this.deactivate = end;
      try {
        await this.runActive(active.signal);
      } finally {
        signal.removeEventListener('abort', end);
        this.deactivate = undefined;
      }
    }
  }

  private async runActive(signal: AbortSignal): Promise<void> {
    const common = { transport: this.o.transport, logger: this.o.logger };
    const watch = {
      services: new Informer<V1Service>({ ...common, type: SERVICES, transform: stripManagedFields }),
      // Only its own Node: a drain (taint, label, deletion) and its addresses.
      self: new Informer<V1Node>({ ...common, type: NODES, fieldSelector: `metadata.name=${this.o.node}`, transform: stripManagedFields }),
      slices: new Informer<V1EndpointSlice>({ ...common, type: ENDPOINT_SLICES, transform: stripManagedFields }),
    };
    const changed = { onAdd: () => this.schedule(), onUpdate: () => this.schedule(), onDelete: () => this.schedule() };
    watch.services.addHandlers(changed);
    watch.self.addHandlers(changed);
    watch.slices.addHandlers(changed);
    this.watch = watch;
    this.ended = false;
    const informers = [watch.services.run(signal), watch.self.run(signal), watch.slices.run(signal)];
    const synced = await Promise.all([watch.services.waitForSync(signal), watch.self.waitForSync(signal), watch.slices.waitForSync(signal)]);
    if (synced.every(Boolean) && !signal.aborted) {
      this.synced = true;
      this.schedule();
    }
    try {
      await Promise.all(informers);
    } finally {
      this.ended = true;
      this.synced = false;
      clearTimeout(this.retry);
      await this.running;
      await this.shutdown();
      this.watch = undefined;
    }
  }

  peers(): NodePeerView[] {
    return this.sessions.views();
  }

  private schedule(): void {
    if (!this.synced || this.ended) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = (async () => {
      // Cleared in the same microtask as the last check of `again`: cleared in a `.finally()`
      // instead, a change told in between (informer events come one microtask apart) found
      // `running` still set, set `again` after it was read, and was never applied (seen in the
      // real cluster: a node with a new ready pod of an externalTrafficPolicy: Local service
      // never announced it). `await` below suspends first, so this runs after the assignment.
      try {
        do {
          this.again = false;
          try {
            await this.reconcile();
          } catch (e) {
            // A BFD port held by another daemon, a peer's socket refused: tried again, not given up.
            const retryMs = this.o.retryMs ?? RETRY_MS;
            this.log.error(`cannot apply the node BGP sessions; retrying in ${retryMs / 1000} s`, { error: errorMessage(e) });
            clearTimeout(this.retry);
            this.retry = setTimeout(() => this.schedule(), retryMs);
          }
        } while (this.again && !this.ended);
      } finally {
        this.running = undefined;
      }
    })();
  }

  private async reconcile(): Promise<void> {
    const bgp = this.config.bgp;
    if (!bgp || bgp.loadBalancers.announceFrom !== 'nodes') {
      if (this.sessions.size > 0) this.log.info('node BGP sessions stopped: the file does not ask for announceFrom: nodes');
      await this.shutdown();
      return;
    }
    const watch = this.watch;
    if (!watch) return;
    const node = watch.self.store.list().find((n) => n.metadata?.name === this.o.node);
    const own: Record<IPFamily, string | undefined> = { 4: nodeNextHop(node?.status?.addresses, 4), 6: nodeNextHop(node?.status?.addresses, 6) };
    // Each peer from this node's address of the peer's family (none: that peer is not for this
    // node), with the families it carries that this node has a next hop of: one peer with
    // families [4, 6] is one BGP and one BFD session per node for both.
    const peers: PeerConfig[] = [];
    for (const p of bgp.speaker.peers) {
      const local = own[parseIP(p.address)!.family];
      const families = (p.families ?? [4, 6]).filter((f) => own[f]);
      if (!local || families.length === 0) continue;
      const { passive: _passive, ...rest } = p;
      peers.push({ ...rest, sourceAddress: local, families });
    }
    const table = nodeLoadBalancerAnnouncements(node, { services: watch.services.store.list(), readyEndpointNodes: readyEndpointNodes(watch.slices.store.list()) }, this.config.loadBalancer, bgp);
    const plan = { localAsn: bgp.speaker.localAsn, routerId: own[4] ?? routerIdOf(this.o.node), peers, ...(bgp.loadBalancers.bfd ? { bfd: bgp.loadBalancers.bfd } : {}) };
    await this.sessions.apply(plan, table, () => this.ended);
  }

  private shutdown(): Promise<void> {
    return this.sessions.shutdown();
  }
}
