import { formatIP, type IP, type IPFamily } from '../net/ip.ts';
import { rangeSize, rangesContain } from './ranges.ts';
import type { PoolConfig } from './config-model.ts';
import { AllocationError, familyName, type AddressRequest, type SharingTerms } from './requests.ts';
import { AddressClaims, ipKey, type AllocationPolicy } from './claims.ts';
import type { AddressPoolStatus } from '../cloud/types.ts';
import type { AddressRange } from './ranges.ts';
import { compareCodeUnits } from '../util/compare.ts';

/**
 * The load-balancer address allocator: which service holds which addresses, in memory, rebuilt
 * from the services' own status on start. Every method is synchronous, so two services racing
 * for an address are decided by call order: exactly one gets it.
 *
 * Allocation is deterministic: pools in priority order (then file order), lowest free address
 * first; a service with a sharing key first reuses an address its key already holds. Addresses
 * reserved for a service, or held for it after it released them (claims.ts), go to nobody else.
 */

export interface Assignment {
  key: string;
  namespace: string;
  /** In the service's family order. */
  addresses: IP[];
  sharingKey?: string;
  ports: readonly string[];
  trafficScope: string;
}

export interface PoolUsage {
  pool: string;
  total: bigint;
  /** Distinct addresses of the pool held by at least one service. */
  used: number;
}

/** An address the service's sharing key holds that it could not join, for an AddressNotShared event. */
export interface NotShared {
  address: IP;
  /** namespace/name of the service it clashes with. */
  holder: string;
  /** Why, e.g. "both use port TCP/80". */
  reason: string;
  /** The address the service got instead. */
  instead: IP;
}

/** Why a service cannot hold an address next to one of its holders. */
interface Conflict {
  holder: string;
  reason: string;
  /** The condition reason: the address is someone else's, or sharing it was refused. */
  condition: 'RequestedAddressInUse' | 'SharingRefused';
  /** The whole sentence, for an AllocationError. */
  message: string;
}

export class AddressAllocator {
  private pools: PoolConfig[];
  private readonly assignments = new Map<string, Assignment>();
  /** Address -> keys of the services holding it (several when shared). */
  private readonly holders = new Map<string, Set<string>>();

  private readonly claims: AddressClaims;

  /** `now`: the clock of release holds (tests). */
  constructor(pools: PoolConfig[] = [], policy: AllocationPolicy = {}, now: () => number = Date.now) {
    this.pools = pools;
    this.claims = new AddressClaims(now);
    this.claims.configure(policy);
  }

  /**
   * New pools (a reloaded config), and with them its reservations and hold time; assignments
   * stay and are re-checked on each service's next assign. Holds already running keep their end.
   */
  setPools(pools: PoolConfig[], policy?: AllocationPolicy): void {
    this.pools = pools;
    if (policy) this.claims.configure(policy);
  }

  /** The pools in force, in the order services try them. */
  configuredPools(): readonly PoolConfig[] {
    return this.pools;
  }

  clear(): void {
    this.assignments.clear();
    this.holders.clear();
  }

  assignmentOf(key: string): Assignment | undefined {
    return this.assignments.get(key);
  }

  /**
   * The service's addresses: its current ones while still valid, else the requested ones, else
   * new ones. Throws AllocationError when the request cannot be met: the service keeps its
   * addresses and sharing key, but the ports and traffic policy it serves now are recorded,
   * since the data plane serves the spec's ports whether or not its change was refused (a later
   * sharer is judged against them). An address on which those now clash with another holder
   * is given up (the other holder did not change; kube-proxy would serve one port twice on it),
   * and the error says so.
   */
  assign(req: AddressRequest): Assignment & { notShared: NotShared[] } {
    const current = this.assignments.get(req.key);
    const notShared: NotShared[] = [];
    let addresses: IP[];
    try {
      addresses = req.requested ? this.checkRequested(req) : this.pickAddresses(req, current, notShared);
    } catch (e) {
      if (current && e instanceof AllocationError) throw this.keepAfterRefusal(req, current, e);
      throw e;
    }
    const next: Assignment = { key: req.key, namespace: req.namespace, addresses, sharingKey: req.sharingKey, ports: req.ports, trafficScope: req.trafficScope };
    this.store(next);
    return { ...next, notShared };
  }

  /**
   * Records what a service already holds (its status after a restart), without allocating.
   * Addresses that would collide with earlier records are left out and returned, so no
   * address is ever held twice; the service gets a valid one on its next assign.
   */
  record(req: SharingTerms, addresses: IP[]): IP[] {
    const refused: IP[] = [];
    const kept: IP[] = [];
    for (const ip of addresses) {
      // One address per family, as assign would give.
      if (!this.conflict(req, ip) && !kept.some((k) => k.family === ip.family)) kept.push(ip);
      else refused.push(ip);
    }
    if (kept.length) this.store({ ...req, addresses: kept });
    return refused;
  }

