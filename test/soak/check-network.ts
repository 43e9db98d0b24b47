import type { V1Node, V1Service } from '@kubernetes/client-node';
import type { Condition } from './check-services.ts';
import { BGP_POOLS, EXTRA_POOL, GROUP_LABEL, inCidr, L2_POOL, MAIN_POOL } from './world.ts';

/**
 * The network invariants, as conditions read from one look at the router's RIB or the wire,
 * judged against the cluster as the API server has it (the Persistence tracker of
 * check-services.ts turns one that lasts into a violation). Written from docs/networking/bgp.md
 * and l2.md, not imported from edge-ccm's announcement code: this is the oracle.
 *
 * BGP, the replicas' router (GoBGP): the pod CIDR of every static node that has an InternalIP is
 * in its RIB from the lease holder; nothing else is there (the load-balancer addresses are the
 * nodes' own, with announceFrom: nodes), and no other replica has a path in it.
 * BGP, the nodes' router (BIRD): every address a LoadBalancer service of ours holds in an
 * `announce: bgp` pool has a path through every speaker node that serves (runs, is reachable, is
 * not drained); nothing else is there; and a dead node's next hop is gone within 1 s of its death
 * plus the sampling period (DeadHopWatch: a violation at once, no settle time).
 * L2: every address a service holds in the L2 pool is answered by exactly one speaker; an
 * address nobody holds, by none.
 */

export type NetworkConditionKind = 'bgp-missing' | 'bgp-unexpected' | 'bgp-not-leader' | 'bgp-node-missing' | 'l2-silent' | 'l2-double' | 'l2-stray';

export interface RibPathView {
  prefix: string;
  /** The neighbour (replica address) that sent it. */
  neighbor: string;
  /** Kept by graceful restart after its session ended. */
  stale: boolean;
}

/** A LoadBalancer service of ours (no class) that is not being deleted: its addresses are announced. */
function announced(s: V1Service): boolean {
  return s.spec?.type === 'LoadBalancer' && !s.spec.loadBalancerClass && !s.metadata?.deletionTimestamp;
}

const ips = (s: V1Service) => (s.status?.loadBalancer?.ingress ?? []).map((i) => i.ip ?? '').filter(Boolean);

function internalIPv4(n: V1Node): string | undefined {
  return n.status?.addresses?.find((a) => a.type === 'InternalIP' && !a.address.includes(':'))?.address;
}

export interface BgpInput {
  services: readonly V1Service[];
  nodes: readonly V1Node[];
  paths: readonly RibPathView[];
  /** The address of the replica holding the static group's lease now; undefined: nobody does. */
  leader?: string;
  /** The pools as the file in force has them: the extra pool on or off, the main pool's excluded addresses. */
  extraPool: boolean;
  excluded: readonly string[];
  /**
   * Whether a missing prefix counts: not while the router's session with the leader is being
   * reset (a fault), nor while a fault holds the static file (an empty file has no bgp section).
   */
  judgeMissing: boolean;
}

/**
 * The load-balancer addresses of the BGP pools: `expected` (held by a service announced now, its
 * pool in force) and `allowed` (also those whose pool was taken out of the file or excluded
 * meanwhile: whether they are still announced depends on the service's next sync, so they are
 * judged only not to be strays).
 */
function loadBalancerPrefixes(input: Pick<BgpInput, 'services' | 'extraPool' | 'excluded'>): { expected: Map<string, string>; allowed: Set<string> } {
  const expected = new Map<string, string>();
  const allowed = new Set<string>();
  for (const s of input.services) {
    const who = `service ${s.metadata?.namespace}/${s.metadata?.name}`;
    for (const ip of ips(s)) {
      if (!BGP_POOLS.some((p) => inCidr(ip, p.cidr))) continue;
      if (announced(s)) allowed.add(`${ip}/32`);
      const inForce = inCidr(ip, EXTRA_POOL.cidr) ? input.extraPool : !(inCidr(ip, MAIN_POOL.cidr) && input.excluded.includes(ip));
      if (announced(s) && inForce) expected.set(`${ip}/32`, `${ip} of ${who}`);
    }
  }
  return { expected, allowed };
}

