import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ApiBridge } from '../harness/api-bridge.ts';
import { createClusterLab, REPLICA_SLOTS, type ReplicaHost } from '../harness/bgp-cluster-lab.ts';
import { GoBgp, ROUTER4, ROUTER_ASN, SPEAKER_ASN, startRouter, type BgpRouter, type PathTable, type RibPath, type RouterOptions } from '../harness/bgp-lab.ts';
import type { ControlPlane } from '../harness/control-plane.ts';
import { L2Lab } from '../harness/l2-lab.ts';
import type { NetnsLab } from '../harness/netns.ts';
import { TIMING } from './options.ts';
import { type ExitRecord, ProcessSlot } from './replicas.ts';
import { L2Prober, type ProbeRound } from './l2-prober.ts';
import { L2_NODES, L2_POOL } from './world.ts';

/**
 * The soak's network, built from the harness's labs (documentation ranges and loopback only;
 * every namespace deleted with its lab, also when the soak is killed: the labs' dirs are owned):
 *
 * - the BGP cluster lab (test/harness/bgp-cluster-lab.ts): GoBGP as the router and one
 *   namespace per static replica (ccm1..ccm3, 198.51.100.2-.4), where the static group's
 *   replicas run (`ip netns exec`) and peer with the router over IPv4; the API server and the
 *   Redfish switch reach them through a bridge on each namespace's loopback;
 * - the L2 lab (test/harness/l2-lab.ts): a switch with nodes n1, n2 and n3, each running
 *   `edge-ccm speaker` for the static nodes l2-n1, l2-n2 and l2-n3, and a client whose prober
 *   (l2-prober-main.ts) sends an ARP request or Neighbor Solicitation for each of the L2 pool's
 *   addresses every 100 ms, real frames, and reports which MACs answered each probe. BIRD on the
 *   same switch (rtr, 198.51.100.1) is the router of the speakers' own BGP sessions
 *   (bgp.loadBalancers.announceFrom: nodes, BFD 3 x 200 ms): each speaker announces the BGP
 *   pools' addresses with its node as next hop, and a dead node's next hop must leave it.
 */

export interface NetworkOptions {
  cp: ControlPlane;
  binary: string;
  dir: string;
  staticReplicas: number;
  /** More services on the machine's loopback the static replicas must reach (the Redfish switch). */
  loopback: string[];
  /** The static provider's file (the speakers read its loadBalancer section). */
  staticConfig: string;
  onSpeakerExit(e: ExitRecord): void;
  restartDelayMs(): number;
}

/** The router as the lab's tests run it: graceful restart helper on. */
const ROUTER_OPTIONS: RouterOptions = { gracefulRestart: true };
/** GoBGP's FSM state of a neighbour it refuses sessions from (after a reset or an enable, for up to 30 s). */
const GOBGP_IDLE = 1;

/** BFD on the speakers' own sessions, as docs/networking/bgp.md suggests: a dead node is detected in 600 ms. */
export const NODE_BFD = { intervalMs: 200, multiplier: 3 };

/**
 * The static group's bgp section: every replica peers with the router at ROUTER4 over IPv4 (in
 * the BGP lab: GoBGP; only the leader speaks, pod CIDRs); every speaker with the router at the
 * same address on its own LAN (the L2 lab: BIRD; the load-balancer addresses, from each node).
 */
export function bgpSection(): Record<string, unknown> {
  return {
    localASN: SPEAKER_ASN,
    routerID: REPLICA_SLOTS[0]!.v4,
    gracefulRestart: { restartTimeSeconds: TIMING.bgpRestartTimeSeconds },
    loadBalancers: {
      announceFrom: 'nodes',
      bfd: { transmitIntervalMilliseconds: NODE_BFD.intervalMs, receiveIntervalMilliseconds: NODE_BFD.intervalMs, detectMultiplier: NODE_BFD.multiplier },
    },
    peers: [{ address: ROUTER4, asn: ROUTER_ASN, holdTimeSeconds: TIMING.bgpHoldTimeSeconds, families: [4], connectRetry: { minSeconds: 0.2, maxSeconds: 2 } }],
  };
}

export class SoakNetwork {
  readonly speakers: ProcessSlot[] = [];
  private readonly routerOptions: RouterOptions;
  private readonly cleanups: (() => Promise<void>)[] = [];
  /** Speaker node role -> since when its switch port is down. */
  private readonly linkDownSince = new Map<string, number>();
  /** The router of the speakers' own sessions (BIRD in the L2 lab). */
  nodeRouter?: BgpRouter;

  private constructor(
    readonly bgpLab: NetnsLab,
    public router: GoBgp | undefined,
    readonly replicas: readonly ReplicaHost[],
    readonly l2: L2Lab,
  ) {
    this.routerOptions = { ...ROUTER_OPTIONS, speakers: replicas.map((r) => ({ v4: r.v4, v6: r.v6 })) };
  }

