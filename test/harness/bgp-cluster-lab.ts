import { ROUTER4, ROUTER6, ROUTER_TOOLS, startRouter, type BgpRouter, type RouterKind, type RouterOptions } from './bgp-lab.ts';
import { NetnsLab, requireTools } from './netns.ts';

/**
 * A bare-metal cluster's network in namespaces, for edge-ccm's BGP announcements end to end:
 *
 *                        lan (bridge br0): 198.51.100.0/24, 2001:db8::/64
 *     [rtr] .1 ::1 ---+--- [ccm1] .2 ::2   [ccm2] .3 ::3   ([ccm3] .4 ::4)   (edge-ccm replicas)
 *       | rtr1        +--- [n1] .11 ::11   [n2] .12 ::12   [n3] .13 ::13   (nodes)
 *       | 203.0.113.128/30, 2001:db8:ff::/64
 *     [cli] .130 ::2 (a client behind the router)
 *
 * The router (BIRD, FRR or GoBGP) peers with both replicas (IPv4 and IPv6 sessions each); only
 * the leader speaks. Nodes reach the client through the router (their default route), and
 * answer on the load-balancer addresses the test puts on their loopback. Documentation ranges
 * only; nothing leaves the lab's namespaces (deleted with it).
 */

export interface ReplicaHost {
  role: string;
  v4: string;
  v6: string;
}

/** Every replica slot a lab may have; the router peers with those the lab is built with. */
export const REPLICA_SLOTS: readonly ReplicaHost[] = [
  { role: 'ccm1', v4: '198.51.100.2', v6: '2001:db8::2' },
  { role: 'ccm2', v4: '198.51.100.3', v6: '2001:db8::3' },
  { role: 'ccm3', v4: '198.51.100.4', v6: '2001:db8::4' },
];

/** The two replicas of a lab built with the default. */
export const REPLICAS = [
  { role: 'ccm1', v4: '198.51.100.2', v6: '2001:db8::2' },
  { role: 'ccm2', v4: '198.51.100.3', v6: '2001:db8::3' },
] as const;

export const CLUSTER_NODES = [
  { name: 'n1', v4: '198.51.100.11', v6: '2001:db8::11' },
  { name: 'n2', v4: '198.51.100.12', v6: '2001:db8::12' },
  { name: 'n3', v4: '198.51.100.13', v6: '2001:db8::13' },
] as const;

export const CLIENT = { v4: '203.0.113.130', gw4: '203.0.113.129', v6: '2001:db8:ff::2', gw6: '2001:db8:ff::1' } as const;

/** `replicas`: the replica hosts on the LAN (default REPLICAS); the router peers with each. */
export async function createClusterLab(label: string, kind: RouterKind, router: RouterOptions = {}, replicas: readonly ReplicaHost[] = REPLICAS): Promise<{ lab: NetnsLab; router: BgpRouter }> {
  requireTools({ ...ROUTER_TOOLS[kind], '/usr/bin/curl': 'curl' });
  const lab = NetnsLab.create(label);
  try {
    await lab.addNamespace('lan');
    await lab.addBridge('lan', 'br0');
    const onLan = async (role: string, v4: string, v6: string) => {
      await lab.addNamespace(role);
      await lab.addVeth({ from: 'lan', fromName: `l-${role}`, to: role, toName: 'eth0', bridge: 'br0' });
      await lab.ip(role, 'addr', 'add', `${v4}/24`, 'dev', 'eth0');
      await lab.ip(role, 'addr', 'add', `${v6}/64`, 'dev', 'eth0', 'nodad');
    };
    await onLan('rtr', ROUTER4, ROUTER6);
    await lab.addNamespace('cli');
    await lab.addVeth({ from: 'rtr', fromName: 'rtr1', to: 'cli', toName: 'eth0' });
    await lab.ip('rtr', 'addr', 'add', `${CLIENT.gw4}/30`, 'dev', 'rtr1');
    await lab.ip('rtr', 'addr', 'add', `${CLIENT.gw6}/64`, 'dev', 'rtr1', 'nodad');
    await lab.sysctl('rtr', { 'net.ipv4.ip_forward': 1, 'net.ipv6.conf.all.forwarding': 1, 'net.ipv4.conf.all.rp_filter': 0, 'net.ipv4.fib_multipath_hash_policy': 1 });
    await lab.ip('cli', 'addr', 'add', `${CLIENT.v4}/30`, 'dev', 'eth0');
    await lab.ip('cli', 'addr', 'add', `${CLIENT.v6}/64`, 'dev', 'eth0', 'nodad');
    await lab.ip('cli', 'route', 'add', 'default', 'via', CLIENT.gw4);
    await lab.ip('cli', '-6', 'route', 'add', 'default', 'via', CLIENT.gw6);
    for (const r of replicas) await onLan(r.role, r.v4, r.v6);
    for (const n of CLUSTER_NODES) {
      await onLan(n.name, n.v4, n.v6);
      await lab.sysctl(n.name, { 'net.ipv4.conf.all.rp_filter': 0 });
      await lab.ip(n.name, 'route', 'add', 'default', 'via', ROUTER4);
      await lab.ip(n.name, '-6', 'route', 'add', 'default', 'via', ROUTER6);
    }
    const started = await startRouter(lab, kind, { gracefulRestart: true, speakers: replicas.map((r) => ({ v4: r.v4, v6: r.v6 })), ...router });
    return { lab, router: started };
  } catch (e) {
    await lab.destroy();
    throw e;
  }
}