export function bgpConditions(input: BgpInput): { conditions: Condition[]; checks: number } {
  const conditions: Condition[] = [];
  let checks = 0;
  const statics = input.nodes.filter((n) => n.metadata?.labels?.[GROUP_LABEL] === 'static');
  const expected = new Map<string, string>();
  const allowed = new Set<string>();
  for (const n of statics) {
    const cidrs = n.spec?.podCIDRs?.length ? n.spec.podCIDRs : n.spec?.podCIDR ? [n.spec.podCIDR] : [];
    for (const cidr of cidrs) {
      allowed.add(cidr);
      if (!n.metadata?.deletionTimestamp && internalIPv4(n)) expected.set(cidr, `pod CIDR ${cidr} of node ${n.metadata?.name}`);
    }
  }
  const fromLeader = new Set(input.paths.filter((p) => !p.stale && p.neighbor === input.leader).map((p) => p.prefix));
  if (input.judgeMissing) {
    for (const [prefix, what] of expected) {
      checks++;
      if (!fromLeader.has(prefix)) {
        conditions.push({ key: `bgp-missing:${prefix}`, kind: 'bgp-missing', detail: `${what} is not in the router's RIB from the leader (${input.leader ?? 'none'})` });
      }
    }
  }
  const others = new Map<string, number>();
  for (const p of input.paths) {
    checks++;
    if (!allowed.has(p.prefix)) {
      conditions.push({ key: `bgp-unexpected:${p.prefix}:${p.neighbor}`, kind: 'bgp-unexpected', detail: `${p.prefix} from ${p.neighbor}${p.stale ? ' (stale)' : ''} is in the router's RIB, but no service holds it and it is no node's pod CIDR` });
    }
    if (p.neighbor !== input.leader) others.set(p.neighbor, (others.get(p.neighbor) ?? 0) + 1);
  }
  for (const [neighbor, n] of others) {
    conditions.push({ key: `bgp-not-leader:${neighbor}`, kind: 'bgp-not-leader', detail: `${n} paths from ${neighbor}, which does not hold the lease (leader: ${input.leader ?? 'none'})` });
  }
  return { conditions, checks };
}

/**
 * Whether a node may carry load-balancer traffic (docs/networking/bgp.md): its Node object exists,
 * is not being deleted, has no exclusion label and no ToBeDeletedByClusterAutoscaler taint.
 */
export function servesLoadBalancers(node: V1Node | undefined): boolean {
  if (!node || node.metadata?.deletionTimestamp) return false;
  if (node.metadata?.labels?.['node.kubernetes.io/exclude-from-external-load-balancers'] !== undefined) return false;
  return !node.spec?.taints?.some((t) => t.key === 'ToBeDeletedByClusterAutoscaler');
}

export interface NodeBgpInput {
  services: readonly V1Service[];
  /** The nodes' router's table: prefix -> next hops. */
  table: ReadonlyMap<string, readonly string[]>;
  /** The addresses of the speaker nodes serving now (running, reachable, not drained). */
  serving: readonly string[];
  extraPool: boolean;
  excluded: readonly string[];
  /** Whether a missing path counts (not while a fault holds the static file). */
  judgeMissing: boolean;
}