  /**
   * A refused change: the service keeps its addresses and sharing key with the ports and traffic
   * policy of its spec now, except the addresses where those clash with another holder. Returns
   * the error to throw (the same one, or one that also names what was given up).
   */
  private keepAfterRefusal(req: AddressRequest, current: Assignment, error: AllocationError): AllocationError {
    const terms: SharingTerms = { ...req, sharingKey: current.sharingKey };
    const clashes = current.addresses.map((ip) => ({ ip, conflict: this.conflict(terms, ip) }));
    const kept = clashes.filter((c) => !c.conflict).map((c) => c.ip);
    const given = clashes.filter((c) => c.conflict);
    if (kept.length) this.store({ ...current, addresses: kept, ports: req.ports, trafficScope: req.trafficScope });
    else this.release(req.key);
    if (!given.length) return error;
    const why = given.map((c) => `${formatIP(c.ip)}, which it shared with service ${c.conflict!.holder} (${c.conflict!.reason})`).join(', and ');
    return new AllocationError(`${error.message}; the service gave up ${why}`, error.reason);
  }

  release(key: string): boolean {
    const current = this.assignments.get(key);
    if (!current) return false;
    const freed: IP[] = [];
    for (const ip of current.addresses) {
      const set = this.holders.get(ipKey(ip));
      set?.delete(key);
      if (set?.size === 0) {
        this.holders.delete(ipKey(ip));
        freed.push(ip);
      }
    }
    this.assignments.delete(key);
    this.claims.noteReleased(key, freed);
    return true;
  }

  usage(): PoolUsage[] {
    return this.pools.map((pool) => ({
      pool: pool.name,
      total: pool.ranges.reduce((sum, r) => sum + rangeSize(r), 0n),
      used: [...this.holders.keys()].filter((k) => rangesContain(pool.ranges, parseKey(k))).length,
    }));
  }

  /** Each pool per IP family, and the services holding its addresses (for the AddressPool objects). */
  details(): AddressPoolStatus[] {
    const inUse = (ip: IP) => this.holders.has(ipKey(ip));
    return this.pools.map((pool) => {
      const families = ([4, 6] as const).filter((f) => pool.ranges.some((r) => r.family === f)).map((f) => {
        const ranges = pool.ranges.filter((r) => r.family === f);
        return {
          family: familyName(f) as 'IPv4' | 'IPv6',
          total: ranges.reduce((sum, r) => sum + rangeSize(r), 0n),
          used: [...this.holders.keys()].filter((k) => rangesContain(ranges, parseKey(k))).length,
          kept: this.claims.keptCount((ip) => inUse(ip) || !rangesContain(ranges, ip)),
        };
      });
      const services = [...this.assignments.values()]
        .map((a) => ({ service: a.key, addresses: a.addresses.filter((ip) => rangesContain(pool.ranges, ip)).map(formatIP) }))
        .filter((s) => s.addresses.length)
        .sort((a, b) => compareCodeUnits(a.service, b.service));
      return { name: pool.name, addresses: pool.ranges.map(formatRange), families, services };
    });
  }

  /** The keys of the services holding an address (several when shared). */
  holdersOf(ip: IP): string[] {
    return [...(this.holders.get(ipKey(ip)) ?? [])];
  }

  /** The pool holding an address, if any. */
  poolOf(ip: IP): PoolConfig | undefined {
    return this.pools.find((p) => rangesContain(p.ranges, ip));
  }

  private store(next: Assignment): void {
    this.release(next.key);
    this.assignments.set(next.key, next);
    for (const ip of next.addresses) {
      const k = ipKey(ip);
      if (!this.holders.has(k)) this.holders.set(k, new Set());
      this.holders.get(k)!.add(next.key);
      this.claims.noteTaken(ip);
    }
  }

  // ---- requested addresses ----

  private checkRequested(req: AddressRequest): IP[] {
    const allowed = this.allowedPools(req, false);
    for (const ip of req.requested!) {
      if (!allowed.some((p) => rangesContain(p.ranges, ip))) {
        const names = allowed.map((p) => p.name).join(', ');
        throw new AllocationError(`requested address ${formatIP(ip)} is not in any pool this service may use (${names ? `allowed: ${names}` : 'none is allowed'}): ` +
          'request an address of those pools, or add this one to a pool in the cloud config', 'RequestedAddressNotInPool');
      }
      const conflict = this.conflict(req, ip);
      if (conflict) throw new AllocationError(conflict.message, conflict.condition);
      // A reservation binds requests too; a release hold only automatic picks (a request is deliberate).
      const kept = this.claims.keptFor(ip, req.key);
      if (kept?.kind === 'reserved') throw new AllocationError(`requested address ${formatIP(ip)} is ${kept.why}: request another address, or change the reservation`, 'RequestedAddressInUse');
    }
    return req.requested!;
  }

