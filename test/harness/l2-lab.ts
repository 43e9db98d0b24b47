import { join } from 'node:path';
import { ROUTER4 } from './bgp-lab.ts';
import { eventually } from './eventually.ts';
import { NetnsLab, requireTools } from './netns.ts';
import type { LoggedProcess } from './processes.ts';

/**
 * A single-switch site in network namespaces, for the L2 announcement tests:
 *
 *        client (eth0 .99)               client (eth1 .99)
 *              |                                |
 *   [sw: bridge "lan" 198.51.100.0/24,   bridge "side" 203.0.113.0/24,
 *        2001:db8:1::/64, MLD snooping]       2001:db8:2::/64
 *        |        |        |                |       |       |
 *      n1 eth0  n2 eth0  n3 eth0          n1 eth1 n2 eth1 n3 eth1
 *
 * Each node has the service addresses on its loopback (as kube-proxy's IPVS dummy interface
 * would), so TCP to them is accepted locally, with arp_ignore=1: the kernel answers ARP only for
 * addresses on the interface the request came in on, never for these, and leaves it to the
 * responder. (IPv6 needs nothing: Linux answers a solicitation only for addresses on the
 * receiving interface.) arp_announce=2 keeps the kernel from using a service address as the
 * sender of its own ARP requests. A listener on each node answers HTTP with the node's name.
 *
 * Built with `router: true`, a namespace "rtr" joins the lan at ROUTER4 (198.51.100.1/24): a BGP
 * router for the nodes' own sessions (the soak's BIRD, started by the caller with startRouter).
 */
export const SERVICE_IPV4 = '198.51.100.200';
export const SERVICE_IPV6 = '2001:db8:1::200';
export const UNASSIGNED_IPV4 = '198.51.100.201';
export const UNASSIGNED_IPV6 = '2001:db8:1::201';
/** Announced on the nodes' eth1 only (the "side" segment). */
export const SIDE_IPV4 = '203.0.113.200';
export const SIDE_IPV6 = '2001:db8:2::200';
export const SERVICE_PORT = 8080;
export const NODES = ['n1', 'n2', 'n3'] as const;
export type NodeName = (typeof NODES)[number];

export const NETWORK_TOOLS = {
  '/usr/sbin/ip': 'iproute2',
  '/usr/sbin/arping': 'arping',
  '/usr/bin/ndisc6': 'ndisc6',
  '/usr/bin/curl': 'curl',
};

export interface Host {
  role: string;
  lanMac: string;
  sideMac: string;
  lanIPv4: string;
  lanIPv6: string;
}

const LISTENER = join(import.meta.dir, '..', 'fakes', 'node-listener-main.ts');

function host(role: string, n: number): Host {
  const hex = n.toString(16).padStart(2, '0');
  return { role, lanMac: `02:00:5e:01:00:${hex}`, sideMac: `02:00:5e:02:00:${hex}`, lanIPv4: `198.51.100.${n}`, lanIPv6: `2001:db8:1::${hex}` };
}

/** A request to a dead node fails after this long: the resolution of a measured failover gap. */
export const REQUEST_TIMEOUT_SECONDS = 0.3;

/** One request of a failover measurement: when it started and ended, which node answered (undefined: none). */
export interface Attempt {
  start: number;
  end: number;
  node: string | undefined;
}

/**
 * The failover gap in ms: from the first failed request (at or after `since`, when one failed
 * then) to the first one `newOwner` answered; 0 when none failed.
 */
export function failoverGap(attempts: readonly Attempt[], newOwner: string, since = -Infinity): number {
  const firstFailed = attempts.find((a) => a.start >= since - 1 && a.node === undefined) ?? attempts.find((a) => a.node === undefined);
  const firstGood = attempts.find((a) => a.node === newOwner)!;
  return firstFailed ? Math.round(firstGood.end - firstFailed.start) : 0;
}

export class L2Lab {
  readonly nodes: Record<NodeName, Host> = { n1: host('n1', 11), n2: host('n2', 12), n3: host('n3', 13) };
  readonly client = host('client', 99);
  readonly listeners = new Map<NodeName, LoggedProcess>();

  private constructor(readonly lab: NetnsLab) {}

  static async build(o: { router?: boolean } = {}): Promise<L2Lab> {
    requireTools(NETWORK_TOOLS);
    const lab = NetnsLab.create('l2');
    const site = new L2Lab(lab);
    try {
      await site.wire();
      if (o.router) {
        await lab.addNamespace('rtr');
        await lab.addVeth({ from: 'sw', fromName: 'rtr-lan', to: 'rtr', toName: 'eth0', bridge: 'lan' });
        await lab.ip('rtr', 'addr', 'add', `${ROUTER4}/24`, 'dev', 'eth0');
      }
    } catch (e) {
      await lab.destroy();
      throw e;
    }
    return site;
  }