/** The nodes' router (announceFrom: nodes): each expected address through each serving node; no stray prefix. */
export function nodeBgpConditions(input: NodeBgpInput): { conditions: Condition[]; checks: number } {
  const conditions: Condition[] = [];
  let checks = 0;
  const { expected, allowed } = loadBalancerPrefixes(input);
  if (input.judgeMissing) {
    for (const [prefix, what] of expected) {
      const hops = input.table.get(prefix) ?? [];
      for (const node of input.serving) {
        checks++;
        if (!hops.includes(node)) conditions.push({ key: `bgp-node-missing:${prefix}:${node}`, kind: 'bgp-node-missing', detail: `${what} has no path through serving node ${node} in the nodes' router` });
      }
    }
  }
  for (const [prefix, hops] of input.table) {
    checks++;
    if (!allowed.has(prefix)) conditions.push({ key: `bgp-unexpected:${prefix}:nodes`, kind: 'bgp-unexpected', detail: `${prefix} via ${hops.join(', ')} is in the nodes' router, but no service holds it` });
  }
  return { conditions, checks };
}

/** A dead node's next hop seen in the router later than the limit after its death. */
export interface DeadHop {
  node: string;
  prefixes: string[];
  deadSince: number;
  /** From the death to the sample that still saw it. */
  lateMs: number;
}

/**
 * "A dead node leaves the router's table within 1 s" (issue 29), from samples of the nodes'
 * router: a node dead since t (its speaker killed or paused, its link down) whose next hop is
 * still there in a sample started after t + limit is a violation, once per death. The first
 * sample without its next hops, of a node that had some when it died, gives the withdrawal time
 * (an upper bound: samples are `period` apart).
 */
export class DeadHopWatch {
  /** node@deadSince -> state of that death. */
  private readonly deaths = new Map<string, { reported: boolean; withdrawn: boolean; measurable: boolean }>();
  /** Nodes that had a next hop in the last sample. */
  private hadHops = new Set<string>();

  constructor(
    private readonly limitMs: number,
    private readonly onViolation: (d: DeadHop) => void,
    private readonly onWithdrawn: (node: string, ms: number) => void,
  ) {}

  /** Judges one sample taken at `at` (Date.now() when the read started); returns the number of checks. */
  observe(table: ReadonlyMap<string, readonly string[]>, dead: ReadonlyMap<string, number>, at: number): number {
    let checks = 0;
    const withHops = new Map<string, string[]>();
    for (const [prefix, hops] of table) for (const hop of hops) withHops.set(hop, [...(withHops.get(hop) ?? []), prefix]);
    for (const [node, since] of dead) {
      if (since > at) continue;
      checks++;
      const key = `${node}@${since}`;
      let death = this.deaths.get(key);
      if (!death) {
        death = { reported: false, withdrawn: false, measurable: this.hadHops.has(node) };
        this.deaths.set(key, death);
      }
      const prefixes = withHops.get(node) ?? [];
      if (!prefixes.length) {
        if (!death.withdrawn && death.measurable) this.onWithdrawn(node, at - since);
        death.withdrawn = true;
        continue;
      }
      death.measurable = true;
      if (!death.reported && at - since > this.limitMs) {
        death.reported = true;
        this.onViolation({ node, prefixes: prefixes.sort(), deadSince: since, lateMs: at - since });
      }
    }
    for (const key of this.deaths.keys()) {
      const [node, since] = key.split('@') as [string, string];
      if (dead.get(node) !== Number(since)) this.deaths.delete(key);
    }
    this.hadHops = new Set(withHops.keys());
    return checks;
  }
}

export interface L2Input {
  services: readonly V1Service[];
  /** Every L2 pool address probed, with the MACs that answered it. */
  answers: ReadonlyMap<string, readonly string[]>;
  /** MAC -> speaker node, for the details. */
  speakerOf: (mac: string) => string;
  /** Whether a silent address counts: not while a fault holds the static file (an empty file has no pools). */
  judgeSilent: boolean;
}

