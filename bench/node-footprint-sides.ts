import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROUTER4 } from '../test/harness/bgp-lab.ts';
import { NODES, type NodeName } from '../test/harness/l2-lab.ts';
import type { LoggedProcess } from '../test/harness/processes.ts';
import { kubeVipCommand } from '../test/harness/kube-vip.ts';
import { chartEnvironment } from './deployed-env.ts';
import { BFD_MULTIPLIER, EDGE_ASN, EDGE_ROUTER_ASN, METALLB_ASN, METALLB_NS, METALLB_ROUTER4, METALLB_ROUTER_ASN, SERVICE_RANGE, serviceAddress, type NodeFootprintLab } from './node-footprint-lab.ts';

/**
 * The sides of bench/node-footprint.ts, each a per-node process started on all three nodes of
 * the lab, configured for the same services (the lab's addresses): how each is configured and
 * started (its own documented way), and how the bench sees that it really announces (ARP answers
 * from a node for the sampled addresses, or the router's table holding a route per address from
 * each node's session), so no side is measured doing nothing.
 */

export interface Binaries {
  edgeCcm: string;
  metallb: string;
  kubeVip: string;
  /** edge-ccm speaker's --address-probes (its default 3). */
  addressProbes: number;
  /** The environment edge-ccm's speaker runs with (the chart's DaemonSet sets one: SPEAKER_ENV). */
  edgeCcmEnv: string[];
}

/** What the chart's speaker DaemonSet sets (its env entries with a literal value), as NAME=VALUE. */
export const SPEAKER_ENV = Object.entries(chartEnvironment('speaker-daemonset.yaml')).map(([name, value]) => `${name}=${value}`);

export interface Side {
  name: string;
  /** Creates what the side reads besides the services (MetalLB's advertisements and peers). */
  setUp?(lab: NodeFootprintLab): Promise<void>;
  start(lab: NodeFootprintLab, node: NodeName): LoggedProcess;
  /** Undefined when it announces every address of the services made so far; else what is missing. */
  missing(lab: NodeFootprintLab): Promise<string | undefined>;
  /** Removes what setUp made and what the side leaves behind once stopped. */
  tearDown?(lab: NodeFootprintLab): Promise<void>;
}

/** The addresses an L2 side's check asks for: the first, the last made, one between. */
function sampled(lab: NodeFootprintLab): string[] {
  const n = lab.addressCount;
  return n === 0 ? [] : [...new Set([serviceAddress(0), serviceAddress(Math.floor(n / 2)), serviceAddress(n - 1)])];
}

/** Each sampled address is answered (ARP) by one of the nodes. */
async function arpMissing(lab: NodeFootprintLab): Promise<string | undefined> {
  for (const address of sampled(lab)) {
    const macs = await lab.arpAnswers(address);
    if (!macs.some((m) => lab.nodeOfMac(m))) return `no node answers ARP for ${address} (answers: ${macs.join(',') || 'none'})`;
  }
  return undefined;
}

/** Every node's session `${prefix}_${node}` gave the router a route per address. */
async function routesMissing(lab: NodeFootprintLab, prefix: string): Promise<string | undefined> {
  for (const n of NODES) {
    const routes = await lab.routesFrom(`${prefix}_${n}`);
    if (routes < lab.addressCount) return `the router has ${routes} of ${lab.addressCount} routes from ${prefix}_${n}`;
  }
  return undefined;
}

/** SPEAKER_ENV's names taken out of what the speaker inherits, so that only --edge-ccm-env sets them. */
const unsetSpeakerEnv = SPEAKER_ENV.flatMap((kv) => ['-u', kv.split('=')[0]!]);