  private async wire(): Promise<void> {
    const { lab } = this;
    await lab.addNamespace('sw');
    // An MLD querier makes the bridge snoop for real: a solicited-node group reaches only the
    // ports that reported it, as on a managed switch.
    await lab.addBridge('sw', 'lan', 'mcast_snooping', '1', 'mcast_querier', '1');
    await lab.addBridge('sw', 'side');
    for (const h of [...Object.values(this.nodes), this.client]) {
      await lab.addNamespace(h.role);
      // No Duplicate Address Detection or router solicitations: addresses usable at once, links quiet.
      await lab.sysctl(h.role, {
        'net.ipv6.conf.all.accept_dad': 0,
        'net.ipv6.conf.default.accept_dad': 0,
        'net.ipv6.conf.default.dad_transmits': 0,
        'net.ipv6.conf.default.router_solicitations': 0,
      });
      await lab.addVeth({ from: 'sw', fromName: `${h.role}-lan`, to: h.role, toName: 'eth0', bridge: 'lan', mac: h.lanMac });
      await lab.addVeth({ from: 'sw', fromName: `${h.role}-side`, to: h.role, toName: 'eth1', bridge: 'side', mac: h.sideMac });
      const n = h.lanIPv4.split('.').at(-1)!;
      await lab.ip(h.role, 'addr', 'add', `${h.lanIPv4}/24`, 'dev', 'eth0');
      await lab.ip(h.role, 'addr', 'add', `${h.lanIPv6}/64`, 'dev', 'eth0', 'nodad');
      await lab.ip(h.role, 'addr', 'add', `203.0.113.${n}/24`, 'dev', 'eth1');
      await lab.ip(h.role, 'addr', 'add', `2001:db8:2::${Number(n).toString(16)}/64`, 'dev', 'eth1', 'nodad');
    }
    for (const node of NODES) {
      await lab.sysctl(node, { 'net.ipv4.conf.all.arp_ignore': 1, 'net.ipv4.conf.all.arp_announce': 2 });
      await lab.ip(node, 'addr', 'add', `${SERVICE_IPV4}/32`, 'dev', 'lo');
      await lab.ip(node, 'addr', 'add', `${SERVICE_IPV6}/128`, 'dev', 'lo');
      const listener = lab.spawnLogged(node, `listener-${node}`, [process.execPath, LISTENER, node, String(SERVICE_PORT), SERVICE_IPV4, SERVICE_IPV6]);
      this.listeners.set(node, listener);
    }
    for (const [node, listener] of this.listeners) {
      await eventually(`listener on ${node} (log ${listener.logPath})`, () => listener.logTail().includes('listening') || (!listener.running && Promise.reject(new Error(listener.logTail()))), 30_000);
    }
  }

  destroy(): Promise<void> {
    return this.lab.destroy();
  }

  /** MACs that answered one ARP request for `address` from the client's `iface` (arping waits 1 s for every answer). */
  async arpAnswers(address: string, iface = 'eth0'): Promise<string[]> {
    const result = await this.lab.exec('client', ['arping', '-c', '1', '-W', '1', '-i', iface, address]);
    return [...result.stdout.matchAll(/bytes from ([0-9a-f:]{17}) \(/g)].map((m) => m[1]!);
  }

  /** MACs in the Neighbor Advertisements answering one solicitation for `address` (ndisc6 waits 1 s for all). */
  async ndpAnswers(address: string, iface = 'eth0'): Promise<string[]> {
    const result = await this.lab.exec('client', ['ndisc6', '-m', '-n', '-r', '1', '-w', '1000', address, iface]);
    return [...result.stdout.matchAll(/Target link-layer address: ([0-9A-Fa-f:]{17})/g)].map((m) => m[1]!.toLowerCase());
  }

  /** One HTTP request from the client: the name of the node that answered, or undefined. */
  async fetchFromClient(address: string, timeoutSeconds = 1): Promise<string | undefined> {
    const host = address.includes(':') ? `[${address}]` : address;
    const result = await this.lab.exec('client', ['curl', '-g', '-s', '--max-time', String(timeoutSeconds), `http://${host}:${SERVICE_PORT}/`]);
    return result.code === 0 ? result.stdout.trim() : undefined;
  }

  /**
   * Requests `address` from the client back to back, each failing after REQUEST_TIMEOUT_SECONDS,
   * until `newOwner` answers (at most `limit` tries); each try lands in `attempts` as it ends, so
   * a test can watch them while this runs.
   */
  async requestUntil(address: string, newOwner: string, attempts: Attempt[], limit: number): Promise<void> {
    for (let i = 0; i < limit; i++) {
      const start = performance.now();
      const node = await this.fetchFromClient(address, REQUEST_TIMEOUT_SECONDS);
      attempts.push({ start, end: performance.now(), node });
      if (node === newOwner) return;
    }
    throw new Error(`${address} never reached ${newOwner} in ${limit} requests: ${JSON.stringify(attempts.map((a) => a.node ?? 'failed'))}`);
  }

  /** The MAC the client's neighbour table holds for `address`, if any. */
  async clientNeighbour(address: string): Promise<string | undefined> {
    const out = await this.lab.ip('client', 'neigh', 'show', address, 'dev', 'eth0');
    return /lladdr ([0-9a-f:]{17})/.exec(out)?.[1];
  }

  /** Forgets what the client learnt, so a test starts from no neighbour entries. */
  async flushClientNeighbours(): Promise<void> {
    await this.lab.ip('client', 'neigh', 'flush', 'dev', 'eth0');
  }
}
