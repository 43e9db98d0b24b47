import { join } from 'node:path';
import { eventually } from './eventually.ts';
import type { NetnsLab } from './netns.ts';
import type { LoggedProcess } from './processes.ts';

/**
 * The real cluster's router: BIRD 2 in the lab's "rtr" namespace, between the switch and a
 * remote client's segment, configured as docs/networking/bgp.md says for
 * `bgp.loadBalancers.announceFrom: nodes`:
 * - a session with edge-ccm (the leader) for the pod CIDRs ("Router configuration for
 *   edge-ccm": ADD-PATH receive, graceful restart on);
 * - a session with each node's speaker, listed, tied to a BFD session (3 x 200 ms) so that a dead
 *   node's paths leave within a second ("Router configuration for per-node sessions");
 * every next hop merged into one ECMP route in the kernel.
 */
export const ROUTER_ASN = 65000;
export const CLUSTER_ASN = 64512;

export class ClusterRouter {
  private constructor(
    private readonly lab: NetnsLab,
    readonly proc: LoggedProcess,
    private readonly socket: string,
  ) {}

  /**
   * Starts BIRD in `role`'s namespace, peering with `leader` (edge-ccm's address) and with each of
   * `nodes` (the speakers' addresses); waits until it answers birdc.
   */
  static async start(lab: NetnsLab, role: string, routerId: string, leader: string, nodes: readonly string[]): Promise<ClusterRouter> {
    const conf = join(lab.dir, 'bird.conf');
    const socket = join(lab.dir, 'bird.ctl');
    await Bun.write(conf, `router id ${routerId};
protocol device { }
protocol kernel kernel4 { ipv4 { export all; }; merge paths on; }
protocol bgp edge_ccm {
  local as ${ROUTER_ASN};
  neighbor ${leader} as ${CLUSTER_ASN};
  graceful restart on;
  ipv4 { import all; export none; add paths rx; };
}
protocol bfd {
  interface "*" { interval 200 ms; multiplier 3; };
}
template bgp edge_node {
  local as ${ROUTER_ASN};
  bfd on;
  graceful restart off;
  hold time 9;
  error wait time 1, 30;
  error forget time 5;
  ipv4 { import all; export none; };
}
${nodes.map((ip, i) => `protocol bgp node${i + 1} from edge_node { neighbor ${ip} as ${CLUSTER_ASN}; }`).join('\n')}
`);
    const proc = lab.spawnLogged(role, 'bird', ['/usr/sbin/bird', '-f', '-c', conf, '-s', socket, '-P', join(lab.dir, 'bird.pidfile')]);
    const router = new ClusterRouter(lab, proc, socket);
    await eventually(`BIRD answering (log ${proc.logPath})`, async () => {
      if (!proc.running) throw new Error(`bird exited: ${proc.logTail()}`);
      return (await router.birdc('show status')).includes('Daemon is up');
    }, 30_000);
    return router;
  }

  async birdc(command: string): Promise<string> {
    const r = await this.lab.exec('rtr', ['/usr/sbin/birdc', '-s', this.socket, ...command.split(' ')]);
    return r.stdout + r.stderr;
  }

  /** The router's BFD session with `address` (a node) is Up. */
  async bfdUp(address: string): Promise<boolean> {
    return (await this.birdc('show bfd sessions')).split('\n').some((l) => l.trim().split(/\s+/)[0] === address && /\bUp\b/.test(l));
  }

  /** The next hops of the router's kernel route to `prefix` (e.g. 198.51.100.240/32), sorted; empty when it has none. */
  async nextHops(prefix: string): Promise<string[]> {
    const out = await this.lab.ip('rtr', '-4', 'route', 'show', prefix);
    return [...out.matchAll(/via (\S+)/g)].map((m) => m[1]!).sort();
  }
}