  // ---- automatic addresses ----

  /** Records in `notShared` why a fresh address was taken where the sharing key holds one. */
  private pickAddresses(req: AddressRequest, current: Assignment | undefined, notShared: NotShared[]): IP[] {
    const allowed = this.allowedPools(req, true);
    const out: IP[] = [];
    req.families.forEach((family, i) => {
      const reserved = this.claims.reservationOf(req.key).find((ip) => ip.family === family);
      if (reserved) return void out.push(this.reservedAddress(req, reserved));
      const pools = allowed.filter((p) => p.ranges.some((r) => r.family === family));
      const inPools = (ip: IP) => ip.family === family && pools.some((p) => rangesContain(p.ranges, ip));
      // A working address is never taken away, not even for a reservation made later (that service is told).
      const keep = current?.addresses.find((ip) => inPools(ip) && !this.conflict(req, ip));
      if (keep) return void out.push(keep);
      // Its own address back after a delete and re-create, while the release hold lasts.
      const held = this.claims.heldFor(req.key).find((ip) => inPools(ip) && !this.holders.has(ipKey(ip)));
      if (held) return void out.push(held);
      const shared = this.sharedAddress(req, family, pools);
      const ip = shared.address ?? this.freeAddress(family, pools, req.key);
      if (ip) {
        out.push(ip);
        if (!shared.address && shared.refused) notShared.push({ ...shared.refused, instead: ip });
      } else if (i < req.requiredFamilies) throw new AllocationError(this.noAddressMessage(req, family, pools), pools.length ? 'PoolExhausted' : 'NoEligiblePool');
    });
    return out;
  }

  /**
   * The first address (pool order, then lowest) the service's sharing key already holds in its
   * namespace (or in a pool shared across namespaces) that it can join; else the first it could
   * not join, and why.
   */
  private sharedAddress(req: AddressRequest, family: IPFamily, pools: PoolConfig[]): { address?: IP; refused?: Omit<NotShared, 'instead'> } {
    if (!req.sharingKey) return {};
    const candidates: { ip: IP; pool: number; conflict?: Conflict }[] = [];
    for (const a of this.assignments.values()) {
      if (a.key === req.key || a.sharingKey !== req.sharingKey) continue;
      for (const ip of a.addresses) {
        const pool = pools.findIndex((p) => rangesContain(p.ranges, ip));
        if (ip.family !== family || pool < 0 || !sameKeyScope(req, a, pools[pool]!)) continue;
        candidates.push({ ip, pool, conflict: this.conflict(req, ip) });
      }
    }
    candidates.sort((x, y) => x.pool - y.pool || (x.ip.value < y.ip.value ? -1 : x.ip.value > y.ip.value ? 1 : 0));
    const joinable = candidates.find((c) => !c.conflict);
    if (joinable) return { address: joinable.ip };
    const first = candidates[0];
    return first ? { refused: { address: first.ip, holder: first.conflict!.holder, reason: first.conflict!.reason } } : {};
  }

  /** The address reserved for the service, unless another service holds it (it is not taken from anyone). */
  private reservedAddress(req: AddressRequest, ip: IP): IP {
    const conflict = this.conflict(req, ip);
    if (conflict) {
      throw new AllocationError(`address ${formatIP(ip)} is reserved for this service in loadBalancer.reservations but ${conflict.message.replace(/^address \S+ is /, '')}: ` +
        'free it there, or change the reservation', conflict.condition);
    }
    return ip;
  }

  /** The lowest address nobody holds and nobody else is kept for, in the first pool that has one. */
  private freeAddress(family: IPFamily, pools: PoolConfig[], key: string): IP | undefined {
    for (const pool of pools) {
      for (const r of pool.ranges) {
        if (r.family !== family) continue;
        // Bounded by the number of held and kept addresses: each step skips one of them.
        for (let value = r.first; value <= r.last; value++) {
          const ip = { family, value };
          if (!this.holders.has(ipKey(ip)) && !this.claims.keptFor(ip, key)) return ip;
        }
      }
    }
    return undefined;
  }

