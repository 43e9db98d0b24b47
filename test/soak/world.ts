import { stringify } from 'yaml';
import type { FakeVm } from '../fakes/proxmox-responder.ts';

/**
 * The soak's ground truth: which machines exist (in the static inventory, as Proxmox VMs) and
 * since when, and the address pools. Faults distort what edge-ccm is shown (an empty file, a
 * VM list with most VMs missing) but never this: the checkers judge edge-ccm against it.
 */

export type Group = 'static' | 'proxmox';
export const GROUPS: readonly Group[] = ['static', 'proxmox'];

export interface Machine {
  id: string; // = node name
  group: Group;
  /** Canaries are never removed: the recovery probes register nodes for them. */
  canary: boolean;
  /** The workload leaves it alone (Ready, in the inventory): an L2 speaker's node. */
  pinned?: boolean;
  address: string;
  /** The pod CIDR its kubelet registers with (static machines: routes announced over BGP). */
  podCIDR?: string;
  labels?: Record<string, string>;
  vmid?: number;
  redfish?: boolean;
  /** Presence changes, oldest first; the first entry is the machine's creation. */
  history: { t: number; present: boolean }[];
}

export const present = (m: Machine) => m.history.at(-1)!.present;

/** The label that tells the two replica groups' nodes apart (--managed-node-selector). */
export const GROUP_LABEL = 'soak.edge-ccm.io/provider';
export const PROXMOX_REGION = 'soak';
/** Pools (203.0.113.0/24, a documentation range: addresses are only ever strings here). */
export const MAIN_POOL = { name: 'main', cidr: '203.0.113.0/26' };
export const EXTRA_POOL = { name: 'extra', cidr: '203.0.113.64/27' };
export const CROSS_POOL = { name: 'cross', cidr: '203.0.113.128/28' };
export const POOL_PREFIX = '203.0.113.';
export const SHARE_ANNOTATION_KEY = 'edge-ccm.io/allow-shared-ip';
export const POOL_ANNOTATION_KEY = 'edge-ccm.io/address-pool';
/** The pools whose addresses the leader announces over BGP (main, extra, cross). */
export const BGP_POOLS = [MAIN_POOL, EXTRA_POOL, CROSS_POOL];
/** The static nodes' pod CIDRs (/31 each, announced over BGP by the route controller's routes). */
export const CLUSTER_CIDR = '203.0.113.160/27';
/**
 * Answered by ARP/NDP (`edge-ccm speaker`) on the L2 lab's LAN (test/harness/l2-lab.ts:
 * 198.51.100.0/24, 2001:db8:1::/64), only on the nodes labelled L2_LABEL (the speakers' nodes);
 * handed out only to services that ask for the pool.
 */
export const L2_POOL = {
  name: 'l2',
  addresses: ['198.51.100.240', '198.51.100.241', '198.51.100.242', '198.51.100.243', '2001:db8:1::240', '2001:db8:1::241', '2001:db8:1::242', '2001:db8:1::243'],
};
export const L2_LABEL = 'soak.edge-ccm.io/l2-speaker';
/**
 * The speakers' nodes: their InternalIP is their host's LAN address in the L2 lab (n1, n2, n3).
 * Three, so that with one speaker killed, paused or cut off, two remain: only then can the soak
 * see the survivors split (both answering one address), which two speakers never could.
 * Pod CIDRs inside CLUSTER_CIDR, clear of the other static machines' (.162-.184).
 */
export const L2_NODES = [
  { id: 'l2-n1', role: 'n1', address: '198.51.100.11', podCIDR: '203.0.113.188/31' },
  { id: 'l2-n2', role: 'n2', address: '198.51.100.12', podCIDR: '203.0.113.190/31' },
  { id: 'l2-n3', role: 'n3', address: '198.51.100.13', podCIDR: '203.0.113.186/31' },
] as const;

/** Whether an address lies in a CIDR (IPv4 text only; anything else is not). */
export function inCidr(ip: string, cidr: string): boolean {
  const [base, bits] = cidr.split('/') as [string, string];
  const toInt = (a: string) => {
    const parts = a.split('.').map(Number);
    return parts.length === 4 && parts.every((n) => Number.isInteger(n) && n >= 0 && n < 256) ? ((parts[0]! << 24) >>> 0) + (parts[1]! << 16) + (parts[2]! << 8) + parts[3]! : undefined;
  };
  const x = toInt(ip);
  const b = toInt(base);
  if (x === undefined || b === undefined) return false;
  const size = 2 ** (32 - Number(bits));
  return x >= b && x < b + size;
}

export class World {
  readonly machines = new Map<string, Machine>();
  /** Pool edits: the extra pool on or off, addresses of the main pool excluded. */
  extraPool = false;
  excluded: string[] = [];