function edgeCcm(name: string, announce: 'l2' | 'bgp', b: Binaries, bfd = true): Side {
  let config = '';
  let key = '';
  return {
    name,
    async setUp(lab) {
      config = join(lab.dir, `edge-ccm-${announce}.yaml`);
      const pool = `loadBalancer:\n  pools:\n    - { name: lan, addresses: [${SERVICE_RANGE.first}-${SERVICE_RANGE.last}], announce: ${announce} }\n`;
      // The per-node sessions as docs/networking/bgp.md shows them: BFD on, every 200 ms (the multiplier: the lab's);
      // or without BFD, as MetalLB's native mode runs (the router's `bfd on` then never sees an Up session, which leaves BGP up).
      const bfdSetting = bfd ? `{ detectMultiplier: ${BFD_MULTIPLIER} }` : '{ enabled: false }';
      const bgp = `bgp:\n  localASN: ${EDGE_ASN}\n  routerID: ${ROUTER4}\n  loadBalancers: { announceFrom: nodes, bfd: ${bfdSetting} }\n  peers:\n    - { address: ${ROUTER4}, asn: ${EDGE_ROUTER_ASN}, families: [4] }\n`;
      writeFileSync(config, announce === 'bgp' ? pool + bgp : pool);
      key = join(lab.dir, 'liveness.key');
      writeFileSync(key, randomBytes(32).toString('hex'), { mode: 0o600 });
    },
    // `env` execs the speaker: the pid is the speaker's. The caller's environment is not the DaemonSet's.
    start: (lab, node) => lab.site.lab.spawnLogged(node, `edge-ccm-${announce}-${node}`, [
      'env', ...unsetSpeakerEnv, ...b.edgeCcmEnv, b.edgeCcm, 'speaker', `--cloud-config=${config}`, `--node-name=${node}`, `--kubeconfig=${lab.kubeconfig}`,
      ...(announce === 'l2' ? [`--liveness-key-file=${key}`, `--address-probes=${b.addressProbes}`] : []),
    ]),
    missing: (lab) => (announce === 'l2' ? arpMissing(lab) : routesMissing(lab, 'edge')),
  };
}

function metallb(name: string, mode: 'l2' | 'bgp', binary: string): Side {
  const objects = mode === 'l2'
    ? [`apiVersion: metallb.io/v1beta1\nkind: L2Advertisement\nmetadata: {name: lan, namespace: ${METALLB_NS}}\nspec: {ipAddressPools: [lan], interfaces: [eth0]}`]
    : [
      `apiVersion: metallb.io/v1beta2\nkind: BGPPeer\nmetadata: {name: rtr, namespace: ${METALLB_NS}}\nspec: {myASN: ${METALLB_ASN}, peerASN: ${METALLB_ROUTER_ASN}, peerAddress: ${METALLB_ROUTER4}}`,
      `apiVersion: metallb.io/v1beta1\nkind: BGPAdvertisement\nmetadata: {name: lan, namespace: ${METALLB_NS}}\nspec: {ipAddressPools: [lan]}`,
    ];
  let secretDir = '';
  return {
    name,
    async setUp(lab) {
      await lab.apply(objects.join('\n---\n'));
      secretDir = join(lab.dir, 'memberlist');
      mkdirSync(secretDir, { recursive: true });
      writeFileSync(join(secretDir, 'secretkey'), randomBytes(32).toString('hex'), { mode: 0o600 });
    },
    // As its manifest runs it: memberlist on (on the node's address, its default port 7946), its
    // metrics on 7473 (edge-ccm's speaker has 7472 in the same namespace).
    start: (lab, node) => lab.site.lab.spawnLogged(node, `metallb-${mode}-${node}`, [
      binary, `--node-name=${node}`, `--namespace=${METALLB_NS}`, `--kubeconfig=${lab.kubeconfig}`, '--host=127.0.0.1', '--port=7473',
      '--log-level=warn', `--pod-name=speaker-${node}`, `--ml-bindaddr=${lab.site.nodes[node].lanIPv4}`, '--ml-labels=app=metallb,component=speaker',
      `--ml-secret-key-path=${secretDir}`,
    ]),
    missing: (lab) => (mode === 'l2' ? arpMissing(lab) : routesMissing(lab, 'metallb')),
    async tearDown(lab) {
      for (const path of mode === 'l2'
        ? [`/apis/metallb.io/v1beta1/namespaces/${METALLB_NS}/l2advertisements/lan`]
        : [`/apis/metallb.io/v1beta2/namespaces/${METALLB_NS}/bgppeers/rtr`, `/apis/metallb.io/v1beta1/namespaces/${METALLB_NS}/bgpadvertisements/lan`]) {
        await lab.admin.request({ method: 'DELETE', path }).catch(() => {}); // absent when the set-up failed half-way
      }
      for (const plural of ['servicel2statuses', 'servicebgpstatuses']) await lab.admin.request({ method: 'DELETE', path: `/apis/metallb.io/v1beta1/namespaces/${METALLB_NS}/${plural}` });
    },
  };
}