  private noAddressMessage(req: AddressRequest, family: IPFamily, pools: PoolConfig[]): string {
    const free = 'add addresses to it in the cloud config, or delete a LoadBalancer service that holds one';
    if (pools.length === 1) return `pool ${pools[0]!.name} exhausted: ${free}`;
    if (pools.length > 1) return `pools ${pools.map((p) => p.name).join(', ')} exhausted: ${free.replace('to it', 'to one of them')}`;
    return `no ${familyName(family)} address pool is available to service ${req.key}` +
      (req.pools ? ` (annotation names ${req.pools.join(', ')}): name a pool with ${familyName(family)} addresses` : ': check the pools\' namespaces, serviceSelector and autoAssign in the cloud config');
  }

  // ---- shared rules ----

  /**
   * Pools the service may use: in scope (namespaces and selector) and, when the annotation names
   * pools, only those (then autoAssign does not matter). Unknown or out-of-scope names are errors.
   */
  private allowedPools(req: AddressRequest, automatic: boolean): PoolConfig[] {
    if (req.pools) {
      for (const name of req.pools) {
        const pool = this.pools.find((p) => p.name === name);
        if (!pool) throw new AllocationError(`unknown address pool ${JSON.stringify(name)} in annotation edge-ccm.io/address-pool: name one of ${this.pools.map((p) => p.name).join(', ') || '(no pools)'}`, 'NoEligiblePool');
        if (!inScope(pool, req)) throw new AllocationError(`address pool ${name} does not serve service ${req.key}: its namespaces or serviceSelector in the cloud config leave this service out`, 'NoEligiblePool');
      }
      return this.pools.filter((p) => req.pools!.includes(p.name));
    }
    return this.pools.filter((p) => inScope(p, req) && (!automatic || p.autoAssign));
  }

  /** Why the service cannot hold this address next to its current holders; undefined when it can. */
  private conflict(req: SharingTerms, ip: IP): Conflict | undefined {
    const pool = this.poolOf(ip);
    for (const holderKey of this.holders.get(ipKey(ip)) ?? []) {
      if (holderKey === req.key) continue;
      const holder = this.assignments.get(holderKey)!;
      const used = (why: string): Conflict => ({ holder: holderKey, reason: why, condition: 'RequestedAddressInUse', message: `address ${formatIP(ip)} is already used by service ${holderKey} (${why})` });
      if (!req.sharingKey || !holder.sharingKey) return used('both need the same edge-ccm.io/allow-shared-ip annotation to share it');
      if (holder.sharingKey !== req.sharingKey) return used('their sharing keys differ');
      // An address of no pool in force (a rebuild or a refusal while the file lacks its pool:
      // emptied, cut short, edited) was shared under the file that had it: the scope is that
      // file's, so it is not judged now. Every assign that hands an address out names its pool.
      if (pool && !sameKeyScope(req, holder, pool)) {
        return used(`sharing keys are scoped to the namespace, and pool ${pool.name} does not set shareAcrossNamespaces`);
      }
      const shared = (why: string, reason: string): Conflict => ({ holder: holderKey, reason, condition: 'SharingRefused', message: `address ${formatIP(ip)} is shared with service ${holderKey}, ${why}` });
      const clash = req.ports.find((p) => holder.ports.includes(p));
      if (clash) return shared(`which already uses port ${clash}`, `both use port ${clash}`);
      if (req.trafficScope !== holder.trafficScope) {
        const rule = '(services sharing an address must all use Cluster, or all Local with the same selector)';
        return shared(`whose externalTrafficPolicy or pod selector differs ${rule}`, `their externalTrafficPolicy or pod selector differ ${rule}`);
      }
    }
    return undefined;
  }
}

/**
 * Whether two services' equal sharing keys are one key: always within a namespace; across
 * namespaces only in a pool that says so, so another namespace cannot join an address by
 * guessing (or copying) a key.
 */
function sameKeyScope(a: Pick<SharingTerms, 'namespace'>, b: Pick<SharingTerms, 'namespace'>, pool: PoolConfig): boolean {
  return a.namespace === b.namespace || pool.shareAcrossNamespaces;
}

export function inScope(pool: PoolConfig, req: Pick<AddressRequest, 'namespace' | 'labels'>): boolean {
  if (pool.namespaces && !pool.namespaces.includes(req.namespace)) return false;
  return !pool.serviceSelector || pool.serviceSelector(req.labels);
}

function parseKey(k: string): IP {
  const slash = k.indexOf('/');
  return { family: Number(k.slice(0, slash)) as IPFamily, value: BigInt(k.slice(slash + 1)) };
}

function formatRange(r: AddressRange): string {
  const first = formatIP({ family: r.family, value: r.first });
  return r.first === r.last ? first : `${first}-${formatIP({ family: r.family, value: r.last })}`;
}