  constructor(staticMachines: number, proxmoxVms: number, now: number) {
    // 198.51.100.21-: clear of the BGP lab's router (.1) and replicas (.2-.4), and of the L2 speakers' nodes (.11-.13).
    if (staticMachines > 12) throw new Error(`at most 12 static machines: their pod CIDRs (203.0.113.162-.184) end where the speakers' nodes' begin`);
    for (let i = 1; i <= staticMachines; i++) this.add({ id: `s-${pad(i)}`, group: 'static', canary: false, address: `198.51.100.${20 + i}`, redfish: i % 2 === 0, podCIDR: `203.0.113.${160 + 2 * i}/31` }, now);
    for (const n of L2_NODES) {
      this.add({ id: n.id, group: 'static', canary: false, pinned: true, address: n.address, podCIDR: n.podCIDR, labels: { [L2_LABEL]: 'true' } }, now);
    }
    for (let i = 1; i <= proxmoxVms; i++) this.add({ id: `p-${pad(i)}`, group: 'proxmox', canary: false, address: `198.51.100.${100 + i}`, vmid: 100 + i }, now);
    for (let i = 1; i <= 3; i++) this.add({ id: `p-canary-${i}`, group: 'proxmox', canary: true, address: `198.51.100.${200 + i}`, vmid: 900 + i }, now);
  }

  private add(m: Omit<Machine, 'history'>, now: number): void {
    this.machines.set(m.id, { ...m, history: [{ t: now, present: true }] });
  }

  of(group: Group): Machine[] {
    return [...this.machines.values()].filter((m) => m.group === group);
  }

  setPresent(id: string, isPresent: boolean, now: number): void {
    const m = this.machines.get(id);
    if (!m) throw new Error(`no machine ${id}`);
    if (present(m) !== isPresent) m.history.push({ t: now, present: isPresent });
  }

  /** Whether the machine was in the inventory at time t (ms since the epoch). */
  presentAt(id: string, t: number): boolean | undefined {
    const m = this.machines.get(id);
    if (!m) return undefined;
    let state = false;
    for (const h of m.history) {
      if (h.t > t) break;
      state = h.present;
    }
    return state;
  }

  /**
   * "No Node deleted whose machine still exists": why deleting node `name` at `t` was wrong, or
   * undefined. Wrong for certain when the machine was in the inventory during the whole
   * `toleranceMs` before the delete: the controller judges from an answer at most that old, so
   * it cannot have seen the machine gone. (A machine that left or came back inside that window
   * is not judged: the answer may predate the change.)
   */
  deletionProblem(name: string, t: number, toleranceMs: number): string | undefined {
    const m = this.machines.get(name);
    if (!m) return undefined; // not a soak machine: nothing to judge against
    const since = t - toleranceMs;
    const changed = m.history.some((h) => h.t > since && h.t <= t);
    if (!this.presentAt(name, since) || changed) return undefined;
    return `its machine was in the inventory throughout the ${toleranceMs} ms before`;
  }

  /** The static provider's file: authoritative (a machine not listed is gone), nodes matched by name. */
  staticConfig(files: { redfishUrl: string; redfishPasswordFile: string; bgp: Record<string, unknown> }): string {
    const machines = this.of('static').filter(present).map((m) => ({
      id: m.id,
      addresses: [{ type: 'InternalIP', address: m.address }],
      ...(m.redfish ? {
        redfish: {
          endpoint: files.redfishUrl, allowInsecureHTTP: true, systemId: m.id, username: 'admin',
          passwordFile: files.redfishPasswordFile, timeoutSeconds: 2, cacheSeconds: 5,
        },
      } : {}),
    }));
    const pools: Record<string, unknown>[] = [
      { name: MAIN_POOL.name, addresses: [MAIN_POOL.cidr], announce: 'bgp', ...(this.excluded.length ? { exclude: [...this.excluded] } : {}) },
      { name: CROSS_POOL.name, addresses: [CROSS_POOL.cidr], autoAssign: false, shareAcrossNamespaces: true, announce: 'bgp' },
      { name: L2_POOL.name, addresses: [`${L2_POOL.addresses[0]}-${L2_POOL.addresses[3]}`, `${L2_POOL.addresses[4]}-${L2_POOL.addresses[7]}`], autoAssign: false, announce: 'l2', nodeSelector: `${L2_LABEL}=true` },
    ];
    if (this.extraPool) pools.push({ name: EXTRA_POOL.name, addresses: [EXTRA_POOL.cidr], priority: -1, announce: 'bgp' });
    // Machines last, so a file cut short loses machines (the half-written fault) before pools and BGP.
    return stringify({
      loadBalancer: { pools },
      bgp: files.bgp,
      inventory: {
        authoritative: true,
        matchBy: ['nodeName'],
        defaults: { region: 'soak', zone: 'z1', instanceType: 'metal' },
        machines,
      },
    });
  }

  proxmoxConfig(files: { url: string; tokenSecretFile: string }): string {
    return stringify({
      clusters: [{
        region: PROXMOX_REGION, url: files.url, allowInsecureHTTP: true, tokenId: 'ccm@pve!soak', tokenSecretFile: files.tokenSecretFile,
        timeoutSeconds: 2, cacheSeconds: 1, maxBackoffSeconds: 5,
      }],
      matchBy: ['providerID', 'name'],
      addresses: { guestAgent: false },
    });
  }

  /** The VMs as the responder should list them: every present one, or those `visible` lets through. */
  vms(visible: (m: Machine) => boolean = () => true): FakeVm[] {
    return this.of('proxmox').filter((m) => present(m) && visible(m)).map((m) => ({
      vmid: m.vmid!, name: m.id, node: m.vmid! % 2 ? 'pve1' : 'pve2', cores: 2, memoryMiB: 4096,
      ipconfig: [`ip=${m.address}/24`],
    }));
  }
}

function pad(i: number): string {
  return String(i).padStart(2, '0');
}