/**
 * kube-vip's services mode with ARP as its docs deploy it (`kube-vip manifest daemonset
 * --services --arp --leaderElection`): one leader (Lease plndr-svcs-lock in kube-system)
 * announces every service, placing each address on its eth0; the address comes from the
 * kube-vip.io/loadbalancerIPs annotation.
 */
function kubeVip(name: string, binary: string): Side {
  return {
    name,
    start: (lab, node) => lab.site.lab.spawnLogged(node, `kube-vip-${node}`, kubeVipCommand(binary, lab.kubeconfig, [
      '--services', '--arp', '--leaderElection', '--interface=eth0', `--nodeName=${node}`, '--prometheusHTTPServer=127.0.0.1:2112',
    ])),
    missing: arpMissing,
    async tearDown(lab) {
      // It removes its addresses when it stops; whatever it left goes, so the next side starts on a quiet link.
      for (const n of NODES) {
        const out = await lab.site.lab.ip(n, '-4', '-o', 'addr', 'show', 'dev', 'eth0');
        for (const m of out.matchAll(/inet (198\.51\.100\.1\d\d)\/32/g)) await lab.site.lab.ip(n, 'addr', 'del', `${m[1]}/32`, 'dev', 'eth0');
      }
    },
  };
}

/** A phase: sides run at the same time (their addresses and ports do not collide). */
export interface Phase {
  name: string;
  sides: Side[];
}

export function phases(b: Binaries): Record<string, Phase> {
  return {
    'edge-ccm-l2': { name: 'L2: edge-ccm speaker', sides: [edgeCcm(`edge-ccm speaker (announce: l2${b.addressProbes === 3 ? '' : `, --address-probes=${b.addressProbes}`})`, 'l2', b)] },
    'metallb-l2': { name: 'L2: MetalLB speaker', sides: [metallb('MetalLB speaker v0.15.2 (L2, memberlist)', 'l2', b.metallb)] },
    'kube-vip': { name: 'L2: kube-vip', sides: [kubeVip('kube-vip (services, ARP, leader election)', b.kubeVip)] },
    // Concurrent: each has its own sessions (its own router address and ASNs) and its own ports.
    bgp: {
      name: 'BGP: edge-ccm speaker and MetalLB speaker',
      sides: [edgeCcm('edge-ccm speaker (announce: bgp, BFD)', 'bgp', b), metallb('MetalLB speaker v0.15.2 (native BGP, memberlist)', 'bgp', b.metallb)],
    },
    // MetalLB's native BGP mode has no BFD: the same sessions without it on edge-ccm's side.
    'bgp-no-bfd': {
      name: 'BGP without BFD: edge-ccm speaker and MetalLB speaker',
      sides: [edgeCcm('edge-ccm speaker (announce: bgp, no BFD)', 'bgp', b, false), metallb('MetalLB speaker v0.15.2 (native BGP, memberlist)', 'bgp', b.metallb)],
    },
  };
}