  static async build(o: NetworkOptions): Promise<SoakNetwork> {
    const replicas = REPLICA_SLOTS.slice(0, o.staticReplicas);
    if (replicas.length < o.staticReplicas) throw new Error(`the BGP lab has ${REPLICA_SLOTS.length} replica slots, the profile asks for ${o.staticReplicas}`);
    const { lab, router } = await createClusterLab('soak-bgp', 'gobgp', ROUTER_OPTIONS, replicas);
    let l2: L2Lab | undefined;
    try {
      if (!(router instanceof GoBgp)) throw new Error('the soak drives GoBGP');
      l2 = await L2Lab.build({ router: true });
      const net = new SoakNetwork(lab, router, replicas, l2);
      net.cleanups.push(() => lab.destroy(), () => l2!.destroy(), async () => net.router?.stop(), async () => net.nodeRouter?.stop());
      net.nodeRouter = await startRouter(l2.lab, 'bird', {
        speakers: [],
        bfdNodes: { nodes: L2_NODES.map((n) => ({ v4: l2!.nodes[n.role].lanIPv4, v6: l2!.nodes[n.role].lanIPv6 })), ...NODE_BFD, ipv4Only: true },
      });
      const bgpBridge = await ApiBridge.start(lab, o.cp.server, o.loopback);
      net.cleanups.push(() => bgpBridge.stop());
      for (const r of replicas) await bgpBridge.into(lab, r.role);
      const l2Bridge = await ApiBridge.start(l2.lab, o.cp.server);
      net.cleanups.push(() => l2Bridge.stop());
      const keyFile = join(o.dir, 'liveness.key');
      writeFileSync(keyFile, randomBytes(32).toString('hex'), { mode: 0o600 });
      for (const node of L2_NODES) {
        await l2Bridge.into(l2.lab, node.role);
        const kubeconfig = await o.cp.clientCertKubeconfig(`soak-speaker-${node.role}`, ['system:masters']);
        net.speakers.push(new ProcessSlot(`soak-speaker-${node.role}`, [
          'ip', 'netns', 'exec', l2.lab.ns(node.role), o.binary, 'speaker',
          `--node-name=${node.id}`, `--cloud-config=${o.staticConfig}`, `--kubeconfig=${kubeconfig}`, `--liveness-key-file=${keyFile}`,
        ], o.dir, o.onSpeakerExit, o.restartDelayMs));
      }
      // Speakers before the labs go (they are the labs' namespaces' processes).
      net.cleanups.push(async () => {
        await Promise.all(net.speakers.map((s) => s.stop()));
      });
      return net;
    } catch (e) {
      await l2?.destroy();
      await router.stop().catch(() => undefined);
      await lab.destroy();
      throw e;
    }
  }

  /** `ip netns exec NS` for static replica `index`. */
  wrapFor(index: number): string[] {
    return ['ip', 'netns', 'exec', this.bgpLab.ns(this.replicas[index]!.role)];
  }

  startSpeakers(): void {
    for (const s of this.speakers) s.start();
  }

  /** The router's IPv4 RIB; undefined while gobgpd is down or does not answer. */
  async rib(): Promise<RibPath[] | undefined> {
    if (!this.router?.running) return undefined;
    return this.router.ribPaths(4).catch(() => undefined);
  }

  /**
   * A reset or enable returns once the router takes the neighbour's sessions again: GoBGP keeps
   * it idle for a while first (30 s after a reset, about 5 s after an enable), its own
   * hold-down, which is no part of edge-ccm's recovery.
   */
  async session(address: string, action: 'reset' | 'disable' | 'enable'): Promise<void> {
    if (!this.router) throw new Error('the router is down');
    await this.router.neighbor(address, action);
    if (action === 'disable') return;
    const deadline = Date.now() + 60_000;
    while ((await this.router.sessionState(address)) === GOBGP_IDLE) {
      if (Date.now() > deadline) throw new Error(`GoBGP kept its session with ${address} idle for 60 s after ${action}`);
      await Bun.sleep(200);
    }
  }

  async killRouter(): Promise<void> {
    const router = this.router;
    this.router = undefined;
    await router?.stop();
  }

  async startRouter(): Promise<void> {
    const router = await startRouter(this.bgpLab, 'gobgp', this.routerOptions);
    if (!(router instanceof GoBgp)) throw new Error('the soak drives GoBGP');
    this.router = router;
  }

  /** Starts the client's prober of the L2 pool's addresses (ended with the lab, or by its stop()). */
  startProber(periodMs: number, onRound: (r: ProbeRound) => void, onExit: (message: string) => void): L2Prober {
    return new L2Prober(this.l2.lab, 'client', 'eth0', periodMs, L2_POOL.addresses, onRound, onExit);
  }

  /** A speaker node's port on the switch down or up (its cable pulled or plugged back in). */
  async setSpeakerLink(role: string, up: boolean): Promise<void> {
    if (!up) this.linkDownSince.set(role, Date.now());
    await this.l2.lab.ip('sw', 'link', 'set', `${role}-lan`, up ? 'up' : 'down');
    if (up) this.linkDownSince.delete(role);
  }

  /** The BIRD table of the speakers' sessions (prefix -> next hops); undefined when BIRD does not answer. */
  async nodeRib(): Promise<PathTable | undefined> {
    return this.nodeRouter?.paths(4).catch(() => undefined);
  }

  /**
   * Speaker node address -> since when it is dead for BGP (Date.now()): its speaker killed,
   * stopped or paused, or its switch port down. Nodes serving are not listed.
   */
  deadNodes(): Map<string, number> {
    const dead = new Map<string, number>();
    for (const [i, n] of L2_NODES.entries()) {
      const since = [this.speakers[i]?.downSince, this.linkDownSince.get(n.role)].filter((t): t is number => t !== undefined);
      if (since.length) dead.set(n.address, Math.min(...since));
    }
    return dead;
  }

  /** The speaker node a MAC belongs to (its LAN interface). */
  speakerOf(mac: string): string {
    const node = L2_NODES.find((n) => this.l2.nodes[n.role].lanMac === mac.toLowerCase());
    return node ? node.id : `an unknown station`;
  }

  async stop(): Promise<void> {
    for (const c of this.cleanups.reverse()) await c().catch(() => undefined);
  }
}