export function l2Conditions(input: L2Input): { conditions: Condition[]; checks: number } {
  const conditions: Condition[] = [];
  const held = new Map<string, string>();
  for (const s of input.services) {
    if (!announced(s)) continue;
    for (const ip of ips(s)) if (L2_POOL.addresses.includes(ip)) held.set(ip, `${s.metadata?.namespace}/${s.metadata?.name}`);
  }
  let checks = 0;
  for (const [address, macs] of input.answers) {
    checks++;
    const distinct = [...new Set(macs)];
    const who = distinct.map((m) => `${input.speakerOf(m)} (${m})`).join(', ');
    const holder = held.get(address);
    if (!holder) {
      if (distinct.length) conditions.push({ key: `l2-stray:${address}`, kind: 'l2-stray', detail: `${address}, held by no service, answered by ${who}` });
    } else if (distinct.length > 1) {
      conditions.push({ key: `l2-double:${address}`, kind: 'l2-double', detail: `${address} of service ${holder} answered by ${who}` });
    } else if (distinct.length === 0 && input.judgeSilent) {
      conditions.push({ key: `l2-silent:${address}`, kind: 'l2-silent', detail: `${address} of service ${holder} answered by no speaker` });
    }
  }
  return { conditions, checks };
}

/** One L2 probe round, as test/soak/l2-prober.ts hands it over. */
export interface L2ProbeRound {
  round: number;
  sentAt: number;
  /** Each probed address, with the distinct MACs that answered this round's one probe of it. */
  answers: ReadonlyMap<string, readonly string[]>;
}

/** A run of consecutive rounds in which two or more MACs answered one address's probe. */
export interface TwoMacEpisode {
  address: string;
  /** Every MAC seen answering during the episode, with its speaker node. */
  who: string;
  firstAt: number;
  /** Rounds x the probe period. */
  lastedMs: number;
  rounds: number;
}

/**
 * "Never two MACs answer one address" (issue 29), from the prober's rounds (one probe per
 * address every period, on the wire): an address whose one probe two stations answered, whoever
 * holds it or not, is a split. Consecutive such rounds are one episode; an episode is a
 * violation once it lasts longer than `toleranceMs` (0: its first round), reported once, and
 * every episode's length is told when it ends.
 */
export class TwoMacWatch {
  private readonly open = new Map<string, { firstRound: number; firstAt: number; lastRound: number; macs: Set<string>; reported: boolean }>();

  constructor(
    private readonly toleranceMs: number,
    private readonly periodMs: number,
    private readonly speakerOf: (mac: string) => string,
    private readonly onViolation: (e: TwoMacEpisode) => void,
    private readonly onEnd: (e: TwoMacEpisode) => void = () => {},
  ) {}

  /** Judges one round; returns the number of checks (one per address). */
  observe(round: L2ProbeRound): number {
    let checks = 0;
    for (const [address, macs] of round.answers) {
      checks++;
      const distinct = new Set(macs);
      let e = this.open.get(address);
      if (distinct.size < 2) {
        if (e) {
          this.open.delete(address);
          this.onEnd(this.episode(address, e));
        }
        continue;
      }
      if (!e) {
        e = { firstRound: round.round, firstAt: round.sentAt, lastRound: round.round, macs: new Set(), reported: false };
        this.open.set(address, e);
      }
      e.lastRound = round.round;
      for (const m of distinct) e.macs.add(m);
      const episode = this.episode(address, e);
      if (!e.reported && episode.lastedMs > this.toleranceMs) {
        e.reported = true;
        this.onViolation(episode);
      }
    }
    return checks;
  }

  /** Episodes still going (at the end of a run). */
  current(): TwoMacEpisode[] {
    return [...this.open].map(([address, e]) => this.episode(address, e));
  }

  private episode(address: string, e: { firstRound: number; firstAt: number; lastRound: number; macs: Set<string> }): TwoMacEpisode {
    const rounds = e.lastRound - e.firstRound + 1;
    return { address, who: [...e.macs].map((m) => `${this.speakerOf(m)} (${m})`).join(', '), firstAt: e.firstAt, lastedMs: rounds * this.periodMs, rounds };
  }
}
